#!/usr/bin/env bash
# tpumesh beside diffusers on PyTorch and on JAX/Flax, on this host, same work,
# same threads: SD 1.5's UNet step (batch 2, 64x64 latents, 77 tokens), VAE
# decode (one 64x64 latent -> 512x512) and CLIP text encoder (2 x 77 tokens).
# Usage: bench/peers/run.sh MODEL_H5 [THREADS] [VENV_DIR] [COMPONENT...]
#   MODEL_H5:   e.g. from `build/release/tools/tpumesh init --arch sd15 --dtype bf16 -o sd15.h5`
#   THREADS:    default 2;  VENV_DIR: from bench/peers/setup.sh, default /opt/peers-venv
#   COMPONENT:  unet, vae-decode, text (default: all three)
# PEERS_BACKENDS (environment): peers.py's --backend, default all; e.g.
#   torch-f32,torch-f32-cl,flax-f32 where torch's bf16 has no native path (AVX2 hosts).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=${1:?usage: bench/peers/run.sh MODEL_H5 [THREADS] [VENV_DIR] [COMPONENT...]}
THREADS=${2:-2}
VENV=${3:-/opt/peers-venv}
shift $(( $# < 3 ? $# : 3 ))
COMPONENTS=("$@")
[ ${#COMPONENTS[@]} -gt 0 ] || COMPONENTS=(unet vae-decode text)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; threads $THREADS; $(date -u +%F)"
for c in "${COMPONENTS[@]}"; do
  case $c in
    unet | text) batch=2 ;;
    vae-decode) batch=1 ;;
    *) echo "run.sh: unknown component '$c' (unet, vae-decode, text)" >&2; exit 2 ;;
  esac
  echo "== $c"
  build/release/bench/models_bench "$MODEL" "$c" 3 "$batch" 64 default "$THREADS" | tee "$work/ours-$c.log"
  ours=$(sed -n 's/.*; median \([0-9.]*\) s.*/\1/p' "$work/ours-$c.log")
  [ -n "$ours" ] || { echo "run.sh: no median in models_bench's output" >&2; exit 1; }
  echo "$ours" > "$work/ours-$c"
  "$VENV/bin/python" bench/peers/peers.py --component "$c" --batch "$batch" --threads "$THREADS" \
      --backend "${PEERS_BACKENDS:-all}" --json "$work/peers-$c.json" || true
done
"$VENV/bin/python" - "$work" "${COMPONENTS[@]}" <<'PY'
import json, os, sys
work = sys.argv[1]
print(f"\n{'component':11s} {'':14s} {'median s':>9s}  {'peer / tpumesh':>14s}")
for c in sys.argv[2:]:
  ours = float(open(os.path.join(work, f"ours-{c}")).read())
  print(f"{c:11s} {'tpumesh':14s} {ours:9.3f}  {'1.00':>14s}")
  path = os.path.join(work, f"peers-{c}.json")
  for r in json.load(open(path)) if os.path.exists(path) else []:
    if "error" in r:
      print(f"{'':11s} {r['backend']:14s} failed: {r['error']}")
    else:
      print(f"{'':11s} {r['backend']:14s} {r['median_s']:9.3f}  {r['median_s'] / ours:14.2f}")
PY
