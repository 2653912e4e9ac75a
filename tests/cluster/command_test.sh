#!/usr/bin/env bash
# The tpumesh commands under mpirun against one process (issue 30; run by
# ctest, tests/cluster/CMakeLists.txt):
#
#   command_test.sh MODE TPUMESH NP MESH MPIRUN [MPIRUN FLAGS...]
#
#   generate   `generate --devices 8 --mesh MESH` (the embedded default
#              model, 2 steps) on NP ranks writes the same PNG bytes (grid
#              included), per-layer CSV bytes and JSON report (host times
#              aside) as one process
#   eval       `eval --component vae_decoder` of a tiny model on 8 latents:
#              the same HDF5 bytes and report (host times aside)
#   simulate   `simulate --arch tiny`: the same report and CSV
#   bad-input  rank 1 alone reads an empty --prompts-file (the same path,
#              each rank in its own folder, as on separate hosts): every
#              rank exits non-zero within 30 s, one line names rank 1,
#              nothing written
#   other-args rank 1 is started with another --seed: refused before any
#              work, one line naming rank 1 and the argument, nothing written
#   sigkill    rank 1 is killed with SIGKILL mid-run: every rank exits
#              non-zero within 30 s, mpirun names the signal, nothing written
#   sigint     rank 1 alone gets SIGINT mid-run (its graceful stop), while
#              the other ranks' devices compute on (a run of over a minute):
#              every rank exits non-zero within 30 s, one line from rank 1
#              naming the step it stopped at, nothing written
#   sigterm    rank 1 alone gets SIGTERM mid-run: the same, mpirun names
#              the signal; at most one line of ours (rank 0's, when mpirun
#              ends it with SIGTERM)
#
# (`command_test.sh --rank-wrapper CMD...` is how the script runs each rank
# for the last ones: @RANK@ in an argument becomes the rank; with
# RANK_DIRS=1 each rank runs in the folder rank_R; rank $KILL_RANK sends
# itself $KILL_SIGNAL (default KILL) after $KILL_AFTER seconds.)
set -u
if [ "${1:-}" = "--rank-wrapper" ]; then
  shift
  r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
  n=$#
  for a in "$@"; do set -- "$@" "${a//@RANK@/$r}"; done
  shift "$n"
  [ -n "${RANK_DIRS:-}" ] && { cd "rank_$r" || exit 1; }
  if [ -n "${KILL_RANK:-}" ] && [ "$r" = "$KILL_RANK" ]; then
    me=$$
    (sleep "${KILL_AFTER:-1}"; kill -s "${KILL_SIGNAL:-KILL}" "$me") &
  fi
  exec "$@"
fi

mode=$1 tpumesh=$2 np=$3 mesh=$4
shift 4
mpirun=("$@" -np "$np")
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail=0
no() { echo "FAIL: $*"; fail=1; }

# A JSON report without its host times (each key on its own line; commas
# dropped so that a removed last key leaves the rest equal).
strip_host() {
  awk '/"host_seconds_per_rank": \[/ {skip=1; next} skip && /\]/ {skip=0; next} skip {next}
       /"host_seconds"|"simulation_wall_seconds"/ {next} {sub(/,$/, ""); print}' "$1"
}
same_report() {  # one-process report, mpirun report
  if ! diff <(strip_host "$1") <(strip_host "$2") >/dev/null; then
    no "$2 differs from $1 apart from host times:"
    diff <(strip_host "$1") <(strip_host "$2") | head -20
  fi
  grep -q '"host_seconds_per_rank"' "$2" || no "$2 has no host_seconds_per_rank"
  [ "$(tr -d ' \n' <"$2" | grep -o '"host_seconds_per_rank":\[[^]]*\]' | tr -cd ',' | wc -c)" -eq $((np - 1)) ] ||
    no "$2: host_seconds_per_rank does not hold $np ranks"
}
same_file() {
  cmp "$1" "$2" || no "$2 differs from $1"
}

run_mpi() {  # the mpirun of a command, its output in mpi.log
  local start=$(date +%s%N)
  timeout --kill-after=5 120 "${mpirun[@]}" "$@" >mpi.log 2>&1
  rc=$?
  elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  echo "mpirun -np $np: exit $rc after ${elapsed_ms} ms"
}

