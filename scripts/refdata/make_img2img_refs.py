#!/usr/bin/env python3
"""Writes tests/data/img2img/: two tiny SD models and what diffusers' img2img and
inpainting pipelines compute with them, for tests/pipeline/img2img_test.cc.

Offline tool (not used by the build or the tests). Run with diffusers, torch,
transformers, h5py and pillow (the venv /opt/venvs/torch-current has them):
  /opt/venvs/torch-current/bin/python scripts/refdata/make_img2img_refs.py \
      --tokenizer text/data/tiny-tokenizer --sdxl tests/data/tiny-sdxl-b --out tests/data/img2img

What it writes:
  tiny-sd/          a tiny StableDiffusionPipeline folder (UNet (8, 16), VAE (8, 16),
                    a 2-layer CLIP text model of width 16, the tiny tokenizer, SD 1.x's
                    PNDM scheduler config), random weights re-drawn N(0, 1/fan_in) so
                    that every layer matters
  tiny-sd-inpaint/  the same with a 9-channel UNet (latents + mask + masked-image
                    latents), model_index StableDiffusionInpaintPipeline
  init.png, mask.png, init_sdxl.png, mask_sdxl.png   the inputs (RGB; the masks
                    are grey levels, some just below and above 128)
  refs.h5           one group per case, the unmodified pipelines of diffusers
                    (StableDiffusionImg2ImgPipeline, StableDiffusionInpaintPipeline,
                    StableDiffusionXLImg2ImgPipeline, StableDiffusionXLInpaintPipeline)
                    in float32 on the CPU.

Every N(0, 1) draw of a pipeline (diffusers' randn_tensor, in the pipeline and in
the VAE's DiagonalGaussianDistribution.sample) is replaced by numpy draws that
are saved, so a test can feed tpumesh the same noise:
  posterior_noise  (B, 2, C, h, w) f32  [:, 0] the init image's posterior sample
                   noise, [:, 1] the masked image's (zeros where the pipeline
                   draws none); diffusers encodes one init image once and repeats
                   its latents over the batch, so the rows are equal
  noise            (B, C, h, w) f32     the noise added to the image latents (or
                   the initial latents at strength 1)
  timesteps        (S,) f64             the timesteps the loop runs
  latents_after_step (S, B, C, h, w) f32 the latents at the end of every loop
                   iteration (callback_on_step_end; after the inpainting blend)
  images           (B, H, W, 3) uint8   the pipeline's PIL output
Attribute "case": JSON with model ("tiny-sd", "tiny-sd-inpaint", "tiny-sdxl-b"),
scheduler (tpumesh's name), prompts, steps, strength, guidance, height, width,
init, mask ("" for img2img); diffusers/torch versions at the root.
"""
import argparse
import inspect
import json
import os
import shutil

import h5py
import numpy as np
import PIL.Image
import safetensors.torch
import torch

import diffusers
from diffusers import (AutoencoderKL, DPMSolverMultistepScheduler, EulerDiscreteScheduler, HeunDiscreteScheduler,
                       LMSDiscreteScheduler,
                       PNDMScheduler, StableDiffusionImg2ImgPipeline, StableDiffusionInpaintPipeline,
                       StableDiffusionPipeline, StableDiffusionXLImg2ImgPipeline, StableDiffusionXLInpaintPipeline,
                       UNet2DConditionModel)
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

SCHEDULERS = {"pndm": PNDMScheduler, "euler": EulerDiscreteScheduler, "dpmpp_2m": DPMSolverMultistepScheduler,
              "lms": LMSDiscreteScheduler, "heun": HeunDiscreteScheduler}
SD_SCHEDULER = {
    "_class_name": "PNDMScheduler", "beta_end": 0.012, "beta_schedule": "scaled_linear", "beta_start": 0.00085,
    "clip_sample": False, "num_train_timesteps": 1000, "prediction_type": "epsilon", "set_alpha_to_one": False,
    "skip_prk_steps": True, "steps_offset": 1, "timestep_spacing": "leading", "trained_betas": None,
}


