#!/usr/bin/env python3
"""Times one SD 1.5 UNet, VAE decode or CLIP text encoder call in diffusers.

The same work as tpumesh's `bench/models_bench MODEL COMPONENT 3 B S default T`:
  unet        UNet2DConditionModel at batch B (2: classifier-free guidance),
              S x S latents (64: 512 px images), 77 text tokens;
  vae-decode  AutoencoderKL.decode of B latents S x S (64 -> 512 x 512 px);
  text        CLIPTextModel (SD 1.5's, ViT-L/14 text tower) on B x 77 ids;
  matmul      torch's `a @ b` on N x N x N (--size, default 2048), beside
              `tpumesh bench matmul` (torch backends only);
  pipeline    diffusers' StableDiffusionPipeline, --images prompts (default 8)
              at --steps (default 1), 512 x 512, guidance 7.5, PNDM as SD
              1.5 configures it, the text encoder run on token ids inside the
              timed call (tokenizing is left out: no tokenizer files are
              downloaded), output_type "np"; beside `tpumesh generate --model
              MODEL --devices 8` with 8 images (torch backends only).
Random weights (speed does not depend on them; nothing is downloaded). Not part
of the build or the tests; see bench/peers/README.md.

Backends: torch-f32, torch-bf16, torch-f32-cl (channels_last; convolutional
components), torch-compile-f32 and torch-compile-bf16 (torch.compile's
default inductor backend, torch 2.x), openvino-f32 and openvino-bf16 (the
same torch module converted by openvino.convert_model, compiled for "CPU"
with INFERENCE_PRECISION_HINT f32 or bf16) and flax-f32 (diffusers' /
transformers' Flax models under jax.jit). A backend whose library this
Python lacks is skipped with one line (each venv of bench/peers/setup.sh has
some of them). Each: one warm-up call (for torch.compile and Flax, the
compile; for OpenVINO, the conversion and compile are timed before it), then
--runs timed calls; prints the median and best seconds, the compile seconds
apart, GFLOP/s from --gflop, and the process's peak RSS so far.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time
import warnings

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
CONFIGS = {("pipeline", "sd15"): (SD15_UNET, SD15_VAE, SD15_CLIP), ("pipeline", "tiny"): (TINY_UNET, TINY_VAE, TINY_CLIP),
           ("unet", "sd15"): SD15_UNET, ("unet", "tiny"): TINY_UNET,
           ("vae-decode", "sd15"): SD15_VAE, ("vae-decode", "tiny"): TINY_VAE,
           ("text", "sd15"): SD15_CLIP, ("text", "tiny"): TINY_CLIP}
# tpumesh's matmul GFLOP of one call per batch entry at the sd15 config
# (models/flops.h: convs, linears and attention's two matmuls, 2 per
# multiply-add): UNet at 64x64 latents and 77 tokens, VAE decode 64 -> 512,
# text encoder on 77 tokens.
GFLOP_PER_ITEM = {"unet": 803.25, "vae-decode": 2514.5, "text": 13.30}

TORCH_BACKENDS = ["torch-f32", "torch-bf16", "torch-f32-cl", "torch-compile-f32", "torch-compile-bf16"]
OPENVINO_BACKENDS = ["openvino-f32", "openvino-bf16"]
BACKENDS = TORCH_BACKENDS + OPENVINO_BACKENDS + ["flax-f32"]


class Skip(Exception):
  """This Python cannot run the backend (its library is missing or too old)."""


def backend_library(backend):
  """The backend's library and version as 'name version'; raises Skip when absent."""
  import importlib
  name = "jax" if backend.startswith("flax") else "openvino" if backend.startswith("openvino") else "torch"
  try:
    mod = importlib.import_module(name)
  except ImportError:
    raise Skip(f"no {name} in this Python")
  version = getattr(mod, "__version__", "?")
  if name == "openvino":
    import torch  # convert_model reads the torch module
    version = mod.get_version().split("-")[0]
  if "compile" in backend and not hasattr(mod, "compile"):
    raise Skip(f"torch {version} has no torch.compile")
  return f"{name} {version}"


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


