#!/usr/bin/env bash
# The full run: VAE phase, latent dataset, joint phase to STEPS total steps,
# export to $OUT/model, then sample_eval (score appended to $OUT/train.log).
# Resumes whatever $OUT already holds (vae.pt, latents.pt, ckpt.pt), so the
# same command continues an interrupted run or, with a larger STEPS, extends
# a finished one. One thread throughout.
#   nohup scripts/train_default/run_full.sh > out/train_default/run.out 2>&1 &
set -euo pipefail
OUT=${OUT:-out/train_default}
STEPS=${STEPS:-2600}
THREADS=${THREADS:-1}
PY=${PY:-/opt/peers-venv/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS BLIS_NUM_THREADS=$THREADS
mkdir -p "$OUT"
echo "$(date '+%Y-%m-%d %H:%M:%S') run_full.sh: OUT=$OUT STEPS=$STEPS THREADS=$THREADS $*" >> "$OUT/train.log"
"$PY" "$HERE/train.py" --out "$OUT" --steps "$STEPS" --threads "$THREADS" --resume "$@"
"$PY" "$HERE/sample_eval.py" --model "$OUT/model" --threads "$THREADS" --log "$OUT/train.log"
echo "$(date '+%Y-%m-%d %H:%M:%S') run_full.sh: done" >> "$OUT/train.log"