def reinit(module, seed):
    """Every weight N(0, 1/fan_in), every norm 1 + N(0, 0.1^2), biases N(0, 0.1^2)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.ndim >= 2:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


def make_models(tokenizer_dir, out):
    tok = CLIPTokenizer.from_pretrained(tokenizer_dir)
    te = CLIPTextModel(CLIPTextConfig(
        vocab_size=1000, hidden_size=16,
        intermediate_size=24, num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=77,
        hidden_act="quick_gelu", bos_token_id=0, eos_token_id=2, pad_token_id=1, projection_dim=16))
    reinit(te, 1)
    vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 2,
                        up_block_types=["UpDecoderBlock2D"] * 2, block_out_channels=[8, 16], layers_per_block=1,
                        latent_channels=4, norm_num_groups=4, sample_size=32, scaling_factor=0.18215)
    reinit(vae, 2)
    folders = {}
    for name, in_channels, cls in (("tiny-sd", 4, StableDiffusionPipeline),
                                   ("tiny-sd-inpaint", 9, StableDiffusionInpaintPipeline)):
        unet = UNet2DConditionModel(
            sample_size=16, in_channels=in_channels, out_channels=4, layers_per_block=1, block_out_channels=[8, 16],
            down_block_types=["DownBlock2D", "CrossAttnDownBlock2D"],
            up_block_types=["CrossAttnUpBlock2D", "UpBlock2D"], cross_attention_dim=16, attention_head_dim=2,
            norm_num_groups=4)
        reinit(unet, 3 if in_channels == 4 else 4)
        pipe = cls(vae=vae, text_encoder=te, tokenizer=tok, unet=unet, scheduler=PNDMScheduler.from_config(SD_SCHEDULER), safety_checker=None,
            feature_extractor=None, requires_safety_checker=False)
        path = os.path.join(out, name)
        shutil.rmtree(path, ignore_errors=True)
        pipe.save_pretrained(path)
        # transformers 5 drops the "text_model." prefix of CLIPTextModel's
        # keys; checkpoints on the hub (and transformers 4) have it.
        te_file = os.path.join(path, "text_encoder", "model.safetensors")
        tensors = safetensors.torch.load_file(te_file)
        safetensors.torch.save_file({k if k.startswith("text_model.") else "text_model." + k: v
                                     for k, v in tensors.items()}, te_file, metadata={"format": "pt"})
        # transformers 5 saves tokenizer.json only; tpumesh reads the slow
        # tokenizer's vocab.json and merges.txt (the same tokens).
        shutil.rmtree(os.path.join(path, "tokenizer"))
        shutil.copytree(tokenizer_dir, os.path.join(path, "tokenizer"),
                        ignore=shutil.ignore_patterns("README.md"))
        folders[name] = path
    return folders


def make_inputs(out, h, w, suffix, seed):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([(xx * 255 // max(w - 1, 1)), (yy * 255 // max(h - 1, 1)), ((xx + yy) * 7) % 256], -1)
    img = np.clip(img + rng.integers(-20, 21, img.shape), 0, 255).astype(np.uint8)
    mask = np.zeros((h, w), np.uint8)
    mask[h // 4:3 * h // 4, w // 3:] = 255
    mask[0, :] = 127  # just below the threshold: kept
    mask[-1, :] = 128  # just above: repainted
    init_path, mask_path = os.path.join(out, f"init{suffix}.png"), os.path.join(out, f"mask{suffix}.png")
    PIL.Image.fromarray(img, "RGB").save(init_path)
    # The mask as RGB with a tint: the pipelines convert it to L (grey) first.
    PIL.Image.fromarray(np.stack([mask, mask, np.minimum(mask, 200)], -1), "RGB").save(mask_path)
    return init_path, mask_path


class NoiseTape:
    """Replaces diffusers' randn_tensor: numpy N(0, 1) draws, recorded with their role."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.calls = []

    def __call__(self, shape, generator=None, device=None, dtype=None, layout=None):
        names = [f.function for f in inspect.stack()[1:8]]
        role = "posterior_masked" if "prepare_mask_latents" in names else \
            "posterior" if "sample" in names else "noise"
        a = self.rng.standard_normal(tuple(shape)).astype(np.float32)
        self.calls.append((role, a))
        return torch.from_numpy(a.copy()).to(dtype or torch.float32)


def patch(tape):
    import diffusers.models.autoencoders.vae as vae_mod
    mods = [vae_mod]
    for m in ("pipelines.stable_diffusion.pipeline_stable_diffusion_img2img",
              "pipelines.stable_diffusion.pipeline_stable_diffusion_inpaint",
              "pipelines.stable_diffusion_xl.pipeline_stable_diffusion_xl_img2img",
              "pipelines.stable_diffusion_xl.pipeline_stable_diffusion_xl_inpaint"):
        mods.append(__import__("diffusers." + m, fromlist=["x"]))
    for m in mods:
        m.randn_tensor = tape


