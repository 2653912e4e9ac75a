#!/usr/bin/env python3
"""Lowers maxdiffusion's Flux transformer to StableHLO text, for a cross-check.

An offline tool, not part of the build or the tests: it imports the Flux
transformer (maxdiffusion/models/flux/transformers/transformer_flux_flax.py)
from a maxdiffusion checkout given with --maxdiffusion (nothing of
maxdiffusion is copied into this repository), builds it with ABSTRACT
parameters (jax.eval_shape: shapes and dtypes only, nothing 12 B-sized is
allocated), and lowers ONE transformer forward with jax.jit(...).lower(...)
for 1 image at 1024x1024: 4096 image tokens of 64 channels (the 128x128
latent packed 2x2), 512 T5 tokens for flux-dev, 256 for flux-schnell, the
pooled CLIP embedding (768), the timestep and, for dev, the guidance. The
attention is maxdiffusion's plain dot-product attention
(attention_kernel="dot_product": einsum, softmax, einsum), so the module
has the dot_general -> softmax -> dot_general pattern that
`tpumesh simulate --stablehlo` prices by --attention. bf16 weights and
activations, precision DEFAULT, as maxdiffusion's base_flux_dev.yml and
base_flux_schnell.yml configure inference.

The configs (FLUX.1-dev and FLUX.1-schnell transformer/config.json on the
Hugging Face hub, black-forest-labs): 19 double-stream and 38 single-stream
blocks, 24 heads of 128, joint_attention_dim 4096, pooled_projection_dim
768, axes_dims_rope (16, 56, 56), guidance_embeds true for dev only.

A checkout outside the repository, e.g. from a clone of
AI-Hypercomputer/maxdiffusion:
  git -C maxdiffusion worktree add /tmp/md e0ba26c5   (or git archive e0ba26c5 | tar x -C /tmp/md)

Usage (a Python with jax and flax; maxdiffusion's other dependencies that
the transformer's import chain names but this lowering never calls --
torch (through maxdiffusion's weight converter), chex, tensorboardX,
google.cloud, aqt, transformers -- are stubbed when missing):

  python3 -m venv /tmp/mdvenv
  /tmp/mdvenv/bin/pip install jax==0.10.2 flax einops huggingface_hub msgpack requests pillow
  /tmp/mdvenv/bin/python scripts/flux_stablehlo.py --maxdiffusion /tmp/md \\
      --variant dev --out flux_dev_step.mlir
  build/release/tools/tpumesh simulate --stablehlo flux_dev_step.mlir --chip v6e --devices 1 \\
      --attention flash

or with `--price build/release/tools/tpumesh` (and `--chips v6e,v4`, the
default): the module priced on each chip under --attention flash and
standard, one line per op category with GFLOP, HBM GB, and modelled, MXU,
vector and HBM seconds (modelled: the cost model's time on the emulated
chip, never a measurement).

flux-dev needs a maxdiffusion from before commit 64450df4 (the Flux.2-klein
onboarding, which made the linen CombinedTimestepGuidanceTextProjEmbeddings
embed the already embedded timestep again, so Flux.1-dev no longer traces);
64450df4~1 (e0ba26c5) lowers both variants. docs/cost-model.md ("Cross-check
from maxdiffusion's StableHLO") has the figures.
"""

import argparse
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types

# Flux.1 transformer configs (black-forest-labs/FLUX.1-{dev,schnell},
# transformer/config.json), and the T5 length maxdiffusion's configs use
# (max_sequence_length: 512 in base_flux_dev.yml, 256 in base_flux_schnell.yml).
CONFIGS = {
    "dev": dict(guidance_embeds=True, text_tokens=512),
    "schnell": dict(guidance_embeds=False, text_tokens=256),
}
COMMON = dict(
    patch_size=1,
    in_channels=64,
    num_layers=19,
    num_single_layers=38,
    attention_head_dim=128,
    num_attention_heads=24,
    joint_attention_dim=4096,
    pooled_projection_dim=768,
    axes_dims_rope=(16, 56, 56),
)
# Modules the transformer's import chain names but never calls here. Not
# torch itself (einops takes a torch in sys.modules for the real one):
# maxdiffusion's PyTorch weight converter, the module that imports it.
OPTIONAL = ("chex", "tensorboardX", "google.cloud", "aqt", "transformers")
TORCH_USERS = ("maxdiffusion.models.modeling_flax_pytorch_utils",)


