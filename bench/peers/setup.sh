#!/usr/bin/env bash
# The Python environments for the peer timings (bench/peers/README.md) and the
# default model's training (scripts/train_default):
#   VENV_DIR    Debian's PyTorch (python3-torch, 1.13) and, in a venv that sees
#               it, JAX, Flax and diffusers pinned from PyPI;
#   TORCH_VENV  PyPI's current PyTorch (2.x; its Linux wheel brings the CUDA
#               libraries, about 6 GB in all, unused on a CPU) with OpenVINO
#               and a current diffusers, in a venv of its own.
# Not used by the build or the tests.
# Usage: bench/peers/setup.sh [VENV_DIR [TORCH_VENV]]
#        (defaults /opt/peers-venv and /opt/venvs/torch-current; TORCH_VENV=none skips it)
set -euo pipefail
VENV=${1:-/opt/peers-venv}
TORCH_VENV=${2:-/opt/venvs/torch-current}
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
# python3-dev: torch.compile's inductor builds its C++ kernels against Python.h.
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch python3-venv python3-dev
/usr/bin/python3 -m venv --system-site-packages "$VENV"  # Debian's Python, which sees python3-torch
# numpy < 2 for Debian's torch 1.13; diffusers 0.31 still ships the Flax UNet.
"$VENV/bin/pip" install -q "numpy<2" "h5py<3.12" "jax[cpu]==0.4.38" "flax==0.10.2" "diffusers==0.31.0" "transformers==4.46.3"
"$VENV/bin/python" -c "import torch, jax, flax, diffusers; from diffusers import UNet2DConditionModel, FlaxUNet2DConditionModel; print('peers env:', 'torch', torch.__version__, 'jax', jax.__version__, 'flax', flax.__version__, 'diffusers', diffusers.__version__)"

[ "$TORCH_VENV" = none ] && exit 0
/usr/bin/python3 -m venv "$TORCH_VENV"  # no system site packages: Debian's torch 1.13 stays out
"$TORCH_VENV/bin/pip" install -q "torch==2.15.0" "openvino==2026.4.1" "diffusers==0.42.1" "transformers==5.24.0" "numpy==2.4.6"
"$TORCH_VENV/bin/python" -c "import torch, openvino, diffusers, transformers; print('current torch env:', 'torch', torch.__version__, 'openvino', openvino.get_version(), 'diffusers', diffusers.__version__, 'transformers', transformers.__version__)"
