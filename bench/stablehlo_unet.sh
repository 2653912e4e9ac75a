#!/bin/bash
# One SD 1.5 UNet call (batch 2, 64x64 latents, 77 tokens) two ways on this
# host: the Flax module JAX exported (tests/data/stablehlo/jax-0.4.38/
# sd15_unet.mlir.gz, weights as random arguments) under `tpumesh run`, and
# our own UNet (bench/models_bench on a random sd15.h5 from `tpumesh init`),
# at f32 (the module's arithmetic; our --precision highest) and at the MXU's
# bf16 (`run --mxu-precision`; our default). Prints host seconds and peak RSS
# of each (/usr/bin/time). The module's run includes making its 860 M random
# inputs (the "host" figure tpumesh prints is the call alone).
#   bench/stablehlo_unet.sh [BUILD_DIR=build/release] [WORK_DIR=/tmp/tpumesh-shlo-bench]
set -euo pipefail
build=${1:-build/release}
work=${2:-/tmp/tpumesh-shlo-bench}
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work"
tpumesh=$build/tools/tpumesh
[ -f "$work/sd15_unet.mlir" ] || zcat "$src/tests/data/stablehlo/jax-0.4.38/sd15_unet.mlir.gz" > "$work/sd15_unet.mlir"
[ -f "$work/sd15.h5" ] || "$tpumesh" init --arch sd15 -o "$work/sd15.h5"
lscpu | grep -E 'Model name|^CPU\(s\)'
for mode in f32 mxu; do
  flag=""; [ $mode = mxu ] && flag="--mxu-precision"
  echo "== tpumesh run sd15_unet.mlir ($mode)"
  /usr/bin/time -f "wall %e s, peak RSS %M KB" "$tpumesh" run "$work/sd15_unet.mlir" --outputs "$work/out_$mode.h5" $flag \
    | grep -E '^(ran|wrote)'
done
for precision in highest default; do
  echo "== models_bench unet, precision $precision (3 calls)"
  /usr/bin/time -f "wall %e s, peak RSS %M KB" "$build/bench/models_bench" "$work/sd15.h5" unet 3 2 64 $precision 0 \
    | grep -E 'steady|first call'
done
