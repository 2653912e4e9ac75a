#!/usr/bin/env python3
"""Writes tests/data/scheduler_golden.h5: the scheduler-only part of the
tiny-sd-a golden pipelines (shared/refdata/tiny-sd-a/golden.h5), so that
PNDM, DDIM and Euler can be tested in isolation against what the real
diffusers 0.30.0 StableDiffusionPipeline computed.

Offline tool (not used by the build or the tests). Run with h5py and numpy:
  python3 -m venv /tmp/venv && /tmp/venv/bin/pip install h5py numpy
  /tmp/venv/bin/python scripts/refdata/extract_scheduler_golden.py \
      ../shared/refdata/tiny-sd-a/golden.h5 tests/data/scheduler_golden.h5

For each of pndm, ddim and euler (golden groups pipeline_<name>), datasets:
  timesteps            (S,) int32     the scheduler's timesteps (PNDM repeats one)
  init_latents         (2,4,32,32) f32 the latents passed to the pipeline, before
                                      prepare_latents multiplies by init_noise_sigma
  noise_pred_raw       (S,4,4,32,32) f32 the UNet output for the CFG batch
                                      [uncond0, uncond1, cond0, cond1]
  latents_after_step   (S,2,4,32,32) f32 the latents after each scheduler.step
  guidance_scale, init_noise_sigma, num_inference_steps   (1,) from the attributes
  scheduler_config     (1,) string    the config the pipeline's scheduler had
  euler only: sigmas (S+1,) f32 and unet_input (S,2,4,32,32) f32, the
              scale_model_input output of the first half of the CFG batch (the
              second half is the same tensor, torch.cat([latents] * 2)).
and at the root betas and alphas_cumprod (1000,) f32 (identical in the three
groups; checked). The f64 twins are not copied: the script prints how far the
f32 pipeline already was from them, for scale.
"""
import json
import sys

import h5py
import numpy as np

GROUPS = ["pndm", "ddim", "euler"]


def main(src_path, dst_path):
    with h5py.File(src_path, "r") as src, h5py.File(dst_path, "w") as dst:
        dst.attrs["source"] = "shared/refdata/tiny-sd-a/golden.h5 (diffusers %s, torch %s)" % (
            src.attrs["version_diffusers"], src.attrs["version_torch"])
        betas = ac = None
        for name in GROUPS:
            g = src["pipeline_" + name]
            if betas is None:
                betas, ac = g["betas"][()], g["alphas_cumprod"][()]
                dst["betas"] = betas.astype(np.float32)
                dst["alphas_cumprod"] = ac.astype(np.float32)
            assert np.array_equal(betas, g["betas"][()]) and np.array_equal(ac, g["alphas_cumprod"][()])
            o = dst.create_group(name)
            o["timesteps"] = g["timesteps"][()].astype(np.int32)
            for k in ["init_latents", "noise_pred_raw", "latents_after_step"]:
                o[k] = g[k][()].astype(np.float32)
            o["guidance_scale"] = np.array([g.attrs["guidance_scale"]], np.float32)
            o["init_noise_sigma"] = np.array([g.attrs["init_noise_sigma"]], np.float32)
            o["num_inference_steps"] = np.array([g.attrs["num_inference_steps"]], np.int32)
            o.create_dataset("scheduler_config", data=np.array([g.attrs["scheduler_config"]], dtype=h5py.string_dtype()))
            if name == "euler":
                o["sigmas"] = g["sigmas"][()].astype(np.float32)
                unet_input = g["unet_input"][()]
                assert np.array_equal(unet_input[:, :2], unet_input[:, 2:])
                o["unet_input"] = unet_input[:, :2].astype(np.float32)
            f32, f64 = g["latents_after_step"][()], g["latents_after_step_f64"][()]
            print("%s: config %s" % (name, json.loads(g.attrs["scheduler_config"])["_class_name"]))
            print("  diffusers f32 vs f64 latents: max abs %.3g, relative %.3g" % (
                np.abs(f32 - f64).max(), np.abs(f32 - f64).max() / np.abs(f64).max()))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: extract_scheduler_golden.py GOLDEN_H5 OUT_H5")
    main(sys.argv[1], sys.argv[2])
