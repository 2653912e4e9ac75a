#!/bin/bash
# Peak host memory of `tpumesh generate` on full-size models (issue 43; the
# figures in docs/mesh.md, "Host memory of a generate run"): the maximum
# resident set (/usr/bin/time -v, KiB and decimal GB) and the host wall time
# of two runs, one after the other (never together: each holds several GB):
#   SD 1.5, 8 images on 8 devices, 1 step, its default 512x512, precision default
#   SDXL, 1 image on 1 device, 1 step, its default 1024x1024, precision default
# with random-weight bf16 model files, as a converted model holds them:
#   tpumesh init --arch sd15 --dtype bf16 -o /tmp/sd15.h5
#   tpumesh init --arch sdxl --dtype bf16 -o /tmp/sdxl.h5
#   bench/peak_rss.sh [SD15=/tmp/sd15.h5] [SDXL=/tmp/sdxl.h5] [BUILD_DIR=build/release]
# A model given as "-" is skipped. Each run takes minutes on a 2-core host.
set -euo pipefail
sd15=${1:-/tmp/sd15.h5}
sdxl=${2:-/tmp/sdxl.h5}
build=${3:-build/release}
tpumesh=$(realpath "$build/tools/tpumesh")
work=$(mktemp -d /tmp/tpumesh-peak-rss.XXXXXX)
trap 'rm -rf "$work"' EXIT
lscpu | grep -E 'Model name|^CPU\(s\)'

run() {  # NAME MODEL DEVICES
  local name=$1 model=$2 devices=$3
  if [ "$model" = - ]; then return; fi
  if [ ! -f "$model" ]; then
    echo "$name: $model not found (tpumesh init --arch ... --dtype bf16 -o $model)" >&2
    return 1
  fi
  /usr/bin/time -v -o "$work/$name.time" "$tpumesh" generate --model "$model" --devices "$devices" --steps 1 -q \
    -p "a photo" -o "$work/$name.out" > "$work/$name.log"
  local kib wall
  kib=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/$name.time")
  wall=$(sed -n 's/^run 1: \([0-9.]*\) s host wall.*/\1/p' "$work/$name.log")
  awk -v n="$name" -v k="$kib" -v w="$wall" \
    'BEGIN {printf "%-34s peak RSS %d KiB = %.2f GB, run %s s host wall\n", n, k, k * 1024 / 1e9, w}'
}

run "sd15: 8 devices x 1 image" "$sd15" 8
run "sdxl: 1 device x 1 image" "$sdxl" 1