def torch_call(cfg, args, dtype, channels_last=False):
  """The component as a torch.nn.Module whose forward takes tensors and
  returns one tensor, and its inputs (a tuple)."""
  import torch
  import diffusers
  import transformers
  diffusers.utils.logging.set_verbosity_error()  # the ".to(dtype)" advice on every bf16 model
  transformers.utils.logging.set_verbosity_error()
  torch.manual_seed(0)
  s = args.latent
  if args.component == "text":
    from transformers import CLIPTextConfig, CLIPTextModel
    model = CLIPTextModel(CLIPTextConfig(**cfg)).eval().to(dtype)
    inputs = (torch.arange(77).remainder(cfg["vocab_size"]).repeat(args.batch, 1),)
    fwd = lambda ids: model(input_ids=ids, return_dict=False)[0]
  elif args.component == "vae-decode":
    from diffusers import AutoencoderKL
    model = AutoencoderKL(**cfg).eval().to(dtype)
    inputs = (torch.randn(args.batch, cfg["latent_channels"], s, s, dtype=dtype),)
    fwd = lambda z: model.decode(z, return_dict=False)[0]
  else:
    from diffusers import UNet2DConditionModel
    model = UNet2DConditionModel(**cfg).eval().to(dtype)
    inputs = (torch.randn(args.batch, cfg["in_channels"], s, s, dtype=dtype), torch.tensor([500] * args.batch),
              torch.randn(args.batch, 77, cfg["cross_attention_dim"], dtype=dtype))
    fwd = lambda x, t, e: model(x, t, encoder_hidden_states=e, return_dict=False)[0]
  if channels_last:
    model = model.to(memory_format=torch.channels_last)
    inputs = tuple(i.to(memory_format=torch.channels_last) if i.dim() == 4 else i for i in inputs)

  class Call(torch.nn.Module):
    def __init__(self):
      super().__init__()
      self.model = model

    def forward(self, *xs):
      return fwd(*xs)
  return Call().eval(), inputs


def torch_pipeline(cfg, args, dtype, compile_unet):
  """diffusers' StableDiffusionPipeline from random components; returns a
  call that makes args.images images at args.steps steps."""
  import torch
  import diffusers
  import transformers
  from diffusers import AutoencoderKL, PNDMScheduler, StableDiffusionPipeline, UNet2DConditionModel
  from transformers import CLIPTextConfig, CLIPTextModel
  diffusers.utils.logging.set_verbosity_error()
  transformers.utils.logging.set_verbosity_error()
  unet_cfg, vae_cfg, clip_cfg = cfg
  torch.manual_seed(0)
  unet = UNet2DConditionModel(**unet_cfg).eval().to(dtype)
  vae = AutoencoderKL(**vae_cfg).eval().to(dtype)
  text = CLIPTextModel(CLIPTextConfig(**clip_cfg)).eval().to(dtype)
  # SD 1.5's scheduler_config.json.
  scheduler = PNDMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                            num_train_timesteps=1000, skip_prk_steps=True, steps_offset=1, set_alpha_to_one=False)
  if compile_unet:
    unet = torch.compile(unet)
  pipe = StableDiffusionPipeline(vae=vae, text_encoder=text, tokenizer=None, unet=unet, scheduler=scheduler,
                                 safety_checker=None, feature_extractor=None, requires_safety_checker=False)
  pipe.set_progress_bar_config(disable=True)
  ids = torch.arange(77).remainder(clip_cfg["vocab_size"]).repeat(args.images, 1)
  empty = torch.full((args.images, 77), clip_cfg["vocab_size"] - 1)
  side = 8 * unet_cfg["sample_size"]
  generator = torch.Generator().manual_seed(0)

  def call():
    cond = text(input_ids=ids, return_dict=False)[0]
    uncond = text(input_ids=empty, return_dict=False)[0]
    pipe(prompt_embeds=cond, negative_prompt_embeds=uncond, num_inference_steps=args.steps, guidance_scale=7.5,
         height=side, width=side, generator=generator, output_type="np")
  return call


def run_torch(cfg, args, backend):
  import torch
  torch.set_num_threads(args.threads)
  dtype = torch.bfloat16 if backend.endswith("bf16") else torch.float32
  if args.component == "pipeline":
    fn = torch_pipeline(cfg, args, dtype, compile_unet="compile" in backend)
  elif args.component == "matmul":
    torch.manual_seed(0)
    a = torch.randn(args.size, args.size).to(dtype)
    b = torch.randn(args.size, args.size).to(dtype)
    fn = lambda: a @ b
  else:
    module, inputs = torch_call(cfg, args, dtype, channels_last=backend == "torch-f32-cl")
    if "compile" in backend:
      module = torch.compile(module)
    fn = lambda: module(*inputs)

  def call():
    with torch.inference_mode():
      fn()
  return timed(call, args.runs)


