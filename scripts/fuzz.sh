#!/usr/bin/env bash
# Builds the libFuzzer targets (the `asan` preset: clang with ASan+UBSan)
# and runs each from its checked-in seeds (fuzz/corpus/<target>) for RUNS
# executions (default 1000000), keeping what it finds under
# build/asan/corpus/<target>. A crash stops with libFuzzer's report and a
# non-zero exit; the crashing input is left as build/asan/crash-*.
# Usage: scripts/fuzz.sh [RUNS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1000000}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(tokenizer chip safetensors latents model_file cli workload stablehlo png compile_options)

cmake --preset asan >/dev/null
cmake --build --preset asan --target "${TARGETS[@]/%/_fuzz}" >/dev/null

for t in "${TARGETS[@]}"; do
  work=build/asan/corpus/$t
  mkdir -p "$work"
  start=$(date +%s)
  # allocator_may_return_null: a corrupt HDF5 file makes libhdf5 ask malloc for
  # absurd sizes; as in a normal build, malloc returns NULL and HDF5 reports an
  # error (ASan would abort on the request itself). -malloc_limit_mb: the same
  # requests of a few GiB (never touched) are not libFuzzer's out-of-memory;
  # RSS stays bounded by -rss_limit_mb. fuzz/lsan.supp: two leaks inside
  # libhdf5's own error paths of H5Fopen (the file says why), matched by
  # function name, so the stacks are unwound in full (fast_unwind_on_malloc=0:
  # libhdf5 has no frame pointers).
  (cd build/asan && ASAN_OPTIONS=allocator_may_return_null=1:fast_unwind_on_malloc=0 \
      LSAN_OPTIONS=suppressions=../../fuzz/lsan.supp \
      "./fuzz/${t}_fuzz" -runs="$RUNS" -max_len=65536 -timeout=20 -rss_limit_mb=3072 -malloc_limit_mb=65536 \
      -print_final_stats=1 "corpus/$t" "../../fuzz/corpus/$t" 2>"fuzz-$t.log") || {
    echo "fuzz: $t FAILED (build/asan/fuzz-$t.log)"; tail -30 "build/asan/fuzz-$t.log"; exit 1; }
  execs=$(grep -m1 'stat::number_of_executed_units' "build/asan/fuzz-$t.log" | awk '{print $2}')
  echo "fuzz: $t: ${execs:-?} executions in $(( $(date +%s) - start )) s, corpus $(ls "$work" | wc -l) inputs, no finding"
done
