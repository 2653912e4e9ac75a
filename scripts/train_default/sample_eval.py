#!/usr/bin/env python3
"""Acceptance test of an exported model folder: diffusers'
StableDiffusionPipeline (safety_checker None) with the folder's DDIM
scheduler renders the 16 evaluation prompts (data.eval_prompts()) x seeds
0 and 1 at 32x32, 25 steps, guidance 7.5; classify.py scores each image.
Image (prompt p, seed s) starts from torch.Generator().manual_seed(s) latents
randn [1, 4, 16, 16] (one generator per image). Prints per-image results and
the score /32, saves a grid PNG (row per seed), records the score in the
folder's tpumesh_training.json, appends a summary to --log.

  OMP_NUM_THREADS=1 /opt/peers-venv/bin/python scripts/train_default/sample_eval.py \
      --model out/train_default/model --log out/train_default/train.log
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import classify  # noqa: E402
import data  # noqa: E402

SEEDS = [0, 1]
STEPS = 25
GUIDANCE = 7.5


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="out/train_default/model")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--grid", default=None, help="PNG path (default: MODEL/../eval_grid.png)")
    p.add_argument("--log", default=None, help="append the summary to this file")
    p.add_argument("--no-record", action="store_true", help="do not write the score into tpumesh_training.json")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch
    torch.set_num_threads(args.threads)
    from diffusers import StableDiffusionPipeline
    from diffusers.utils import logging as dlogging
    dlogging.disable_progress_bar()

    t0 = time.time()
    pipe = StableDiffusionPipeline.from_pretrained(args.model, safety_checker=None, feature_extractor=None,
                                                   requires_safety_checker=False)
    pipe.set_progress_bar_config(disable=True)
    labels = data.eval_prompts()
    prompts = [data.caption(*t) for t in labels]
    results, images = [], []
    for seed in SEEDS:
        gens = [torch.Generator().manual_seed(seed) for _ in prompts]
        out = pipe(prompts, height=32, width=32, num_inference_steps=STEPS, guidance_scale=GUIDANCE,
                   generator=gens, output_type="np").images
        imgs = (np.clip(out, 0, 1) * 255).round().astype(np.uint8)
        for prompt, lab, im in zip(prompts, labels, imgs):
            r = classify.classify(im)
            ok = classify.correct(r, lab)
            results.append({"prompt": prompt, "seed": seed, "ok": bool(ok), "shape": r["shape"],
                            "shape_colour": r["shape_colour"], "background": r["background"],
                            "fill": round(float(r["fill"]), 3)})
            images.append(im)
    score = sum(r["ok"] for r in results)
    lines = []
    for r in results:
        lines.append("%-4s seed %d  %-45s -> %s %s on %s (fill %.3f)" % (
            "ok" if r["ok"] else "FAIL", r["seed"], r["prompt"], r["shape_colour"], r["shape"], r["background"],
            r["fill"]))
    by = {k: sum(1 for r, lab in zip(results, labels * len(SEEDS)) if r[k] == lab[i])
          for i, k in enumerate(["shape", "shape_colour", "background"])}
    summary = "sample_eval %s: score %d/%d (shape %d, shape colour %d, background %d correct) in %.0fs" % (
        args.model, score, len(results), by["shape"], by["shape_colour"], by["background"], time.time() - t0)
    print("\n".join(lines))
    print(summary)
    grid = args.grid or os.path.join(os.path.dirname(os.path.abspath(args.model)), "eval_grid.png")
    from train import save_grid
    save_grid(np.stack(images), grid, cols=len(prompts))
    print("grid: %s (row per seed, columns = prompts in order)" % grid)
    if args.log:
        with open(args.log, "a") as f:
            for ln in lines:
                f.write(time.strftime("%Y-%m-%d %H:%M:%S ") + ln + "\n")
            f.write(time.strftime("%Y-%m-%d %H:%M:%S ") + summary + "\n")
    meta_path = os.path.join(args.model, "tpumesh_training.json")
    if not args.no_record and os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        meta.setdefault("eval", {})
        meta["eval"].update({"score": "%d/%d" % (score, len(results)), "score_int": score,
                             "per_component_correct": by, "results": results,
                             "evaluated_at": time.strftime("%Y-%m-%d %H:%M:%S %Z")})
        with open(meta_path, "w") as f:
            json.dump(meta, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
