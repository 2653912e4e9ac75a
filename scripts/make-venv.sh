#!/usr/bin/env bash
# Makes a venv the Python suite's CI runs use (.ci/run, scripts/pytest.sh
# with TPUMESH_PY=venv or venv-NAME): Debian's /usr/bin/python3 (the
# interpreter the module is built for) with a pinned requirements file from
# PyPI. Two exist, the two ends of the jax releases the PJRT plugin supports
# (docs/jax-backend.md, "Versions"):
#   python/requirements-test.txt           build/venv: the current jax
#       (0.10.2) with its jaxlib, numpy 2, ml_dtypes and pytest;
#   python/requirements-test-jax0438.txt   build/venv-jax0438: the oldest,
#       jax 0.4.38, with numpy 1.26.4.
# --system-site-packages keeps the rest of Debian's python visible; the
# venv's own numpy, jax and pytest come first (checked: the pinned numpy and
# jax, imported from the venv).
# Idempotent: a stamp holds the hash of the requirements and of the
# interpreter; when it matches, nothing is done (well under a second).
# Otherwise the venv is made anew from nothing: pip downloads ~140-160 MB of
# wheels (jaxlib 85 MB for 0.10.2, 102 MB for 0.4.38) and installs them:
# 21-41 s here with a fast index; about 1-2 minutes on a clean machine.
# Prints the venv's python on stdout, the last line.
# Usage: scripts/make-venv.sh        (TPUMESH_VENV: where, relative to the
#        repository or absolute; default build/venv. TPUMESH_VENV_REQUIREMENTS:
#        the pinned file, default python/requirements-test.txt.
#        TPUMESH_VENV_PYTHON: the interpreter, default /usr/bin/python3;
#        scripts/pytest.sh passes the one CMake built the module for)
set -euo pipefail
cd "$(dirname "$0")/.."
REQ=${TPUMESH_VENV_REQUIREMENTS:-python/requirements-test.txt}
VENV=${TPUMESH_VENV:-build/venv}
PYTHON=${TPUMESH_VENV_PYTHON:-/usr/bin/python3}
STAMP="$VENV/.tpumesh-requirements"
want=$( { sha256sum "$REQ" | cut -d' ' -f1; "$PYTHON" -c 'import os, sys; print(os.path.realpath(sys.executable), sys.version)'; } | sha256sum | cut -d' ' -f1)
if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  echo "$(cd "$VENV" && pwd)/bin/python"
  exit 0
fi
if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ]; then
  echo "make-venv: $VENV exists and is not a venv: not replacing it" >&2
  exit 1
fi
echo "make-venv: making $VENV from $PYTHON with $REQ" >&2
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PYTHON" -m venv --system-site-packages "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$REQ" >&2
# What the suite relies on: the pinned numpy and jax, from the venv (not
# Debian's numpy 1.24).
pinned() { sed -n "s/^$1\(\[[a-z]*\]\)\?==//p" "$REQ"; }
"$VENV/bin/python" - "$(pinned numpy)" "$(pinned jax)" "$(cd "$VENV" && pwd)" >&2 <<'PY'
import sys
import jax, ml_dtypes, numpy, pytest
numpy_pin, jax_pin, venv = sys.argv[1:]
assert numpy.__version__ == numpy_pin and numpy.__file__.startswith(venv), (numpy.__version__, numpy.__file__)
assert jax.__version__ == jax_pin and jax.__file__.startswith(venv), (jax.__version__, jax.__file__)
PY
echo "$want" >"$STAMP"
echo "$(cd "$VENV" && pwd)/bin/python"
