#!/usr/bin/env python3
"""The seed notebooks' flow through diffusers' FlaxStableDiffusionPipeline,
unmodified, on whatever devices JAX gives (issue 41, "seed flow";
docs/pjrt.md, "The seed flow").

The flow is the notebooks': load the pipeline, replicate the parameters
(flax.jax_utils.replicate), shard the prompt ids
(flax.training.common_utils.shard), split the key per device
(jax.random.split(key, jax.device_count())) and call the pipeline with
jit=True (a pmap over jax.devices()). The same code runs on every backend;
the environment picks it:

    # tpumesh's 8 emulated v5e devices (JAX's CPU beside them: diffusers'
    # from_pretrained puts the loaded parameters on jax.devices("cpu")[0])
    PYTHONPATH=build/release/python JAX_PLATFORMS=tpumesh,cpu \\
        python scripts/seed_pipeline.py run OUT_TPUMESH
    # JAX's own CPU backend with 8 host devices
    JAX_PLATFORMS=cpu XLA_FLAGS=--xla_force_host_platform_device_count=8 \\
        python scripts/seed_pipeline.py run OUT_CPU
    python scripts/seed_pipeline.py compare OUT_TPUMESH OUT_CPU
    # or both runs (in subprocesses, with those environments) and the comparison:
    PYTHONPATH=build/release/python python scripts/seed_pipeline.py both OUT

`run` writes OUT/images.npy (uint8, (devices * batch, H, W, 3), rounded as
diffusers' numpy_to_pil rounds), OUT/images_f32.npy (the pipeline's float
images) and OUT/run.json (backend, devices, settings, timings), and prints
the timings. `compare` prints, as JSON, the largest per-pixel difference of
the uint8 images, how many values differ by more than one level (of 255)
and the largest float difference; it exits 1 when a value differs by more
than one level. Options of run and both: --steps (default 3), --size
(default 64, the tiny model's), --batch (prompts per device), --seed,
--guidance, --scheduler (pndm, the model's; ddim; dpm), --dtype (float32;
bfloat16 as the notebooks, where one level is not to be expected: XLA's CPU
itself moves up to ~24 levels with --xla_allow_excess_precision=false) and
--repeat (pipeline calls: the first one compiles).

The model: a diffusers folder (default: the tiny SD 1.x model,
../shared/refdata/tiny-sd-a beside the repository). Its weights are
PyTorch's (safetensors); diffusers' from_pretrained(from_pt=True) needs
torch and a .bin file for the UNet and the VAE, so the folder is first
converted to Flax weights (flax_copy below: diffusers' and transformers'
own converters, with numpy in place of torch), as the notebooks load a
repository's Flax weights; from_pretrained then loads that copy, unmodified.
`convert MODEL DEST` writes such a copy once (the conversion initialises
the UNet eagerly: ~10-20 s on 2 cores); run and both take it as --model.

Needs diffusers with its Flax pipeline (0.32.2 has it; current diffusers
does not): the venv /opt/venvs/jax0438 (jax 0.4.38, flax 0.10.2,
transformers 4.47.1).
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_MODEL = REPO.parent / "shared" / "refdata" / "tiny-sd-a"

# One prompt per device, cycled: each device also gets its own key.
PROMPTS = [
    "a photograph of an astronaut riding a horse",
    "a red cube on a blue sphere, studio lighting",
    "",
    "Café at night, 3 lights... watercolour",
]

# The Flax schedulers the pipeline takes, by the name --scheduler gives.
# (FlaxLMSDiscreteScheduler is left out: its step() takes min() of a traced timestep, which no
# backend traces inside the pipeline's fori_loop: a TracerBoolConversionError on CPU too.)
SCHEDULERS = {"pndm": "FlaxPNDMScheduler", "ddim": "FlaxDDIMScheduler", "dpm": "FlaxDPMSolverMultistepScheduler"}

# The environments of `both`: the backend is chosen by them alone.
ENVIRONMENTS = {
    "tpumesh": {"JAX_PLATFORMS": "tpumesh,cpu"},
    "cpu": {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=8"},
}


class _AsTorch:
    """A numpy array as diffusers' converter reads a torch tensor (it calls .numpy())."""

    def __init__(self, array):
        self._array = array

    def numpy(self):
        return self._array


