#!/usr/bin/env bash
# The Python suite (python/tests, docs/python.md) against a build, as CI runs
# it after ctest (.ci/run): the build's python/ folder on PYTHONPATH, the
# interpreter CMake built the module for (Debian's python3 by default), the
# build's tools/tpumesh as the CLI the tests compare with.
# Exit codes are pytest's, except 5 ("no tests collected"), which means the
# suite's setup is broken: a failure here, not a pass. Under CI=true a
# skipped test fails (python/tests/conftest.py).
# TPUMESH_PY=venv runs the suite with the venv of scripts/make-venv.sh
# instead (made first when missing or stale: the current jax and numpy 2
# from PyPI, python/requirements-test.txt, on the same interpreter), where
# the jax tests must run (TPUMESH_REQUIRE_JAX=1: jax missing is an error,
# not a deselection). TPUMESH_PY=venv-NAME does the same with
# python/requirements-test-NAME.txt in build/venv-NAME: venv-jax0438 is the
# oldest jax the PJRT plugin supports (jax 0.4.38, numpy 1.26.4).
# Usage: scripts/pytest.sh [pytest args]     (TPUMESH_BUILD_DIR: default build/release;
#        TPUMESH_PY=venv or venv-NAME; TPUMESH_VENV: the venv's folder,
#        default build/venv or build/venv-NAME)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(realpath "${TPUMESH_BUILD_DIR:-build/release}")
CACHE="$BUILD/CMakeCache.txt"
if ! grep -q '^TPUMESH_PYTHON:BOOL=ON' "$CACHE" 2>/dev/null; then
  echo "pytest.sh: $BUILD has no Python module (TPUMESH_PYTHON is not ON in $CACHE)" >&2
  exit 1
fi
PY=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "$CACHE")
case "${TPUMESH_PY:-}" in
  "") ;;
  venv)
    PY=$(TPUMESH_VENV_PYTHON="$PY" ./scripts/make-venv.sh | tail -n 1)
    export TPUMESH_REQUIRE_JAX=1
    ;;
  venv-*)
    NAME=${TPUMESH_PY#venv-}
    REQ=python/requirements-test-$NAME.txt
    if [ ! -f "$REQ" ]; then
      echo "pytest.sh: TPUMESH_PY=$TPUMESH_PY needs $REQ, which does not exist" >&2
      exit 1
    fi
    PY=$(TPUMESH_VENV_PYTHON="$PY" TPUMESH_VENV_REQUIREMENTS="$REQ" TPUMESH_VENV="${TPUMESH_VENV:-build/venv-$NAME}" \
         ./scripts/make-venv.sh | tail -n 1)
    export TPUMESH_REQUIRE_JAX=1
    ;;
  *) echo "pytest.sh: TPUMESH_PY is 'venv', 'venv-NAME' or unset, not '$TPUMESH_PY'" >&2; exit 1 ;;
esac
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
export TPUMESH_BUILD_DIR="$BUILD"
set +e
"$PY" -m pytest -p no:cacheprovider -q python/tests "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest.sh: pytest collected no tests (exit 5): the suite's setup is broken" >&2
  exit 1
fi
exit "$rc"
