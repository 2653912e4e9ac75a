#!/usr/bin/env bash
# Runs a command (an mpirun of cluster_fault_main) and passes when it ends
# non-zero within MAX_SECONDS (default 30) and its output holds exactly one
# "tpumesh: rank R of N:" line, naming rank $EXPECT_RANK (default 1).
# Usage: expect_one_failure.sh COMMAND...
set -u
max=${MAX_SECONDS:-30}
rank=${EXPECT_RANK:-1}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s%N)
timeout --kill-after=5 $((max + 30)) "$@" >"$log" 2>&1
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$log"
lines=$(grep -cE '^tpumesh: rank [0-9]+ of [0-9]+:' "$log")
echo "expect_one_failure: exit $rc after ${elapsed_ms} ms, $lines failure line(s)"
fail=0
[ "$rc" -ne 0 ] || { echo "FAIL: exit status 0"; fail=1; }
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { echo "FAIL: hung (killed by timeout)"; fail=1; }
[ "$elapsed_ms" -lt $((max * 1000)) ] || { echo "FAIL: took ${elapsed_ms} ms (limit ${max} s)"; fail=1; }
[ "$lines" -eq 1 ] || { echo "FAIL: want exactly one failure line"; fail=1; }
grep -qE "^tpumesh: rank $rank of [0-9]+: .*bad input seen by rank $rank only" "$log" ||
  { echo "FAIL: no line from rank $rank with its message"; fail=1; }
exit $fail
