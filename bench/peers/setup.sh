#!/usr/bin/env bash
# A Python environment for the peer timings (bench/peers/README.md) and the
# default model's training (scripts/train_default): Debian's
# PyTorch (python3-torch, 1.13) and, in a venv that sees it, JAX, Flax and
# diffusers pinned from PyPI. Not used by the build or the tests.
# Usage: bench/peers/setup.sh [VENV_DIR]     (default /opt/peers-venv)
set -euo pipefail
VENV=${1:-/opt/peers-venv}
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch python3-venv
/usr/bin/python3 -m venv --system-site-packages "$VENV"  # Debian's Python, which sees python3-torch
# numpy < 2 for Debian's torch 1.13; diffusers 0.31 still ships the Flax UNet.
"$VENV/bin/pip" install -q "numpy<2" "h5py<3.12" "jax[cpu]==0.4.38" "flax==0.10.2" "diffusers==0.31.0" "transformers==4.46.3"
"$VENV/bin/python" -c "import torch, jax, flax, diffusers; from diffusers import UNet2DConditionModel, FlaxUNet2DConditionModel; print('peers env:', 'torch', torch.__version__, 'jax', jax.__version__, 'flax', flax.__version__, 'diffusers', diffusers.__version__)"
