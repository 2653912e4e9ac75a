#!/usr/bin/env python3
"""Reference images for the parity test of the default model
(tests/pipeline/default_model_test.cc, DefaultModelTest.MatchesDiffusers):
diffusers' StableDiffusionPipeline on the exported folder, from initial
latents passed in, so that tpumesh can start from the same ones.

Writes OUT (HDF5):
  prompts        [B] strings: 4 captions of the training grammar
  init_latents   [B, 4, 16, 16] f32: N(0, 1), numpy default_rng(SEED)
  images_uint8   [B, 32, 32, 3] uint8: diffusers' output_type="np" images,
                 (x * 255).round() as diffusers' numpy_to_pil does
  classified     [B] strings "shape colour background": classify.py's reading
  attributes     steps, guidance_scale, height, width, seed, diffusers and
                 torch versions, the scheduler config used (the folder's)
Weights rounded to bf16 as the embedded file stores them, f32 arithmetic
(torch's default dtype); the folder's DDIM scheduler.

  OMP_NUM_THREADS=1 /opt/peers-venv/bin/python scripts/train_default/make_golden.py \\
      --model out/train_default/model --out tests/data/default-model/golden.h5
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import classify  # noqa: E402
import data  # noqa: E402

SEED = 1234
STEPS = 20
GUIDANCE = 7.5
# (shape, shape colour, background): white, black and both extremes included.
TRIPLES = [("circle", "red", "white"), ("square", "white", "black"), ("triangle", "yellow", "blue"),
           ("circle", "black", "green")]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True, help="the exported diffusers folder")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    import h5py
    import torch
    import diffusers
    from diffusers import StableDiffusionPipeline
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    pipe = StableDiffusionPipeline.from_pretrained(args.model, safety_checker=None, feature_extractor=None,
                                                   requires_safety_checker=False)
    pipe.set_progress_bar_config(disable=True)
    # The weights tpumesh runs: `convert --dtype bf16` rounds each to the
    # nearest bf16 (ties to even), as torch's conversion does.
    with torch.no_grad():
        for module in (pipe.text_encoder, pipe.unet, pipe.vae):
            for p in module.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    prompts = [data.caption(*t) for t in TRIPLES]
    latents = np.random.default_rng(SEED).standard_normal((len(prompts), 4, 16, 16)).astype(np.float32)
    with torch.no_grad():
        out = pipe(prompts, height=32, width=32, num_inference_steps=STEPS, guidance_scale=GUIDANCE,
                   latents=torch.from_numpy(latents.copy()), output_type="np").images
    images = (out * 255).round().astype(np.uint8)
    # classify.py's reading of each, for the C++ copy of the classifier to match.
    labels = [[r["shape"], r["shape_colour"], r["background"]] for r in map(classify.classify, images)]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    with h5py.File(tmp, "w") as f:
        f.create_dataset("prompts", data=np.array(prompts, dtype=h5py.string_dtype()))
        f.create_dataset("init_latents", data=latents)
        f.create_dataset("images_uint8", data=images)
        f.create_dataset("classified", data=np.array([" ".join(l) for l in labels], dtype=h5py.string_dtype()))
        f.attrs.update({"steps": STEPS, "guidance_scale": GUIDANCE, "height": 32, "width": 32, "seed": SEED,
                        "diffusers": str(diffusers.__version__), "torch": str(torch.__version__),
                        "scheduler_config": json.dumps(dict(pipe.scheduler.config))})
    os.replace(tmp, args.out)
    print("wrote", args.out, images.shape)


if __name__ == "__main__":
    main()