def run_openvino(cfg, args, backend):
  """The torch module in f32, converted by OpenVINO and compiled for its CPU
  plugin at the backend's inference precision; the conversion and compile
  are the 'first call' (reported apart)."""
  import openvino as ov
  import torch
  torch.set_num_threads(args.threads)
  t0 = time.perf_counter()
  module, inputs = torch_call(cfg, args, torch.float32)
  with torch.no_grad():
    ov_model = ov.convert_model(module, example_input=inputs)
  compiled = ov.Core().compile_model(ov_model, "CPU", {
      "INFERENCE_PRECISION_HINT": "bf16" if backend.endswith("bf16") else "f32",
      "INFERENCE_NUM_THREADS": args.threads, "PERFORMANCE_HINT": "LATENCY"})
  # What the plugin runs in (bf16 only where the CPU has a bf16 path; the
  # hint falls back to f32 elsewhere).
  hint = compiled.get_property("INFERENCE_PRECISION_HINT")
  args.ov_precision = hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
  request = compiled.create_infer_request()
  feed = [i.numpy() for i in inputs]
  convert_s = time.perf_counter() - t0
  first, times = timed(lambda: request.infer(feed), args.runs)
  return convert_s + first, times


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
  ap.add_argument("--component", default="unet", choices=["unet", "vae-decode", "text", "matmul", "pipeline"])
  ap.add_argument("--backend", default="all",
                  help="all, or a comma list of " + ", ".join(BACKENDS) +
                       " (torch-bf16 runs at a small fraction of f32's speed on hosts without AVX512-BF16)")
  ap.add_argument("--size", type=int, default=2048, help="matmul: M = N = K")
  ap.add_argument("--config", default="sd15", choices=["sd15", "tiny"])
  ap.add_argument("--batch", type=int, default=0, help="default: 2 (unet, text), 1 (vae-decode)")
  ap.add_argument("--latent", type=int, default=0, help="latent side (default 64; 8 for --config tiny)")
  ap.add_argument("--images", type=int, default=8, help="pipeline: images (prompts) per call")
  ap.add_argument("--steps", type=int, default=1, help="pipeline: denoising steps")
  ap.add_argument("--threads", type=int, default=2)
  ap.add_argument("--runs", type=int, default=3)
  ap.add_argument("--gflop", type=float, default=0,
                  help="matmul GFLOP of one call (default: tpumesh's count for the sd15 config at this batch)")
  ap.add_argument("--json", help="write the results here")
  args = ap.parse_args()
  matmul = args.component == "matmul"
  cfg = None if matmul else CONFIGS[(args.component, args.config)]
  args.batch = args.batch or (1 if args.component == "vae-decode" else 2)
  args.latent = args.latent or (64 if args.config == "sd15" else 8)
  if matmul:
    args.gflop = args.gflop or 2 * args.size ** 3 / 1e9
  elif not args.gflop and args.config == "sd15" and args.latent == 64 and args.component in GFLOP_PER_ITEM:
    args.gflop = GFLOP_PER_ITEM[args.component] * args.batch
  wanted = BACKENDS if args.backend == "all" else args.backend.split(",")
  unknown = [b for b in wanted if b not in BACKENDS]
  if unknown:
    ap.error(f"--backend: unknown backend(s) {', '.join(unknown)}")
  # channels_last is a conv layout: the text encoder has no convs; the matmul
  # peer is torch's eager `a @ b` alone.
  pipeline = args.component == "pipeline"
  backends = [b for b in BACKENDS if b in wanted and not (b == "torch-f32-cl" and args.component == "text")
              and not (matmul and b not in ("torch-f32", "torch-bf16"))
              and not (pipeline and b not in ("torch-f32", "torch-bf16", "torch-compile-bf16"))]
  results = []
  for b in backends:
    try:
      lib = backend_library(b)
    except Skip as e:
      print(f"{b:18s} skipped: {e}", flush=True)
      continue
    try:
      if b == "flax-f32":
        first, times = run_flax(cfg, args)
      elif b.startswith("openvino"):
        first, times = run_openvino(cfg, args, b)
      else:
        first, times = run_torch(cfg, args, b)
    except Exception as e:  # one backend failing must not hide the others
      why = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
      print(f"{b:18s} failed ({lib}): {why}", flush=True)
      results.append({"component": args.component, "backend": b, "library": lib, "error": why})
      continue
    med = statistics.median(times)
    # What the first call took beyond a steady one: jit/inductor compile,
    # OpenVINO's conversion and compile, first touches.
    compile_s = max(0.0, first - med)
    if b.startswith("openvino"):
      lib += f" {args.ov_precision}"
    r = {"component": args.component, "backend": b, "library": lib, "median_s": med, "best_s": min(times),
         "first_call_s": first, "compile_s": compile_s, "gflops": args.gflop / med if args.gflop else None,
         "peak_rss_gb": peak_rss_gb(), "threads": args.threads}
    results.append(r)
    print(f"{b:18s} {lib:22s} median {med:.4f} s (best {min(times):.4f}, first call {first:.2f} s: "
          f"{compile_s:.2f} s over a steady one), "
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
  # Tracing and conversion warn on every data-dependent branch of the models.
  warnings.filterwarnings("ignore")
  sys.exit(main())
