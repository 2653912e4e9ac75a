#!/bin/bash
# `tpumesh generate` in one process against the same run over MPI ranks on
# this host (docs/cluster.md, "The commands across ranks"): the host wall
# time generate reports for the run (mpirun's start-up excluded), median of
# REPEATS runs each, the ratio, whether the PNGs are the same bytes, and the
# peak RSS of the process and of each rank (/usr/bin/time).
#   bench/cluster_generate.sh [MODEL=default] [MESH=data=8] [DEVICES=8] [RANKS=2] [REPEATS=3] [STEPS=50] [BUILD_DIR=build/release]
# MODEL "default" is the embedded model; otherwise a model file, e.g.
#   tpumesh init --arch sd15 --dtype bf16 -o /tmp/sd15.h5
#   bench/cluster_generate.sh /tmp/sd15.h5 data=4,model=2 8 2 1 1
set -euo pipefail
model=${1:-default}
mesh=${2:-data=8}
devices=${3:-8}
ranks=${4:-2}
repeats=${5:-3}
steps=${6:-50}
build=${7:-build/release}
tpumesh=$(realpath "$build/tools/tpumesh")
work=$(mktemp -d /tmp/tpumesh-cluster-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
model_flag=()
[ "$model" = default ] || model_flag=(--model "$model")
args=(generate "${model_flag[@]}" --devices "$devices" --mesh "$mesh" --steps "$steps" -q
      -p "a red circle on a blue background")
mpirun_flags=(-np "$ranks" --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun_flags+=(--allow-run-as-root)
lscpu | grep -E 'Model name|^CPU\(s\)'
echo "model $model, mesh $mesh, $devices devices, $steps steps, 1 process vs $ranks ranks, $repeats runs each"

# The host wall time of the run, from generate's "run 1: X s host wall".
wall() { sed -n 's/^run 1: \([0-9.]*\) s host wall.*/\1/p' "$1"; }
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

for i in $(seq "$repeats"); do
  /usr/bin/time -f "%M" -o "$work/rss1.$i" "$tpumesh" "${args[@]}" -o "$work/one" > "$work/one.$i"
  wall "$work/one.$i" >> "$work/one.walls"
  mpirun "${mpirun_flags[@]}" bash -c \
    "/usr/bin/time -f %M -o $work/rssR.$i.\$OMPI_COMM_WORLD_RANK $tpumesh ${args[*]@Q} -o $work/ranks" \
    > "$work/ranks.$i"
  wall "$work/ranks.$i" >> "$work/ranks.walls"
done
one=$(median < "$work/one.walls")
many=$(median < "$work/ranks.walls")
same=no
cmp -s "$work/one/grid.png" "$work/ranks/grid.png" && same=yes
echo "host wall, median: 1 process $one s, $ranks ranks $many s ($(awk -v a="$one" -v b="$many" 'BEGIN {printf "%+.1f%%", (b / a - 1) * 100}')); same PNGs: $same"
echo "peak RSS: 1 process $(median < <(cat "$work"/rss1.*) | awk '{printf "%.2f GB", $1 / 1048576}'); per rank $(
  for r in $(seq 0 $((ranks - 1))); do cat "$work"/rssR.*."$r" | median; done | awk '{printf "%s%.2f", (NR > 1 ? ", " : ""), $1 / 1048576} END {print " GB"}')"