def flax_copy(model_dir, dest):
    """Writes a Flax copy of the diffusers folder model_dir into dest: the same
    configs, tokenizer and scheduler, and Flax weights converted from the
    PyTorch safetensors by the libraries' own converters (what
    from_pretrained(from_pt=True) does, without torch). Returns dest."""
    import jax
    from diffusers import FlaxAutoencoderKL, FlaxUNet2DConditionModel
    from diffusers.models.modeling_flax_pytorch_utils import convert_pytorch_state_dict_to_flax
    from safetensors.numpy import load_file
    from transformers import FlaxCLIPTextModel

    model_dir, dest = pathlib.Path(model_dir), pathlib.Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(model_dir / "model_index.json", dest)
    for name in ("tokenizer", "scheduler"):
        shutil.copytree(model_dir / name, dest / name, dirs_exist_ok=True)
    # The conversion runs on JAX's CPU, where from_pretrained puts parameters too.
    with jax.default_device(jax.devices("cpu")[0]):
        for name, cls in (("unet", FlaxUNet2DConditionModel), ("vae", FlaxAutoencoderKL)):
            model = cls.from_config(cls.load_config(model_dir / name))
            weights = load_file(model_dir / name / "diffusion_pytorch_model.safetensors")
            params = convert_pytorch_state_dict_to_flax({k: _AsTorch(v) for k, v in weights.items()}, model)
            model.save_pretrained(dest / name, params=params)
        # transformers reads safetensors with from_pt=True without torch.
        FlaxCLIPTextModel.from_pretrained(model_dir / "text_encoder", from_pt=True).save_pretrained(
            dest / "text_encoder")
    return dest


def is_flax_copy(model_dir):
    """Whether model_dir already holds Flax weights (a flax_copy, or a repository's Flax revision)."""
    return (pathlib.Path(model_dir) / "unet" / "diffusion_flax_model.msgpack").is_file()


def run(args):
    """The seed flow on jax.devices(); writes the images and run.json into args.out."""
    t_start = time.perf_counter()
    import diffusers
    import jax
    import jax.numpy as jnp
    import numpy as np
    from diffusers import FlaxStableDiffusionPipeline
    from flax.jax_utils import replicate
    from flax.training.common_utils import shard

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    timings = {}

    # 1. Devices.
    devices = jax.devices()
    num_devices = jax.device_count()
    print(f"backend {jax.default_backend()}: {num_devices} devices, {devices[0].device_kind}")

    # 2. Load: from_pretrained of a Flax copy of the model (float32; made here unless the folder is one).
    t = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="seed-flax-") as scratch:
        flax_dir = args.model if is_flax_copy(args.model) else flax_copy(args.model, scratch)
        # The tiny model has no safety checker nor feature extractor (model_index.json: null).
        pipeline, params = FlaxStableDiffusionPipeline.from_pretrained(
            flax_dir, safety_checker=None, feature_extractor=None, dtype=getattr(jnp, args.dtype))
        if args.scheduler != "pndm":  # the model's is PNDM; another from its config, as diffusers' docs swap
            # (from_pretrained(scheduler=...) fails on diffusers 0.32's Union check: the constructor instead)
            scheduler, params["scheduler"] = getattr(diffusers, SCHEDULERS[args.scheduler]).from_pretrained(
                flax_dir, subfolder="scheduler")
            pipeline = FlaxStableDiffusionPipeline(
                vae=pipeline.vae, text_encoder=pipeline.text_encoder, tokenizer=pipeline.tokenizer,
                unet=pipeline.unet, scheduler=scheduler, safety_checker=None, feature_extractor=None,
                dtype=getattr(jnp, args.dtype))
    if args.dtype != "float32":  # the notebooks' revision="bf16": the models' weights in that type too
        for name in ("text_encoder", "unet", "vae"):
            params[name] = jax.tree_util.tree_map(lambda x: x.astype(getattr(jnp, args.dtype)), params[name])
    timings["load_s"] = time.perf_counter() - t

    # 3. Replicate the parameters, 4. shard the prompt ids, 5. split the key.
    t = time.perf_counter()
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(num_devices * args.batch)]
    prompt_ids = shard(pipeline.prepare_inputs(prompts))
    p_params = replicate(params)
    rng = jax.random.split(jax.random.PRNGKey(args.seed), num_devices)
    timings["replicate_shard_split_s"] = time.perf_counter() - t
    # Where the pmap runs: the platforms holding the replicated parameters and the keys.
    placed_on = sorted({d.platform for leaf in jax.tree_util.tree_leaves(p_params) for d in leaf.devices()} |
                       {d.platform for d in rng.devices()})

    # 6. The pmap: one generate per device. The first call compiles.
    calls = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        images = pipeline(prompt_ids, p_params, rng, num_inference_steps=args.steps, height=args.size,
                          width=args.size, guidance_scale=args.guidance, jit=True).images
        images = np.asarray(images)
        calls.append(time.perf_counter() - t)
    timings["calls_s"] = calls

    # (devices, batch, H, W, 3) -> one row per image; uint8 as numpy_to_pil rounds.
    images = images.reshape((-1,) + images.shape[-3:])
    images_uint8 = (images * 255).round().astype(np.uint8)
    np.save(out / "images.npy", images_uint8)
    np.save(out / "images_f32.npy", images.astype(np.float32))
    timings["total_s"] = time.perf_counter() - t_start
    record = {
        "backend": jax.default_backend(), "platform": devices[0].platform, "device_kind": devices[0].device_kind,
        "devices": num_devices, "placed_on": placed_on, "jax": jax.__version__, "model": str(args.model),
        "steps": args.steps, "size": args.size, "dtype": args.dtype, "scheduler": args.scheduler, "batch": args.batch,
        "seed": args.seed, "guidance": args.guidance, "prompts": prompts, "images": list(images_uint8.shape),
        "timings": timings, "seconds_per_image": calls[-1] / len(images_uint8),
    }
    (out / "run.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"load {timings['load_s']:.2f} s; replicate+shard+split {timings['replicate_shard_split_s']:.2f} s; "
          "pipeline calls " + ", ".join(f"{c:.2f} s" for c in calls) +
          f" ({len(images_uint8)} images, {record['seconds_per_image']:.2f} s per image on the last call); "
          f"total {timings['total_s']:.2f} s")
    return record


