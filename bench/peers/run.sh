#!/usr/bin/env bash
# tpumesh beside diffusers on PyTorch (Debian's 1.13 and PyPI's current 2.x),
# OpenVINO and JAX/Flax, on this host, same work, same threads: SD 1.5's UNet
# step (batch 2, 64x64 latents, 77 tokens), VAE decode (one 64x64 latent ->
# 512x512), CLIP text encoder (2 x 77 tokens), and a plain 2048^3 matmul
# (`tpumesh bench matmul` beside torch's `a @ b`, bf16 and f32).
# Usage: bench/peers/run.sh MODEL_H5 [THREADS] [VENV_DIR] [COMPONENT...]
#   MODEL_H5:   e.g. from `build/release/tools/tpumesh init --arch sd15 --dtype bf16 -o sd15.h5`
#   THREADS:    default 2;  VENV_DIR: Debian's torch 1.13 + Flax, from bench/peers/setup.sh,
#               default /opt/peers-venv
#   COMPONENT:  unet, vae-decode, text, matmul (default: these four), pipeline (the
#               whole text-to-image run: `tpumesh generate --devices 8`, 8 images, 1 step,
#               beside diffusers' StableDiffusionPipeline with 8 prompts at 1 step)
# Environment:
#   TORCH_VENV      the venv with PyPI's current torch and OpenVINO (setup.sh),
#                   default /opt/venvs/torch-current; skipped with one line if absent
#   PEERS_BACKENDS  peers.py's --backend for both venvs, default all; e.g.
#                   torch-f32,torch-f32-cl,flax-f32 where torch's bf16 has no native path (AVX2 hosts)
#   PEERS_RUNS      timed calls per peer after the warm-up, default 3 (the matmul: 10)
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=${1:?usage: bench/peers/run.sh MODEL_H5 [THREADS] [VENV_DIR] [COMPONENT...]}
THREADS=${2:-2}
VENV=${3:-/opt/peers-venv}
TORCH_VENV=${TORCH_VENV:-/opt/venvs/torch-current}
RUNS=${PEERS_RUNS:-3}
shift $(( $# < 3 ? $# : 3 ))
COMPONENTS=("$@")
[ ${#COMPONENTS[@]} -gt 0 ] || COMPONENTS=(unet vae-decode text matmul)
TPUMESH=build/release/tools/tpumesh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The host, its ISA flags that decide the kernels (ours and the peers'), and
# our peak probe (the AMX line says whether the host has the tile unit).
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; threads $THREADS; $(date -u '+%F %H:%M') UTC; load average $(cut -d' ' -f1-3 /proc/loadavg)"
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
isa=""
for f in avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 avx512_fp16 avx_vnni amx_tile amx_bf16 amx_int8; do
  case $flags in *" $f "*) isa+=" $f" ;; *) isa+=" -$f" ;; esac
done
echo "isa (-: absent):$isa"
echo "tpumesh $(git rev-parse --short HEAD 2>/dev/null || echo '?'); peers: $VENV, $TORCH_VENV"
"$TPUMESH" bench peak --threads "$THREADS" --seconds 0.3

peers() {  # COMPONENT BATCH RUNS: every backend of each venv present, into $work/peers-COMPONENT-*.json
  local i=0
  for v in "$VENV" "$TORCH_VENV"; do
    i=$((i + 1))
    if [ ! -x "$v/bin/python" ]; then
      echo "run.sh: no venv at $v (bench/peers/setup.sh makes it); its peers are left out"
      continue
    fi
    "$v/bin/python" bench/peers/peers.py --component "$1" --batch "$2" --threads "$THREADS" --runs "$3" \
        --backend "${PEERS_BACKENDS:-all}" --json "$work/peers-$1-$i.json" || true
  done
}

for c in "${COMPONENTS[@]}"; do
  echo "== $c"
  case $c in
    unet | text) batch=2 ;;
    vae-decode) batch=1 ;;
    matmul)
      # Ours: bf16 operands at default precision (what the models run), and
      # f32 operands at highest (f32 products, as torch's f32 `a @ b`).
      "$TPUMESH" bench matmul --m 2048 --n 2048 --k 2048 --dtype bf16 --precision default \
          --threads "$THREADS" --repeats 10 | tee "$work/ours-matmul-bf16.log"
      "$TPUMESH" bench matmul --m 2048 --n 2048 --k 2048 --dtype f32 --precision highest \
          --threads "$THREADS" --repeats 10 | tee "$work/ours-matmul-f32.log"
      for d in bf16 f32; do
        ms=$(sed -n 's/^  host: *\([0-9.]*\) ms median.*/\1/p' "$work/ours-matmul-$d.log")
        [ -n "$ms" ] || { echo "run.sh: no median in bench matmul's output" >&2; exit 1; }
        echo "$ms" | awk '{print $1 / 1000}' > "$work/ours-matmul-$d"
      done
      peers matmul 1 "${PEERS_RUNS:-10}"
      continue ;;
    pipeline)
      # Ours: 8 images over 8 devices (data=8), 1 step, the run's host wall
      # ("run K: X s host wall"), the median of the runs after the first
      # (which compiles, as the peers' warm-up call does).
      "$TPUMESH" generate --model "$MODEL" --devices 8 --steps 1 -p "a photo of a cat" -q -o "$work/images" \
          --runs $((RUNS + 1)) | tee "$work/ours-pipeline.log"
      sed -n 's/^run \([0-9]*\): \([0-9.]*\) s host wall.*/\1 \2/p' "$work/ours-pipeline.log" |
        awk '$1 > 1 {print $2}' | sort -g |
        awk '{a[NR] = $1} END {if (NR) print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}' \
        > "$work/ours-pipeline"
      [ -s "$work/ours-pipeline" ] || { echo "run.sh: no run times in generate's output" >&2; exit 1; }
      peers pipeline 1 "$RUNS"
      continue ;;
    *) echo "run.sh: unknown component '$c' (unet, vae-decode, text, matmul, pipeline)" >&2; exit 2 ;;
  esac
  build/release/bench/models_bench "$MODEL" "$c" 3 "$batch" 64 default "$THREADS" | tee "$work/ours-$c.log"
  ours=$(sed -n 's/.*; median \([0-9.]*\) s.*/\1/p' "$work/ours-$c.log")
  [ -n "$ours" ] || { echo "run.sh: no median in models_bench's output" >&2; exit 1; }
  echo "$ours" > "$work/ours-$c"
  peers "$c" "$batch" "$RUNS"
