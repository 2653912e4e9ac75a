#!/usr/bin/env python3
"""Times one SD 1.5 UNet, VAE decode or CLIP text encoder call in diffusers.

The same work as tpumesh's `bench/models_bench MODEL COMPONENT 3 B S default T`:
  unet        UNet2DConditionModel at batch B (2: classifier-free guidance),
              S x S latents (64: 512 px images), 77 text tokens;
  vae-decode  AutoencoderKL.decode of B latents S x S (64 -> 512 x 512 px);
  text        CLIPTextModel (SD 1.5's, ViT-L/14 text tower) on B x 77 ids.
Random weights (speed does not depend on them; nothing is downloaded). Not part
of the build or the tests; see bench/peers/README.md.

Backends: torch-f32, torch-bf16, torch-f32-cl (channels_last; convolutional
components) and flax-f32 (diffusers' / transformers' Flax models under
jax.jit). Each: one warm-up call (for Flax, the jit compile), then --runs
timed calls; prints the median and best seconds, GFLOP/s from --gflop, and the
process's peak RSS so far.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

SD15_UNET = dict(
    sample_size=64, in_channels=4, out_channels=4, layers_per_block=2,
    block_out_channels=(320, 640, 1280, 1280), cross_attention_dim=768,
    attention_head_dim=8,
    down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
    up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3)
TINY_UNET = dict(
    sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
    block_out_channels=(32, 64), cross_attention_dim=32, attention_head_dim=8,
    down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))
SD15_VAE = dict(
    in_channels=3, out_channels=3, latent_channels=4, layers_per_block=2,
    block_out_channels=(128, 256, 512, 512), sample_size=512,
    down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4)
TINY_VAE = dict(
    in_channels=3, out_channels=3, latent_channels=4, layers_per_block=1,
    block_out_channels=(32, 64), norm_num_groups=32, sample_size=32,
    down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2)
SD15_CLIP = dict(
    vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
    num_attention_heads=12, max_position_embeddings=77, hidden_act="quick_gelu")
TINY_CLIP = dict(
    vocab_size=1000, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
    num_attention_heads=4, max_position_embeddings=77, hidden_act="quick_gelu")
CONFIGS = {("unet", "sd15"): SD15_UNET, ("unet", "tiny"): TINY_UNET,
           ("vae-decode", "sd15"): SD15_VAE, ("vae-decode", "tiny"): TINY_VAE,
           ("text", "sd15"): SD15_CLIP, ("text", "tiny"): TINY_CLIP}
# tpumesh's matmul GFLOP of one call per batch entry at the sd15 config
# (models/flops.h: convs, linears and attention's two matmuls, 2 per
# multiply-add): UNet at 64x64 latents and 77 tokens, VAE decode 64 -> 512,
# text encoder on 77 tokens.
GFLOP_PER_ITEM = {"unet": 803.25, "vae-decode": 2514.5, "text": 13.30}


def peak_rss_gb():
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def timed(fn, runs):
  t0 = time.perf_counter()
  fn()
  first = time.perf_counter() - t0
  times = []
  for _ in range(runs):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return first, times


def run_torch(cfg, args, variant):
  import torch
  torch.set_num_threads(args.threads)
  torch.manual_seed(0)
  dtype = torch.bfloat16 if variant == "bf16" else torch.float32
  s = args.latent
  if args.component == "text":
    from transformers import CLIPTextConfig, CLIPTextModel
    model = CLIPTextModel(CLIPTextConfig(**cfg)).eval().to(dtype)
    ids = torch.arange(77).remainder(cfg["vocab_size"]).repeat(args.batch, 1)
    run = lambda: model(input_ids=ids).last_hidden_state
  elif args.component == "vae-decode":
    from diffusers import AutoencoderKL
    model = AutoencoderKL(**cfg).eval().to(dtype)
    x = torch.randn(args.batch, cfg["latent_channels"], s, s, dtype=dtype)
    if variant == "cl":
      model = model.to(memory_format=torch.channels_last)
      x = x.to(memory_format=torch.channels_last)
    run = lambda: model.decode(x).sample
  else:
    from diffusers import UNet2DConditionModel
    model = UNet2DConditionModel(**cfg).eval().to(dtype)
    x = torch.randn(args.batch, cfg["in_channels"], s, s, dtype=dtype)
    if variant == "cl":
      model = model.to(memory_format=torch.channels_last)
      x = x.to(memory_format=torch.channels_last)
    ehs = torch.randn(args.batch, 77, cfg["cross_attention_dim"], dtype=dtype)
    t = torch.tensor([500] * args.batch)
    run = lambda: model(x, t, encoder_hidden_states=ehs).sample

  def call():
    with torch.inference_mode():
      run()
  return timed(call, args.runs)


def run_flax(cfg, args):
  import jax
  import jax.numpy as jnp
  s = args.latent
  if args.component == "text":
    from transformers import CLIPTextConfig, FlaxCLIPTextModel
    model = FlaxCLIPTextModel(CLIPTextConfig(**cfg), seed=0, _do_init=True)
    ids = jnp.tile(jnp.arange(77) % cfg["vocab_size"], (args.batch, 1))
    params = model.params
    step = jax.jit(lambda p, i: model(input_ids=i, params=p).last_hidden_state)
    call = lambda: step(params, ids).block_until_ready()
  elif args.component == "vae-decode":
    from diffusers import FlaxAutoencoderKL
    model = FlaxAutoencoderKL(**cfg)
    params = model.init_weights(jax.random.PRNGKey(0))
    z = jax.random.normal(jax.random.PRNGKey(1), (args.batch, cfg["latent_channels"], s, s), jnp.float32)
    step = jax.jit(lambda p, z: model.apply({"params": p}, z, method=model.decode).sample)
    call = lambda: step(params, z).block_until_ready()
  else:
    from diffusers import FlaxUNet2DConditionModel
    model = FlaxUNet2DConditionModel(**cfg)
    params = model.init_weights(jax.random.PRNGKey(0))
    x = jax.random.normal(jax.random.PRNGKey(1), (args.batch, cfg["in_channels"], s, s), jnp.float32)
    ehs = jax.random.normal(jax.random.PRNGKey(2), (args.batch, 77, cfg["cross_attention_dim"]), jnp.float32)
    t = jnp.array([500] * args.batch, dtype=jnp.int32)
    step = jax.jit(lambda p, x, t, e: model.apply({"params": p}, x, t, e).sample)
    call = lambda: step(params, x, t, ehs).block_until_ready()
  return timed(call, args.runs)


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--component", default="unet", choices=["unet", "vae-decode", "text"])
  ap.add_argument("--backend", default="all",
                  help="all, or a comma list of torch-f32, torch-bf16, torch-f32-cl, flax-f32 "
                       "(torch-bf16 runs at a small fraction of f32's speed on hosts without AVX512-BF16)")
  ap.add_argument("--config", default="sd15", choices=["sd15", "tiny"])
  ap.add_argument("--batch", type=int, default=0, help="default: 2 (unet, text), 1 (vae-decode)")
  ap.add_argument("--latent", type=int, default=0, help="latent side (default 64; 8 for --config tiny)")
  ap.add_argument("--threads", type=int, default=2)
  ap.add_argument("--runs", type=int, default=3)
  ap.add_argument("--gflop", type=float, default=0,
                  help="matmul GFLOP of one call (default: tpumesh's count for the sd15 config at this batch)")
  ap.add_argument("--json", help="write the results here")
  args = ap.parse_args()
  cfg = CONFIGS[(args.component, args.config)]
  args.batch = args.batch or (1 if args.component == "vae-decode" else 2)
  args.latent = args.latent or (64 if args.config == "sd15" else 8)
  if not args.gflop and args.config == "sd15" and args.latent == 64:
    args.gflop = GFLOP_PER_ITEM[args.component] * args.batch
  known = ["torch-f32", "torch-bf16", "torch-f32-cl", "flax-f32"]
  wanted = known if args.backend == "all" else args.backend.split(",")
  unknown = [b for b in wanted if b not in known]
  if unknown:
    ap.error(f"--backend: unknown backend(s) {', '.join(unknown)}")
  # channels_last is a conv layout: the text encoder has no convs.
  backends = [b for b in known if b in wanted and not (b == "torch-f32-cl" and args.component == "text")]
  results = []
  for b in backends:
    try:
      if b == "flax-f32":
        first, times = run_flax(cfg, args)
      else:
        first, times = run_torch(cfg, args, {"torch-f32": "f32", "torch-bf16": "bf16", "torch-f32-cl": "cl"}[b])
    except Exception as e:  # one backend failing must not hide the others
      print(f"{b:13s} failed: {type(e).__name__}: {e}", flush=True)
      results.append({"backend": b, "error": str(e)})
      continue
    med = statistics.median(times)
    r = {"component": args.component, "backend": b, "median_s": med, "best_s": min(times), "first_call_s": first,
         "gflops": args.gflop / med if args.gflop else None, "peak_rss_gb": peak_rss_gb(), "threads": args.threads}
    results.append(r)
    print(f"{b:13s} median {med:.3f} s (best {min(times):.3f}, first call {first:.2f} s), "
          + (f"{r['gflops']:.1f} GFLOP/s, " if r["gflops"] else "")
          + f"peak RSS so far {r['peak_rss_gb']:.1f} GB", flush=True)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(results, f, indent=1)
  return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
  # XLA's CPU thread pool follows --threads; set before jax is imported.
  if "--threads" in sys.argv:
    n = sys.argv[sys.argv.index("--threads") + 1]
    os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={n}")
  sys.exit(main())