class _AnyType(type):
  """A stubbed module's names: classes whose attributes are classes too, so
  `torch.nn.Module` subclasses and `isinstance(x, torch.Tensor)` (einops asks
  once torch is in sys.modules) work, and are never true."""

  def __getattr__(cls, name):
    if name.startswith("__"):
      raise AttributeError(name)
    return _AnyType(name, (), {})

  def __getitem__(cls, key):
    return _AnyType("item", (), {})


class _StubModule(types.ModuleType):

  def __getattr__(self, name):
    if name.startswith("__"):
      raise AttributeError(name)
    return _AnyType(name, (), {})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Stubs the modules in `names` (and their submodules)."""

  def __init__(self, names):
    self.names = names

  def find_spec(self, name, path, target=None):
    if any(name == n or name.startswith(n + ".") for n in self.names):
      return importlib.machinery.ModuleSpec(name, self, is_package=True)
    return None

  def create_module(self, spec):
    m = _StubModule(spec.name)
    m.__path__ = []
    return m

  def exec_module(self, module):
    pass


def _missing(name):
  try:
    return importlib.util.find_spec(name) is None
  except (ImportError, ValueError):
    return True


def import_flux(maxdiffusion_dir):
  src = os.path.join(maxdiffusion_dir, "src")
  if not os.path.isdir(os.path.join(src, "maxdiffusion")):
    sys.exit(f"flux_stablehlo.py: {maxdiffusion_dir} has no src/maxdiffusion (a maxdiffusion checkout?)")
  sys.path.insert(0, src)
  stubbed = [n for n in OPTIONAL if _missing(n)]
  if _missing("torch"):
    stubbed += TORCH_USERS
  if "google.cloud" in stubbed and _missing("google"):
    stubbed.append("google")
  if stubbed:
    sys.meta_path.insert(0, _StubFinder(stubbed))
    print(f"stubbed (not installed, not called): {', '.join(stubbed)}", file=sys.stderr)
  from maxdiffusion.models.flux.transformers.transformer_flux_flax import FluxTransformer2DModel
  return FluxTransformer2DModel


def lower(flux_cls, variant, image_tokens):
  import jax
  import jax.numpy as jnp

  cfg = CONFIGS[variant]
  model = flux_cls(
      **COMMON,
      guidance_embeds=cfg["guidance_embeds"],
      attention_kernel="dot_product",
      dtype=jnp.bfloat16,
      weights_dtype=jnp.bfloat16,
      precision=jax.lax.Precision.DEFAULT,
  )
  b, txt = 1, cfg["text_tokens"]
  f = jnp.bfloat16
  img = jax.ShapeDtypeStruct((b, image_tokens, COMMON["in_channels"]), f)
  enc = jax.ShapeDtypeStruct((b, txt, COMMON["joint_attention_dim"]), f)
  pooled = jax.ShapeDtypeStruct((b, COMMON["pooled_projection_dim"]), f)
  t = jax.ShapeDtypeStruct((b,), f)
  guidance = jax.ShapeDtypeStruct((b,), f)
  # Position ids (maxdiffusion's prepare_latents: (0, row, col) per image
  # token; zeros per text token): only their shapes matter to the lowering.
  img_ids = jax.ShapeDtypeStruct((b, image_tokens, 3), f)
  txt_ids = jax.ShapeDtypeStruct((b, txt, 3), f)

  def init(rng):
    return model.init(rng, hidden_states=jnp.zeros(img.shape, f), encoder_hidden_states=jnp.zeros(enc.shape, f),
                      pooled_projections=jnp.zeros(pooled.shape, f), timestep=jnp.zeros(t.shape, f),
                      img_ids=jnp.zeros(img_ids.shape, f), txt_ids=jnp.zeros(txt_ids.shape, f),
                      guidance=jnp.zeros(guidance.shape, f))["params"]

  params = jax.eval_shape(init, jax.random.key(0))
  n = sum(int(x.size) for x in jax.tree_util.tree_leaves(params))
  print(f"flux-{variant}: {n / 1e9:.3f} B parameters (abstract)", file=sys.stderr)

  def step(params, hidden_states, encoder_hidden_states, pooled_projections, timestep, img_ids, txt_ids, guidance):
    return model.apply({"params": params}, hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states,
                       pooled_projections=pooled_projections, timestep=timestep, img_ids=img_ids, txt_ids=txt_ids,
                       guidance=guidance, return_dict=False)[0]

  lowered = jax.jit(step).lower(params, img, enc, pooled, t, img_ids, txt_ids, guidance)
  return lowered.as_text(), n


def lower_on_one_device(flux_cls, variant, image_tokens):
  """lower() inside a one-device mesh with maxdiffusion's axis names
  (mesh_axes in base_flux_dev.yml), which its sharding constraints need."""
  import jax
  import numpy as np

  mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1, 1, 1), ("data", "fsdp", "context", "tensor"))
  with jax.set_mesh(mesh):
    return lower(flux_cls, variant, image_tokens)


def price(tpumesh, mlir, chips):
  """Runs `tpumesh simulate --stablehlo` on each chip under each --attention
  and prints, per op category, GFLOP, modelled, MXU, vector and HBM seconds
  (modelled: the cost model's time on the emulated chip, not a measurement)."""
  import json
  import subprocess
  import tempfile

  print(f"{'chip':5} {'attention':9} {'category':12} {'GFLOP':>10} {'GB':>9} {'modelled s':>11} "
        f"{'MXU s':>9} {'vector s':>9} {'HBM s':>9}")
  for chip in chips:
    for attention in ("flash", "standard"):
      with tempfile.TemporaryDirectory() as d:
        report = os.path.join(d, "r.json")
        subprocess.run([tpumesh, "simulate", "--stablehlo", mlir, "--chip", chip, "--devices", "1", "--attention",
                        attention, "--report", report], check=True, stdout=subprocess.DEVNULL)
        with open(report) as f:
          r = json.load(f)
      rows = sorted(r["devices"][0]["by_op_type"].items()) + [("total", r["devices"][0]["totals"])]
      for name, t in rows:
        print(f"{chip:5} {attention:9} {name:12} {t['flops'] / 1e9:10.1f} {t['bytes'] / 1e9:9.2f} "
              f"{t['modelled_seconds']:11.4f} {t['mxu_seconds']:9.4f} {t['vector_seconds']:9.4f} "
              f"{t['hbm_seconds']:9.4f}")


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--maxdiffusion", required=True, help="a maxdiffusion checkout (the directory holding src/)")
  ap.add_argument("--variant", choices=sorted(CONFIGS), default="dev")
  ap.add_argument("--image-tokens", type=int, default=4096, help="4096: 1024x1024 (128x128 latent, 2x2 patches)")
  ap.add_argument("--out", required=True, help="where the StableHLO text goes")
  ap.add_argument("--price", metavar="TPUMESH", help="then price it with this tpumesh binary (simulate --stablehlo)")
  ap.add_argument("--chips", default="v6e,v4", help="the chips --price prices on, one device each")
  a = ap.parse_args()
  try:
    text, n = lower_on_one_device(import_flux(a.maxdiffusion), a.variant, a.image_tokens)
  except (TypeError, ValueError) as e:
    if a.variant == "dev" and "broadcast" in str(e):
      sys.exit("flux_stablehlo.py: this maxdiffusion's linen Flux.1-dev does not trace (" + str(e).splitlines()[0] +
               "): since commit 64450df4 (Flux.2-klein) CombinedTimestepGuidanceTextProjEmbeddings embeds the "
               "already embedded timestep again; use a checkout before it (git worktree add DIR 64450df4~1)")
    raise
  with open(a.out, "w") as f:
    f.write(text)
  print(f"wrote {a.out}: {len(text) / 1e6:.1f} MB of StableHLO, {n} parameters as arguments", file=sys.stderr)
  if a.price:
    price(a.price, a.out, a.chips.split(","))


if __name__ == "__main__":
  main()