def run_case(f, group, pipe_cls, folder, model_name, scheduler, prompts, steps, strength, guidance, init, mask,
             seed):
    pipe = pipe_cls.from_pretrained(folder, torch_dtype=torch.float32)
    if scheduler is not None:
        pipe.scheduler = SCHEDULERS[scheduler].from_config(pipe.scheduler.config)
    ours = scheduler or {"PNDMScheduler": "pndm", "EulerDiscreteScheduler": "euler"}[
        type(pipe.scheduler).__name__]
    tape = NoiseTape(seed)
    patch(tape)
    history = []

    def on_step(p, i, t, kw):
        history.append(kw["latents"].detach().numpy().copy())
        return kw

    image = PIL.Image.open(init).convert("RGB")
    kwargs = dict(prompt=prompts, image=image, strength=strength, num_inference_steps=steps,
                  guidance_scale=guidance, callback_on_step_end=on_step, output_type="np")
    if mask:
        kwargs["mask_image"] = PIL.Image.open(mask)
        kwargs["height"], kwargs["width"] = image.height, image.width
    timesteps_seen = []
    orig_step = pipe.scheduler.step

    def step(model_output, timestep, sample, *a, **k):
        timesteps_seen.append(float(timestep))
        return orig_step(model_output, timestep, sample, *a, **k)

    pipe.scheduler.step = step
    with torch.no_grad():
        out = pipe(**kwargs).images
    b = len(prompts)
    c, h, w = history[0].shape[1:]
    post = np.zeros((b, 2, c, h, w), np.float32)
    noise = None
    for role, a in tape.calls:
        if role == "noise":
            assert noise is None and a.shape == (b, c, h, w), a.shape
            noise = a
        else:
            slot = 1 if role == "posterior_masked" else 0
            assert a.shape[1:] == (c, h, w), a.shape
            post[:, slot] = a if a.shape[0] == b else np.repeat(a, b // a.shape[0], 0)
    g = f.create_group(group)
    g["posterior_noise"] = post
    g["noise"] = noise
    g["timesteps"] = np.array(timesteps_seen, np.float64)
    g["latents_after_step"] = np.stack(history)
    g["images"] = np.round(np.clip(out, 0, 1) * 255).astype(np.uint8)
    g.attrs["case"] = json.dumps(dict(model=model_name, scheduler=ours, prompts=prompts, steps=steps,
                                      strength=strength, guidance=guidance, height=image.height, width=image.width,
                                      init=os.path.basename(init), mask=os.path.basename(mask) if mask else ""))
    print(group, ours, "steps run", len(history), "noise draws", [r for r, _ in tape.calls])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--sdxl", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(1)
    folders = make_models(a.tokenizer, a.out)
    init, mask = make_inputs(a.out, 32, 32, "", 5)
    init_xl, mask_xl = make_inputs(a.out, 48, 64, "_sdxl", 6)
    prompts = ["a red circle", "a blue square on a green background"]
    with h5py.File(os.path.join(a.out, "refs.h5"), "w") as f:
        f.attrs["diffusers"] = diffusers.__version__
        f.attrs["torch"] = str(torch.__version__)
        sd, sdi = folders["tiny-sd"], folders["tiny-sd-inpaint"]
        I2I, INP = StableDiffusionImg2ImgPipeline, StableDiffusionInpaintPipeline
        run_case(f, "sd_img2img_pndm", I2I, sd, "tiny-sd", None, prompts, 10, 0.6, 7.5, init, None, 11)
        run_case(f, "sd_img2img_euler", I2I, sd, "tiny-sd", "euler", prompts, 8, 0.75, 7.5, init, None, 12)
        run_case(f, "sd_img2img_dpm", I2I, sd, "tiny-sd", "dpmpp_2m", prompts, 10, 0.5, 5.0, init, None, 13)
        run_case(f, "sd_img2img_lms", I2I, sd, "tiny-sd", "lms", prompts, 8, 0.7, 7.5, init, None, 14)
        run_case(f, "sd_img2img_heun", I2I, sd, "tiny-sd", "heun", prompts, 6, 0.5, 7.5, init, None, 22)
        run_case(f, "sd_inpaint_legacy_heun", INP, sd, "tiny-sd", "heun", prompts, 5, 0.6, 7.5, init, mask, 23)
        run_case(f, "sd_img2img_full", I2I, sd, "tiny-sd", "euler", prompts, 6, 1.0, 7.5, init, None, 15)
        run_case(f, "sd_inpaint_legacy_pndm", INP, sd, "tiny-sd", None, prompts, 10, 1.0, 7.5, init, mask, 16)
        run_case(f, "sd_inpaint_legacy_euler", INP, sd, "tiny-sd", "euler", prompts, 8, 0.8, 7.5, init, mask, 17)
        run_case(f, "sd_inpaint_unet9_pndm", INP, sdi, "tiny-sd-inpaint", None, prompts, 10, 1.0, 7.5, init, mask,
                 18)
        run_case(f, "sd_inpaint_unet9_dpm", INP, sdi, "tiny-sd-inpaint", "dpmpp_2m", prompts, 8, 0.7, 7.5, init,
                 mask, 19)
        xl_prompts = ["a red circle", "a blue square"]
        run_case(f, "sdxl_img2img_euler", StableDiffusionXLImg2ImgPipeline, a.sdxl, "tiny-sdxl-b", None,
                 xl_prompts, 10, 0.6, 5.0, init_xl, None, 20)
        run_case(f, "sdxl_inpaint_euler", StableDiffusionXLInpaintPipeline, a.sdxl, "tiny-sdxl-b", None,
                 xl_prompts, 10, 0.9999, 5.0, init_xl, mask_xl, 21)


if __name__ == "__main__":
    main()