def compare(a, b):
    """The difference of two runs' images: uint8 per pixel value, and float."""
    import numpy as np

    a, b = pathlib.Path(a), pathlib.Path(b)
    ia, ib = np.load(a / "images.npy"), np.load(b / "images.npy")
    if ia.shape != ib.shape:
        raise SystemExit(f"seed_pipeline: the images differ in shape: {ia.shape} vs {ib.shape}")
    diff = np.abs(ia.astype(np.int32) - ib.astype(np.int32))
    fa, fb = np.load(a / "images_f32.npy"), np.load(b / "images_f32.npy")
    return {
        "shape": list(ia.shape),
        "max_abs_diff": int(diff.max()),                 # in levels of 255, over every pixel and channel
        "values_differing_by_more_than_1": int((diff > 1).sum()),
        "values_differing": int((diff > 0).sum()),
        "pixels_differing": int((diff.max(axis=-1) > 0).sum()),
        "values": int(diff.size),
        "max_abs_diff_float": float(np.abs(fa.astype(np.float64) - fb).max()),
    }


def both(args):
    """`run` on tpumesh and on JAX's CPU (subprocesses, ENVIRONMENTS), then `compare`.
    The model is converted once (OUT/flax-model) and both runs load that copy."""
    out = pathlib.Path(args.out)
    model = pathlib.Path(args.model)
    if not is_flax_copy(model):
        model = out / "flax-model"
        subprocess.run([sys.executable, str(pathlib.Path(__file__).resolve()), "convert", str(args.model),
                        str(model)], env=dict(os.environ, JAX_PLATFORMS="cpu"), check=True)
    records = {}
    for backend, env in ENVIRONMENTS.items():
        full = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_FLAGS")}
        full.update(env)
        cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "run", str(out / backend),
               "--model", str(model), "--steps", str(args.steps), "--size", str(args.size),
               "--dtype", args.dtype, "--scheduler", args.scheduler, "--batch", str(args.batch),
               "--seed", str(args.seed), "--guidance", str(args.guidance), "--repeat", str(args.repeat)]
        print(f"== {backend}: " + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)
        subprocess.run(cmd, env=full, check=True)
        records[backend] = json.loads((out / backend / "run.json").read_text())
    result = compare(out / "tpumesh", out / "cpu")
    result["seconds_per_image"] = {k: r["seconds_per_image"] for k, r in records.items()}
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "both"):
        p = sub.add_parser(name)
        p.add_argument("out", help="the folder for the images (both: OUT/tpumesh and OUT/cpu)")
        p.add_argument("--model", default=str(DEFAULT_MODEL),
                       help="a diffusers folder, PyTorch or Flax weights (default: %(default)s)")
        p.add_argument("--steps", type=int, default=3, help="denoising steps (default: %(default)s)")
        p.add_argument("--size", type=int, default=64, help="image height and width (default: %(default)s)")
        p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                       help="the pipeline's dtype (the notebooks': bfloat16; default: %(default)s)")
        p.add_argument("--scheduler", default="pndm", choices=sorted(SCHEDULERS),
                       help="the scheduler (default: the model's, %(default)s)")
        p.add_argument("--batch", type=int, default=1, help="prompts per device (default: %(default)s)")
        p.add_argument("--seed", type=int, default=0, help="jax.random.PRNGKey's seed (default: %(default)s)")
        p.add_argument("--guidance", type=float, default=7.5, help="guidance scale (default: %(default)s)")
        p.add_argument("--repeat", type=int, default=1,
                       help="pipeline calls; the first one compiles (default: %(default)s)")
    p = sub.add_parser("convert", help="write a Flax copy of a PyTorch diffusers folder (run and both take either)")
    p.add_argument("model")
    p.add_argument("dest")
    p = sub.add_parser("compare")
    p.add_argument("a")
    p.add_argument("b")
    args = parser.parse_args()

    if args.command == "run":
        run(args)
        return 0
    if args.command == "convert":
        import jax  # noqa: F401 - the conversion runs on JAX's CPU, whatever the environment

        print(flax_copy(args.model, args.dest))
        return 0
    result = compare(args.a, args.b) if args.command == "compare" else both(args)
    print(json.dumps(result))
    return 0 if result["max_abs_diff"] <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
