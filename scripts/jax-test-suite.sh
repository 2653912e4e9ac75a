#!/usr/bin/env bash
# JAX's own test suite on tpumesh against JAX's CPU backend, per file, with
# the failures grouped by cause (docs/pjrt.md, "JAX's test suite";
# scripts/jax_test_suite.py says how). Needs a build with TPUMESH_PYTHON=ON
# (targets _tpumesh and pjrt_plugin_tpumesh) and a venv with jax.
# Usage: scripts/jax-test-suite.sh --python /opt/venvs/jaxnew/bin/python --jax-git DIR
#            [--out REPORT.md] [--full | --cases N] [-k EXPR] [--files a_test.py ...]
#        (--help for the rest)
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/jax_test_suite.py "$@"