case "$mode" in
  generate)
    args=(generate -p "a red circle on a blue background" --devices 8 --mesh "$mesh" --steps 2 -q)
    "$tpumesh" "${args[@]}" -o one --report one.json --report-csv one.csv >one.log 2>&1 || { cat one.log; no "one process"; }
    run_mpi "$tpumesh" "${args[@]}" -o many --report many.json --report-csv many.csv
    [ "$rc" -eq 0 ] || { cat mpi.log; no "mpirun exit $rc"; }
    [ "$(ls one | wc -l)" -ge 3 ] || no "one process wrote $(ls one | wc -l) files, want the images and the grid"
    for f in one/*.png; do same_file "$f" "many/$(basename "$f")"; done
    [ "$(ls many | wc -l)" -eq "$(ls one | wc -l)" ] || no "mpirun wrote $(ls many | wc -l) files"
    same_file one.csv many.csv
    same_report one.json many.json
    [ "$(grep -c '^wrote ' mpi.log)" -eq 1 ] || { cat mpi.log; no "want one 'wrote' line (rank 0 prints)"; }
    ;;
  eval)
    "$tpumesh" init --arch tiny -o m.h5 -q >/dev/null &&
      "$tpumesh" generate -p "a red circle" --devices 8 --steps 1 -o img -q --save-latents lat.h5 >/dev/null ||
      no "making the model and latents"
    args=(eval --model m.h5 --component vae_decoder --input lat.h5 --mesh "$mesh")
    "$tpumesh" "${args[@]}" --output one.h5 --report one.json >one.log 2>&1 || { cat one.log; no "one process"; }
    run_mpi "$tpumesh" "${args[@]}" --output many.h5 --report many.json
    [ "$rc" -eq 0 ] || { cat mpi.log; no "mpirun exit $rc"; }
    same_file one.h5 many.h5
    same_report one.json many.json
    ;;
  simulate)
    args=(simulate --arch tiny --devices 8 --mesh "$mesh" --steps 2)
    "$tpumesh" "${args[@]}" --report one.json --report-csv one.csv >one.log 2>&1 || { cat one.log; no "one process"; }
    run_mpi "$tpumesh" "${args[@]}" --report many.json --report-csv many.csv
    [ "$rc" -eq 0 ] || { cat mpi.log; no "mpirun exit $rc"; }
    same_file one.csv many.csv
    same_report one.json many.json
    [ "$(grep -c '^simulated ' mpi.log)" -eq 1 ] || { cat mpi.log; no "want one 'simulated' line (rank 0 prints)"; }
    ;;
  bad-input)
    for ((k = 0; k < np; ++k)); do mkdir "rank_$k" && printf 'a red circle\n' >"rank_$k/prompts.txt"; done
    : >rank_1/prompts.txt  # rank 1's copy is empty
    RANK_DIRS=1 run_mpi "$self" --rank-wrapper "$tpumesh" generate --prompts-file prompts.txt --devices 8 \
      --mesh "$mesh" --steps 2 -o out --report out.json -q
    cat mpi.log
    [ "$rc" -ne 0 ] || no "exit status 0"
    [ "$elapsed_ms" -lt 30000 ] || no "took ${elapsed_ms} ms (limit 30 s)"
    [ "$(grep -cE '^tpumesh: ' mpi.log)" -eq 1 ] || no "want exactly one tpumesh line"
    grep -qE "^tpumesh: rank 1 of $np: INVALID_ARGUMENT: prompts.txt: no prompts" mpi.log || no "no line from rank 1 naming its file"
    [ -z "$(ls rank_*/out rank_*/out.json 2>/dev/null)" ] || no "files written: $(ls rank_*)"
    ;;
  other-args)
    run_mpi "$self" --rank-wrapper "$tpumesh" generate -p "a red circle" --seed "@RANK@" --devices 8 \
      --mesh "$mesh" --steps 2 -o out --report out.json -q
    cat mpi.log
    [ "$rc" -ne 0 ] || no "exit status 0"
    [ "$elapsed_ms" -lt 30000 ] || no "took ${elapsed_ms} ms (limit 30 s)"
    [ "$(grep -cE '^tpumesh: ' mpi.log)" -eq 1 ] || no "want exactly one tpumesh line"
    grep -qE "^tpumesh: rank 0 of $np: INVALID_ARGUMENT: rank 1 was started with '--seed 1' where rank 0 has '--seed 0'" \
      mpi.log || no "no line naming rank 1 and its --seed"
    [ ! -e out ] && [ ! -e out.json ] || no "files written: $(ls)"
    ;;
  sigkill)
    mkdir out
    KILL_RANK=1 KILL_AFTER=1.5 run_mpi "$self" --rank-wrapper "$tpumesh" generate -p "a red circle" --devices 8 \
      --mesh "$mesh" --steps 1000 -o out --report out.json -q
    cat mpi.log
    [ "$rc" -ne 0 ] || no "exit status 0"
    [ "$elapsed_ms" -lt 30000 ] || no "took ${elapsed_ms} ms (limit 30 s)"
    grep -qE "rank 1 .*exited on signal 9" mpi.log || no "no line naming rank 1 and SIGKILL"
    [ -z "$(ls -A out)" ] && [ ! -e out.json ] || no "files written: $(ls -A out) $(ls)"
    ;;
  sigint | sigterm)
    # 128x128 over 300 steps: over a minute of work per rank here, so that
    # waiting for the others to finish their steps would show.
    mkdir out
    sig=INT
    [ "$mode" = sigterm ] && sig=TERM
    KILL_SIGNAL=$sig KILL_RANK=1 KILL_AFTER=3 run_mpi "$self" --rank-wrapper "$tpumesh" generate -p "a red circle" \
      --devices 8 --mesh "$mesh" --width 128 --height 128 --steps 300 -o out --report out.json -q
    cat mpi.log
    [ "$rc" -ne 0 ] || no "exit status 0"
    [ "$elapsed_ms" -lt 30000 ] || no "took ${elapsed_ms} ms (limit 30 s)"
    lines=$(grep -cE '^tpumesh: rank ' mpi.log)
    if [ "$mode" = sigint ]; then
      # Rank 1 stops at its next step (or, if the signal came before its
      # steps began, dies of it: mpirun names the signal).
      if ! grep -qE "rank 1 .*exited on signal 2" mpi.log; then
        [ "$lines" -eq 1 ] || no "want exactly one 'tpumesh: rank' line, got $lines"
        grep -qE "^tpumesh: rank 1 of $np: CANCELLED: pmap: device [0-9]+: cancelled at step [0-9]+" mpi.log ||
          no "no line from rank 1 naming the step it stopped at"
      fi
    else
      grep -qE "rank 1 .*exited on signal 15" mpi.log || no "no line naming rank 1 and SIGTERM"
      [ "$lines" -le 1 ] || no "want at most one 'tpumesh: rank' line, got $lines"
    fi
    [ -z "$(ls -A out)" ] && [ ! -e out.json ] || no "files written: $(ls -A out) $(ls)"
    ;;
  *)
    echo "unknown mode $mode"
    exit 2
    ;;
esac
[ "$fail" -eq 0 ] && echo "PASS: $mode, $np ranks, mesh $mesh"
exit "$fail"
