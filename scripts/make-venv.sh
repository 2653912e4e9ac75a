#!/usr/bin/env bash
# Makes the venv the Python suite's second CI run uses (.ci/run,
# scripts/pytest.sh with TPUMESH_PY=venv): Debian's /usr/bin/python3 (the
# interpreter the module is built for) with python/requirements-test.txt
# from PyPI, pinned: the current jax with its jaxlib, numpy 2, ml_dtypes and
# pytest. --system-site-packages keeps the rest of Debian's python visible;
# the venv's own numpy, jax and pytest come first.
# Idempotent: a stamp holds the hash of the requirements and of the
# interpreter; when it matches, nothing is done (well under a second).
# Otherwise the venv is made anew from nothing (about 1-2 minutes: pip
# downloads 137 MB of wheels, jaxlib 85 MB of them; 41 s with its cache warm).
# Prints the venv's python on stdout, the last line.
# Usage: scripts/make-venv.sh        (TPUMESH_VENV: where, relative to the
#        repository or absolute; default build/venv. TPUMESH_VENV_PYTHON:
#        the interpreter, default /usr/bin/python3; scripts/pytest.sh passes
#        the one CMake built the module for)
set -euo pipefail
cd "$(dirname "$0")/.."
REQ=python/requirements-test.txt
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
# What the suite relies on: numpy 2 from the venv, not Debian's 1.x.
"$VENV/bin/python" -c 'import numpy, jax, ml_dtypes, pytest; assert int(numpy.__version__.split(".")[0]) >= 2, numpy.__file__' >&2
echo "$want" >"$STAMP"
echo "$(cd "$VENV" && pwd)/bin/python"
