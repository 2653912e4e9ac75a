#!/usr/bin/env bash
# The sanitizer jobs CI runs after the release tests (.ci/run):
#   1. ASan+UBSan (clang, the `asan` preset): the base, io, text, schedulers,
#      pipeline and CLI tests, i.e. every parser, the pipeline end to end and
#      every subcommand through the real binary;
#   2. a short libFuzzer pass: each target in fuzz/ for FUZZ_RUNS executions
#      (default 20000) from its checked-in seeds, in the same build;
#   3. TSan (gcc, the `tsan` preset): the base, kernels and mesh tests, the
#      kernels also under TPUMESH_SIMD=baseline and avx2 (not avx512: with no
#      AVX3 target compiled it differs from avx2 only in BLIS's kernel, and
#      the threading it checks is the same on every path; 45 s of a 31-min
#      CI on a Zen 3 host).
# Both builds compile Highway's AVX2 and portable targets only (see
# CMakePresets.json); every host runs them. Any finding fails the script.
# Usage: scripts/sanitizers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_RUNS=${FUZZ_RUNS:-20000}

step() { echo "sanitizers: $1 ($(date -u +%T))"; }
step "ASan+UBSan build"
cmake --preset asan >/dev/null && cmake --build --preset asan
step "ASan+UBSan tests"
ctest --preset asan
step "fuzz: ${FUZZ_RUNS} executions per target"
./scripts/fuzz.sh "$FUZZ_RUNS"
step "TSan build"
cmake --preset tsan >/dev/null && cmake --build --preset tsan
step "TSan tests"
ctest --preset tsan
step "done"