done

echo "done $(date -u '+%H:%M') UTC; load average $(cut -d' ' -f1-3 /proc/loadavg) (other processes share these cores: a load above $(nproc) slows every figure)"

# One table: our median, each peer's, and the peer's over ours (above 1:
# tpumesh is faster). The matmul's peers are set beside ours of the same dtype.
python3 - "$work" "${COMPONENTS[@]}" <<'PY'
import glob, json, os, sys
work = sys.argv[1]
print(f"\n{'component':11s} {'who':20s} {'library':24s} {'median s':>9s}  {'peer / tpumesh':>14s}  {'compile s':>9s}")
for c in sys.argv[2:]:
  peers = []
  for path in sorted(glob.glob(os.path.join(work, f"peers-{c}-*.json"))):
    peers += json.load(open(path))
  rows = [("bf16", "-bf16"), ("f32", "-f32")] if c == "matmul" else [("", "")]
  for dtype, suffix in rows:
    ours = float(open(os.path.join(work, f"ours-{c}" + (f"-{dtype}" if dtype else ""))).read())
    label = f"{c} {dtype}".strip()
    ours_how = {"bf16": "tpumesh (bf16, default)", "f32": "tpumesh (f32, highest)"}.get(dtype, "tpumesh")
    print(f"{label:11s} {ours_how:20s} {'':24s} {ours:9.4f}  {'1.00':>14s}")
    for r in peers:
      if suffix and not r["backend"].endswith(suffix):
        continue
      if "error" in r:
        print(f"{'':11s} {r['backend']:20s} {r.get('library', ''):24s} failed: {r['error']}")
        continue
      compile_s = f"{r['compile_s']:9.1f}" if "compile" in r["backend"] or r["backend"].startswith(("openvino", "flax")) else ""
      print(f"{'':11s} {r['backend']:20s} {r['library']:24s} {r['median_s']:9.4f}  {r['median_s'] / ours:14.2f}  {compile_s:>9s}")
PY
