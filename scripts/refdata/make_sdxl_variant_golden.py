#!/usr/bin/env python3
"""Builds tests/data/tiny-sdxl-b: a second tiny Stable Diffusion XL pipeline
with other shapes than ../shared/refdata/tiny-sdxl-a (a three-level UNet of
widths (8, 16, 24) with one resnet per block, per-block head counts (1, 2, 4)
and transformer depths (1, 1, 2), a three-level VAE, narrower text encoders
with other head counts, a 48x64 image so the latents are 12x16 and the deepest
UNet level 3x4), and golden.h5 with what the REAL
StableDiffusionXLPipeline of diffusers 0.30.0 and the CLIP text models of
transformers 4.44.2 compute from it on CPU (float32, with float64 twins).

Offline tool: the build and the tests never run it. Dataset names and
semantics follow tiny-sdxl-a's golden.h5 (tokenizer*/, text_encoder*/,
unet/{t981,t1,tpair}/, vae_decode/, pipeline_euler/, pipeline_euler_noneg/);
see tests/data/tiny-sdxl-b/README.md. Library code is not modified: results
are recorded with forward hooks and thin wrappers that only copy tensors.

Needs Debian's python3-torch (1.13), python3-h5py, python3-numpy and a venv
with the pinned diffusers/transformers:

  apt-get install -y python3-torch python3-h5py python3-numpy python3-venv python3-pil
  /usr/bin/python3 -m venv --system-site-packages /work/venv-ref
  /work/venv-ref/bin/pip install diffusers==0.30.0 transformers==4.44.2 \\
      safetensors huggingface_hub==0.24.5
  HF_HUB_OFFLINE=1 /work/venv-ref/bin/python scripts/refdata/make_sdxl_variant_golden.py \\
      tests/data/tiny-sdxl-b [TOKENIZER_SOURCE]

TOKENIZER_SOURCE (default ../shared/refdata/tiny-sdxl-a next to the repo) is
the folder whose tokenizer/ and tokenizer_2/ are copied as they are (the same
tiny CLIP-BPE vocabulary; tokenizer_2 pads with "!" as SDXL's does).

  .../python scripts/refdata/make_sdxl_variant_golden.py --table tests/data/tiny-sdxl-b/golden.h5

prints the README's dataset table for an existing golden.h5.
"""
import functools
import inspect
import json
import math
import os
import platform
import shutil
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

VARIANT = "tiny-sdxl-b"
NUM_THREADS = int(os.environ.get("REF_NUM_THREADS", "2"))   # 2 for the committed data
WEIGHT_SEED = 2025
INPUT_SEED = 5202          # unet/ sample and vae_decode/ latents
INIT_LATENTS_SEED = 5302   # the pipelines' init_latents
HEIGHT, WIDTH = 48, 64     # pixels; latents 12 x 16 (UNet levels 12x16, 6x8, 3x4)
STEPS, GUIDANCE = 4, 5.0

PROMPTS = [
    "a cute red fox sitting in a snowy forest, golden hour, bokeh",
    "",
    "an epic fantasy illustration of a huge dragon flying over a medieval castle on a hill at night, "
    "lightning in the dramatic clouds, a small village with warm lights below, a winding river, "
    "knights riding horses across the bridge, intricate details, volumetric lighting, sharp focus, "
    "cinematic composition, concept art by a famous artist, trending on artstation, octane render, "
    "ultra detailed, eight k, masterpiece, with a jazz band, a quiet zebra and a xylophone",
    "Wow!! NEON city at 2am ! two ships; a dragon's eyes,  reflections (cyberpunk) na\u00efve!",
]
PIPE_PROMPT_INDICES = (0, 3)
NEGATIVE_PROMPTS = ["", "jpeg artifacts, cropped, blurry, low quality"]
NONEG_SIZES = dict(original_size=(1024, 768), crops_coords_top_left=(16, 32), target_size=(896, 640))
UNET_TIME_IDS = [[HEIGHT, WIDTH, 0, 0, HEIGHT, WIDTH], [1024, 768, 16, 32, 896, 640]]

TEXT = dict(vocab_size=1000, hidden_size=24, intermediate_size=48, num_attention_heads=2, num_hidden_layers=3,
            hidden_act="quick_gelu", max_position_embeddings=77, layer_norm_eps=1e-5, projection_dim=24,
            bos_token_id=0, eos_token_id=2, pad_token_id=1)
TEXT_2 = dict(vocab_size=1000, hidden_size=40, intermediate_size=72, num_attention_heads=5, num_hidden_layers=2,
              hidden_act="gelu", max_position_embeddings=77, layer_norm_eps=1e-5, projection_dim=24,
              bos_token_id=0, eos_token_id=2, pad_token_id=1)
ADD_TIME_DIM = 8
UNET = dict(sample_size=16, in_channels=4, out_channels=4,
            down_block_types=["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
            up_block_types=["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
            block_out_channels=[8, 16, 24], layers_per_block=1, transformer_layers_per_block=[1, 1, 2],
            attention_head_dim=[1, 2, 4], use_linear_projection=True, upcast_attention=False,
            norm_num_groups=8, cross_attention_dim=TEXT["hidden_size"] + TEXT_2["hidden_size"],
            addition_embed_type="text_time", addition_time_embed_dim=ADD_TIME_DIM,
            projection_class_embeddings_input_dim=6 * ADD_TIME_DIM + TEXT_2["projection_dim"])
VAE = dict(in_channels=3, out_channels=3, latent_channels=4,
           down_block_types=["DownEncoderBlock2D"] * 3, up_block_types=["UpDecoderBlock2D"] * 3,
           block_out_channels=[8, 16, 16], layers_per_block=1, norm_num_groups=4, sample_size=64,
           scaling_factor=0.13025, force_upcast=True)
# SDXL base 1.0's scheduler config (as tiny-sdxl-a/scheduler, unused keys included).
SCHEDULER = {"beta_end": 0.012, "beta_schedule": "scaled_linear", "beta_start": 0.00085, "clip_sample": False,
             "final_sigmas_type": "zero", "interpolation_type": "linear", "num_train_timesteps": 1000,
             "prediction_type": "epsilon", "rescale_betas_zero_snr": False, "sample_max_value": 1.0,
             "set_alpha_to_one": False, "sigma_max": None, "sigma_min": None, "skip_prk_steps": True,
             "steps_offset": 1, "timestep_spacing": "leading", "timestep_type": "discrete", "trained_betas": None,
             "use_karras_sigmas": False}
UNET_STD_TARGET, VAE_STD_TARGET = 1.0, 0.45

VARIANT_CONFIG = {"variant": VARIANT, "height": HEIGHT, "width": WIDTH, "weight_seed": WEIGHT_SEED,
                  "input_seed": INPUT_SEED, "init_latents_seed": INIT_LATENTS_SEED, "vocab_size": 1000,
                  "text": TEXT, "text_2": TEXT_2, "unet": UNET, "vae": VAE, "scheduler": SCHEDULER}


def check_bmm_sizes():
    """torch 1.13's CPU baddbmm has a small-size path (contraction x rows x cols < 400) that, with
    beta=0 as diffusers' AttnProcessor calls it, reads the uninitialised output buffer: the scores
    come out NaN now and then (seen with 6 latent tokens at the deepest level of a 32x48 image).
    Every UNet/VAE attention here must stay on the other path."""
    h, w = HEIGHT // 4, WIDTH // 4
    for level, (ch, heads) in enumerate(zip(UNET["block_out_channels"], UNET["attention_head_dim"])):
        tokens = (h >> level) * (w >> level)
        if "CrossAttn" in UNET["down_block_types"][level]:
            assert (ch // heads) * tokens * min(tokens, 77) >= 400, (level, ch, heads, tokens)
    tokens = h * w   # VAE mid-block attention: one head over all channels, latent resolution
    assert VAE["block_out_channels"][-1] * tokens * tokens >= 400


def sig3(x):
    return float(f"{x:.3g}")


def reinit(models, seed):
    """tiny-sdxl-a's re-initialisation: one generator, parameters visited in
    named_parameters() order of each model in turn; conv/linear weights
    N(0, 1/fan_in), their biases N(0, 0.05^2); embeddings N(0, 1);
    GroupNorm/LayerNorm weights 1 + N(0, 0.1^2), biases N(0, 0.1^2)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for model in models:
            modules = dict(model.named_modules())
            for name, p in model.named_parameters():
                mod_name, _, kind = name.rpartition(".")
                m = modules[mod_name]
                r = torch.randn(p.shape, generator=g, dtype=torch.float32)
                if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                    p.copy_(r / math.sqrt(p[0].numel()) if kind == "weight" else 0.05 * r)
                elif isinstance(m, torch.nn.Embedding):
                    p.copy_(r)
                elif isinstance(m, (torch.nn.GroupNorm, torch.nn.LayerNorm)):
                    p.copy_(1 + 0.1 * r if kind == "weight" else 0.1 * r)
                else:
                    raise RuntimeError(f"no init rule for {name} ({type(m).__name__})")


def t2n(x):
    return x.detach().cpu().numpy()


def put(f, name, value, **attrs):
    d = f.create_dataset(name, data=value)
    for k, v in attrs.items():
        d.attrs[k] = v
    return d


def uint8_image(img):
    # diffusers' numpy_to_pil: (images * 255).round().astype("uint8") (rint: half to even).
    return (img * 255).round().astype("uint8")


def text_outputs(te, ids, with_projection):
    out = te(ids, output_hidden_states=True)
    r = {"hidden_states": torch.stack(out.hidden_states), "penultimate": out.hidden_states[-2],
         "last_hidden_state": out.last_hidden_state}
    if with_projection:
        r["text_embeds"] = out.text_embeds
        # the final-LayerNorm state at argmax(input_ids) (legacy eos_token_id 2), before text_projection
        r["pooler_output"] = out.last_hidden_state[torch.arange(ids.shape[0]), ids.argmax(-1)]
    else:
        r["pooler_output"] = out.pooler_output
    return r


def inputs():
    g = torch.Generator().manual_seed(INPUT_SEED)
    h, w = HEIGHT // 4, WIDTH // 4
    sample = torch.randn((2, 4, h, w), generator=g, dtype=torch.float32)
    vae_latents = torch.randn((2, 4, h, w), generator=g, dtype=torch.float32)
    return sample, vae_latents


def build(out, tok_src):
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionXLPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, CLIPTokenizer

    torch.manual_seed(0)
    tok = CLIPTokenizer.from_pretrained(os.path.join(tok_src, "tokenizer"))
    tok2 = CLIPTokenizer.from_pretrained(os.path.join(tok_src, "tokenizer_2"))
    assert len(tok) == TEXT["vocab_size"] == len(tok2) and tok2.pad_token == "!" and tok2.pad_token_id == 0
    te = CLIPTextModel(CLIPTextConfig(**TEXT)).eval()
    te2 = CLIPTextModelWithProjection(CLIPTextConfig(**TEXT_2)).eval()
    unet = UNet2DConditionModel(**UNET).eval()
    vae = AutoencoderKL(**VAE).eval()
    sched = EulerDiscreteScheduler.from_config(SCHEDULER)
    reinit([te, te2, unet, vae], WEIGHT_SEED)

    # Calibration on the unet/ and vae_decode/ golden inputs (factors to 3 significant digits).
    sample, vae_latents = inputs()
    with torch.no_grad():
        ids = tok([PROMPTS[i] for i in PIPE_PROMPT_INDICES], padding="max_length", max_length=77,
                  truncation=True, return_tensors="pt").input_ids
        ids2 = tok2([PROMPTS[i] for i in PIPE_PROMPT_INDICES], padding="max_length", max_length=77,
                    truncation=True, return_tensors="pt").input_ids
        o2 = te2(ids2, output_hidden_states=True)
        ehs = torch.cat([te(ids, output_hidden_states=True).hidden_states[-2], o2.hidden_states[-2]], -1)
        cond = {"text_embeds": o2.text_embeds, "time_ids": torch.tensor(UNET_TIME_IDS, dtype=torch.float32)}
        y = unet(sample, torch.tensor(981), ehs, added_cond_kwargs=cond).sample
        unet_factor = sig3(UNET_STD_TARGET / y.std().item())
        unet.conv_out.weight.mul_(unet_factor)
        unet.conv_out.bias.mul_(unet_factor)
        d = vae.decode(vae_latents / VAE["scaling_factor"]).sample
        vae_factor = sig3(VAE_STD_TARGET / d.std().item())
        vae.decoder.conv_out.weight.mul_(vae_factor)
        vae.decoder.conv_out.bias.mul_(vae_factor)

    pipe = StableDiffusionXLPipeline(vae=vae, text_encoder=te, text_encoder_2=te2, tokenizer=tok, tokenizer_2=tok2,
                                     unet=unet, scheduler=sched, force_zeros_for_empty_prompt=True,
                                     add_watermarker=False)
    pipe.save_pretrained(out, safe_serialization=True)
    for sub in ("tokenizer", "tokenizer_2"):   # as they are in the source folder
        shutil.rmtree(os.path.join(out, sub))
        shutil.copytree(os.path.join(tok_src, sub), os.path.join(out, sub))
        for fn in os.listdir(os.path.join(out, sub)):
            os.chmod(os.path.join(out, sub, fn), 0o644)
        os.chmod(os.path.join(out, sub), 0o755)
    counts = {n: sum(p.numel() for p in m.parameters())
              for n, m in (("text_encoder", te), ("text_encoder_2", te2), ("unet", unet), ("vae", vae))}
    return {"unet_conv_out": unet_factor, "vae_decoder_conv_out": vae_factor}, counts


class PipelineRecorder:
    """Thin wrappers / hooks on one loaded pipeline that only copy tensors."""

    def __init__(self, pipe):
        self.pipe = pipe
        self.reset()
        for key, te in (("ids", pipe.text_encoder), ("ids_2", pipe.text_encoder_2)):
            te.register_forward_pre_hook(lambda m, args, key=key: self.rec[key].append(args[0].clone()))
        self._wrap(pipe, "encode_prompt", self._on_encode)
        self._wrap(pipe, "prepare_latents", lambda a, r: self.rec.__setitem__("init_latents_scaled", r.clone()))
        self._wrap(pipe.unet, "forward", self._on_unet)
        self._wrap(pipe.scheduler, "step", lambda a, r: self.rec["latents_after_step"].append(r[0].clone()))
        self._wrap(pipe.vae, "decode", self._on_decode)

    def reset(self):
        self.rec = {"ids": [], "ids_2": [], "unet_input": [], "unet_timestep": [], "ehs": [], "text_embeds": [],
                    "time_ids": [], "noise_pred_raw": [], "latents_after_step": [], "decode_in": [], "decoded": []}

    @staticmethod
    def _wrap(obj, name, on_result):
        orig = getattr(obj, name)
        sig = inspect.signature(orig)

        @functools.wraps(orig)   # keeps the signature diffusers inspects (scheduler.step: eta, generator)
        def wrapper(*args, **kwargs):
            r = orig(*args, **kwargs)
            with torch.no_grad():
                on_result(sig.bind(*args, **kwargs).arguments, r)
            return r
        setattr(obj, name, wrapper)

    def _on_encode(self, a, r):
        for k, v in zip(("prompt_embeds", "negative_prompt_embeds", "pooled_prompt_embeds",
                         "negative_pooled_prompt_embeds"), r):
            self.rec[k] = v.clone()

    def _on_unet(self, a, r):
        self.rec["unet_input"].append(a["sample"].clone())
        self.rec["unet_timestep"].append(torch.as_tensor(a["timestep"]).clone())
        self.rec["ehs"].append(a["encoder_hidden_states"].clone())
        self.rec["text_embeds"].append(a["added_cond_kwargs"]["text_embeds"].clone())
        self.rec["time_ids"].append(a["added_cond_kwargs"]["time_ids"].clone())
        self.rec["noise_pred_raw"].append((r[0] if isinstance(r, tuple) else r.sample).clone())

    def _on_decode(self, a, r):
        self.rec["decode_in"].append(a["z"].clone())
        self.rec["decoded"].append((r[0] if isinstance(r, tuple) else r.sample).clone())


def run_pipeline(pipe, init_latents, negative, sizes):
    if not hasattr(pipe, "_golden_recorder"):
        pipe._golden_recorder = PipelineRecorder(pipe)
    rec = pipe._golden_recorder
    rec.reset()
    dtype = pipe.unet.dtype
    kwargs = dict(prompt=[PROMPTS[i] for i in PIPE_PROMPT_INDICES], height=HEIGHT, width=WIDTH,
                  num_inference_steps=STEPS, guidance_scale=GUIDANCE, latents=init_latents.to(dtype),
                  output_type="np")
    if negative is not None:
        kwargs["negative_prompt"] = negative
    if sizes is not None:
        kwargs.update(sizes)
    with torch.no_grad():
        images = pipe(**kwargs).images
    r = dict(rec.rec)
    r["images"] = images
    # The UNet's conditioning, checked at every call: rows [neg0, neg1, pos0, pos1].
    for ehs, te in zip(r["ehs"], r["text_embeds"]):
        assert torch.equal(ehs, torch.cat([r["negative_prompt_embeds"], r["prompt_embeds"]]))
        assert torch.equal(te, torch.cat([r["negative_pooled_prompt_embeds"], r["pooled_prompt_embeds"]]))
    for t in r["time_ids"]:
        assert torch.equal(t, r["time_ids"][0])
    assert len(r["decoded"]) == 1
    assert torch.equal(r["decode_in"][0], r["latents_after_step"][-1] / pipe.vae.config.scaling_factor)
    return r


def write_pipeline(f, grp, r, r64, init_latents, negative, sizes, sched):
    g = f.create_group(grp)
    n = len(r["noise_pred_raw"])
    ids, ids2 = r["ids"], r["ids_2"]
    put(g, "prompt_input_ids", t2n(ids[0]).astype(np.int64))
    put(g, "prompt_input_ids_2", t2n(ids2[0]).astype(np.int64))
    if negative is not None:
        assert len(ids) == len(ids2) == 2
        put(g, "negative_input_ids", t2n(ids[1]).astype(np.int64))
        put(g, "negative_input_ids_2", t2n(ids2[1]).astype(np.int64))
    else:
        assert len(ids) == len(ids2) == 1
    for k in ("prompt_embeds", "negative_prompt_embeds", "pooled_prompt_embeds", "negative_pooled_prompt_embeds"):
        put(g, k, t2n(r[k]))
    for k in ("pooled_prompt_embeds", "negative_pooled_prompt_embeds"):
        put(g, k + "_f64", t2n(r64[k]))
    put(g, "add_time_ids", t2n(r["time_ids"][0]))
    h, w = init_latents.shape[-2:]
    put(g, "init_latents", t2n(init_latents),
        content="the N(0,1) draw passed to the pipeline as latents= and to tpumesh as --latents; "
                "NOT multiplied by init_noise_sigma",
        generator=f"torch.Generator('cpu').manual_seed({INIT_LATENTS_SEED}); "
                  f"torch.randn((2, 4, {h}, {w}), generator=g, dtype=torch.float32)")
    put(g, "init_latents_scaled", t2n(r["init_latents_scaled"]),
        content="init_latents * scheduler.init_noise_sigma as prepare_latents returns it: "
                "the latents the denoising loop starts from")
    put(g, "timesteps", t2n(sched.timesteps).astype(np.int64))
    put(g, "sigmas", t2n(sched.sigmas).astype(np.float32))
    put(g, "alphas_cumprod", t2n(sched.alphas_cumprod).astype(np.float32))
    put(g, "betas", t2n(sched.betas).astype(np.float32))
    put(g, "unet_input", t2n(torch.stack(r["unet_input"])))
    put(g, "unet_timestep", np.array([float(t) for t in r["unet_timestep"]], dtype=np.float64))
    put(g, "noise_pred_raw", t2n(torch.stack(r["noise_pred_raw"])))
    put(g, "latents_after_step", t2n(torch.stack(r["latents_after_step"])))
    put(g, "latents_after_step_f64", t2n(torch.stack(r64["latents_after_step"])))
    put(g, "decoded", t2n(r["decoded"][0]))
    put(g, "images", r["images"].astype(np.float32))
    put(g, "images_uint8", uint8_image(r["images"]))
    put(g, "images_uint8_f64", uint8_image(r64["images"]))
    a = g.attrs
    a["prompts"] = json.dumps([PROMPTS[i] for i in PIPE_PROMPT_INDICES])
    a["negative_prompts"] = json.dumps(negative)
    a["negative_prompt_passed"] = np.bool_(negative is not None)
    a["negative_embeds_zeroed"] = np.bool_(not r["negative_prompt_embeds"].any().item())
    a["force_zeros_for_empty_prompt"] = np.bool_(True)
    a["size_kwargs_passed"] = np.bool_(sizes is not None)
    s = sizes or {}
    a["original_size"] = json.dumps(list(s.get("original_size", (HEIGHT, WIDTH))))
    a["crops_coords_top_left"] = json.dumps(list(s.get("crops_coords_top_left", (0, 0))))
    a["target_size"] = json.dumps(list(s.get("target_size", (HEIGHT, WIDTH))))
    a["guidance_scale"] = np.float64(GUIDANCE)
    a["num_inference_steps"] = np.int64(STEPS)
    a["num_unet_calls"] = np.int64(n)
    a["height"] = np.int64(HEIGHT)
    a["width"] = np.int64(WIDTH)
    a["output_type"] = "np"
    a["eta"] = np.float64(0.0)
    a["init_latents_seed"] = np.int64(INIT_LATENTS_SEED)
    a["init_noise_sigma"] = np.float64(float(sched.init_noise_sigma))
    a["cli_scheduler"] = "euler"
    a["scheduler_class"] = type(sched).__name__
    a["scheduler_config"] = json.dumps(dict(sched.config), sort_keys=True)
    a["vae_scale_factor"] = np.int64(2 ** (len(VAE["block_out_channels"]) - 1))
    a["vae_force_upcast"] = np.bool_(VAE["force_upcast"])
    a["vae_upcast_applied"] = np.bool_(False)


def torch_version():
    v = str(torch.__version__)
    try:  # Debian's build reports 1.13.0a0; name the package it came from
        deb = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "python3-torch"], capture_output=True,
                             text=True, check=True).stdout.strip()
        if deb and torch.__file__.startswith("/usr/lib/python3/"):
            v += f" (Debian python3-torch {deb})"
    except (OSError, subprocess.CalledProcessError):
        pass
    return v


def float64_default_dtype(module):
    """transformers 4.44's CLIP builds its causal mask with torch.full(..., finfo(dtype).min) in the
    DEFAULT dtype, which overflows for float64 on torch 1.13; the float64 text encoders therefore run
    with the default dtype float64 (only inside their forward; the rest of the pipeline is untouched)."""
    orig = module.forward

    @functools.wraps(orig)
    def forward(*args, **kwargs):
        prev = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            return orig(*args, **kwargs)
        finally:
            torch.set_default_dtype(prev)
    module.forward = forward


def golden(out, factors):
    import diffusers
    import huggingface_hub
    import PIL
    import safetensors
    import transformers
    from diffusers import StableDiffusionXLPipeline
    from diffusers.utils import logging as dlogging

    dlogging.disable_progress_bar()
    pipe = StableDiffusionXLPipeline.from_pretrained(out, add_watermarker=False)
    pipe64 = StableDiffusionXLPipeline.from_pretrained(out, add_watermarker=False, torch_dtype=torch.float64)
    float64_default_dtype(pipe64.text_encoder)
    float64_default_dtype(pipe64.text_encoder_2)
    for p in (pipe, pipe64):
        p.set_progress_bar_config(disable=True)
        assert p.vae_scale_factor == 4 and p.config.force_zeros_for_empty_prompt
    tok, tok2 = pipe.tokenizer, pipe.tokenizer_2
    te, te2, unet, vae = pipe.text_encoder, pipe.text_encoder_2, pipe.unet, pipe.vae

    path = os.path.join(out, "golden.h5")
    if os.path.exists(path):
        os.remove(path)
    f = h5py.File(path, "w")
    a = f.attrs
    a["variant"] = VARIANT
    a["made_by"] = "scripts/refdata/make_sdxl_variant_golden.py"
    a["variant_config_json"] = json.dumps(VARIANT_CONFIG, indent=1, sort_keys=True)
    a["version_python"] = platform.python_version()
    a["version_torch"] = torch_version()
    a["version_numpy"] = str(np.__version__)
    a["version_h5py"] = str(h5py.__version__)
    a["version_diffusers"] = str(diffusers.__version__)
    a["version_transformers"] = str(transformers.__version__)
    a["version_huggingface_hub"] = str(huggingface_hub.__version__)
    a["version_safetensors"] = str(safetensors.__version__)
    a["version_pillow"] = str(PIL.__version__)
    a["version_torch_num_threads"] = str(torch.get_num_threads())
    a["parameter_counts_json"] = json.dumps({n: sum(p.numel() for p in m.parameters()) for n, m in
                                             (("text_encoder", te), ("text_encoder_2", te2), ("unet", unet),
                                              ("vae", vae))}, sort_keys=True)
    a["attn_processor_unet"] = ",".join(sorted({type(p).__name__ for p in unet.attn_processors.values()}))
    a["calibration_json"] = json.dumps(factors, sort_keys=True)
    a["attn_processor_vae"] = ",".join(sorted({type(p).__name__ for p in vae.attn_processors.values()}))

    # --- tokenizers
    g = f.create_group("tokenizer")
    g.create_dataset("prompts", data=np.array(PROMPTS, dtype=object), dtype=h5py.string_dtype("utf-8"))
    enc = tok(PROMPTS, padding="max_length", max_length=77, truncation=True, return_tensors="pt")
    enc2 = tok2(PROMPTS, padding="max_length", max_length=77, truncation=True, return_tensors="pt")
    put(g, "input_ids", t2n(enc.input_ids).astype(np.int64))
    put(g, "attention_mask", t2n(enc.attention_mask).astype(np.int64))
    for i, p in enumerate(PROMPTS):
        put(g, f"ids_untruncated_{i}", np.array(tok(p).input_ids, dtype=np.int64))
    g2 = f.create_group("tokenizer_2")
    put(g2, "input_ids", t2n(enc2.input_ids).astype(np.int64))
    put(g2, "attention_mask", t2n(enc2.attention_mask).astype(np.int64))
    for i, p in enumerate(PROMPTS):
        put(g2, f"ids_untruncated_{i}", np.array(tok2(p).input_ids, dtype=np.int64))
    for grp, t in ((g, tok), (g2, tok2)):
        grp.attrs["bos_token_id"] = np.int64(t.bos_token_id)
        grp.attrs["eos_token_id"] = np.int64(t.eos_token_id)
        grp.attrs["pad_token"] = t.pad_token
        grp.attrs["pad_token_id"] = np.int64(t.pad_token_id)
        grp.attrs["model_max_length"] = np.int64(t.model_max_length)

    # --- text encoders
    with torch.no_grad():
        outs = {}
        for name, m, m64, ids, proj in (("text_encoder", te, pipe64.text_encoder, enc.input_ids, False),
                                        ("text_encoder_2", te2, pipe64.text_encoder_2, enc2.input_ids, True)):
            r, r64 = text_outputs(m, ids, proj), text_outputs(m64, ids, proj)
            outs[name] = r
            gg = f.create_group(name)
            gg.attrs["attn_implementation"] = m.config._attn_implementation
            put(gg, "input_ids", t2n(ids).astype(np.int64))
            for k in ("hidden_states", "penultimate", "last_hidden_state", "pooler_output") + \
                     (("text_embeds",) if proj else ()):
                put(gg, k, t2n(r[k]))
            for k in ("pooler_output",) + (("text_embeds",) if proj else ()):
                put(gg, k + "_f64", t2n(r64[k]))
            assert torch.equal(r["penultimate"], r["hidden_states"][-2])
        # transformers' own pooler_output agrees with the argmax pooling used for text_encoder_2
        chk = te2.text_model(enc2.input_ids).pooler_output
        assert torch.equal(chk, outs["text_encoder_2"]["pooler_output"])

    # --- UNet alone
    sample, vae_latents = inputs()
    sel = list(PIPE_PROMPT_INDICES)
    ehs = torch.cat([outs["text_encoder"]["penultimate"][sel], outs["text_encoder_2"]["penultimate"][sel]], -1)
    text_embeds = outs["text_encoder_2"]["text_embeds"][sel].clone()
    time_ids = torch.tensor(UNET_TIME_IDS, dtype=torch.float32)
    gu = f.create_group("unet")
    put(gu, "sample", t2n(sample))
    put(gu, "encoder_hidden_states", t2n(ehs))
    put(gu, "text_embeds", t2n(text_embeds))
    put(gu, "time_ids", t2n(time_ids))

    def call_unet(m, t, s=sample, e=ehs, te_=text_embeds, ti=time_ids, dt=torch.float32):
        return m(s.to(dt), t, e.to(dt), added_cond_kwargs={"text_embeds": te_.to(dt), "time_ids": ti.to(dt)}).sample

    inter = {}
    hooks = []
    names = ["time_proj", "time_embedding", "add_time_proj", "add_embedding"] + \
            [f"down_blocks.{i}" for i in range(3)] + ["mid_block", "up_blocks.0"]
    mods = dict(unet.named_modules())
    for nm in names:
        hooks.append(mods[nm].register_forward_hook(
            lambda m, i, o, nm=nm: inter.__setitem__(nm, (o[0] if isinstance(o, tuple) else o).clone())))
    with torch.no_grad():
        for name, t in (("t981", torch.tensor(981)), ("t1", torch.tensor(1)), ("tpair", torch.tensor([981, 1]))):
            inter.clear()
            y = call_unet(unet, t)
            y64 = call_unet(pipe64.unet, t, dt=torch.float64)
            put(gu, f"{name}/timestep", t2n(t).astype(np.int64))
            put(gu, f"{name}/out_sample", t2n(y))
            put(gu, f"{name}/out_sample_f64", t2n(y64))
            if name == "t981":
                for nm in names:
                    put(gu, f"{name}/intermediates/{nm}", t2n(inter[nm]))
        for h in hooks:
            h.remove()
        base = call_unet(unet, torch.tensor(981))

        def rel(y):
            return ((y - base).norm() / base.norm()).item()
        sens = {
            "timestep 981 -> 1": rel(call_unet(unet, torch.tensor(1))),
            "encoder_hidden_states -> 0": rel(call_unet(unet, torch.tensor(981), e=torch.zeros_like(ehs))),
            "text_embeds -> 0": rel(call_unet(unet, torch.tensor(981), te_=torch.zeros_like(text_embeds))),
            "time_ids -> (1024,1024,0,0,1024,1024)": rel(call_unet(
                unet, torch.tensor(981), ti=torch.tensor([[1024.0, 1024, 0, 0, 1024, 1024]] * 2))),
            "time_ids H<->W swapped": rel(call_unet(unet, torch.tensor(981), ti=time_ids[:, [1, 0, 3, 2, 5, 4]])),
            "text_encoder part of encoder_hidden_states -> 0": rel(call_unet(
                unet, torch.tensor(981), e=torch.cat([torch.zeros_like(ehs[..., :TEXT["hidden_size"]]),
                                                      ehs[..., TEXT["hidden_size"]:]], -1))),
            "text_encoder_2 part of encoder_hidden_states -> 0": rel(call_unet(
                unet, torch.tensor(981), e=torch.cat([ehs[..., :TEXT["hidden_size"]],
                                                      torch.zeros_like(ehs[..., TEXT["hidden_size"]:])], -1))),
        }
        gu.attrs["sensitivity_json"] = json.dumps(sens)
        gu.attrs["out_sample_std_t981"] = np.float64(base.std().item())

    # --- VAE decode
    gv = f.create_group("vae_decode")
    gv.attrs["scaling_factor"] = np.float64(VAE["scaling_factor"])
    with torch.no_grad():
        z = vae_latents / vae.config.scaling_factor
        pq = {}
        hk = vae.post_quant_conv.register_forward_hook(lambda m, i, o: pq.__setitem__("x", o.clone()))
        dec = vae.decode(z).sample
        hk.remove()
        dec64 = pipe64.vae.decode(z.double()).sample
    img = t2n((dec / 2 + 0.5).clamp(0, 1).permute(0, 2, 3, 1))
    img64 = t2n((dec64 / 2 + 0.5).clamp(0, 1).permute(0, 2, 3, 1))
    put(gv, "latents", t2n(vae_latents))
    put(gv, "decoder_input", t2n(z))
    put(gv, "decoded", t2n(dec))
    put(gv, "image_uint8", uint8_image(img))
    put(gv, "image_uint8_f64", uint8_image(img64))
    put(gv, "intermediates/post_quant_conv", t2n(pq["x"]))

    # --- pipelines
    g = torch.Generator("cpu").manual_seed(INIT_LATENTS_SEED)
    init_latents = torch.randn((2, 4, HEIGHT // 4, WIDTH // 4), generator=g, dtype=torch.float32)
    for grp, negative, sizes in (("pipeline_euler", NEGATIVE_PROMPTS, None),
                                 ("pipeline_euler_noneg", None, NONEG_SIZES)):
        r = run_pipeline(pipe, init_latents, negative, sizes)
        r64 = run_pipeline(pipe64, init_latents, negative, sizes)
        write_pipeline(f, grp, r, r64, init_latents, negative, sizes, pipe.scheduler)
    f.close()
    return path


def check(path):
    """The sanity checks of the brief, on the written file."""
    with h5py.File(path, "r") as f:
        bad = []
        f.visititems(lambda n, d: bad.append(n) if isinstance(d, h5py.Dataset) and d.dtype.kind == "f"
                     and not np.isfinite(d[()]).all() else None)
        assert not bad, f"non-finite values in {bad}"
        p = f["pipeline_euler"]
        npr, sig = p["noise_pred_raw"][0], p["sigmas"][()]
        u, c = npr[:2], npr[2:]
        guided = u + np.float32(GUIDANCE) * (c - u)
        x0 = p["init_latents_scaled"][()]
        ref = p["latents_after_step"][0]
        # EulerDiscreteScheduler.step's own float32 operations (gamma 0, epsilon): bit-exact
        pred_x0 = x0 - sig[0] * guided
        exact = x0 + (x0 - pred_x0) / sig[0] * (sig[1] - sig[0])
        assert np.array_equal(exact, ref)
        # the algebraically equal x + eps * (sigma_next - sigma): within float32 rounding
        e_step = np.abs(x0 + guided * (sig[1] - sig[0]) - ref).max()
        scale = np.abs(ref).max()
        assert e_step <= 1e-6 * max(1.0, scale), e_step
        assert np.allclose(p["init_latents_scaled"][()], p["init_latents"][()] * p.attrs["init_noise_sigma"],
                           rtol=1e-6, atol=1e-6)
        assert np.allclose(p["unet_input"][0], np.concatenate([x0, x0]) / np.sqrt(sig[0] ** 2 + 1), atol=1e-5)
        pe = p["prompt_embeds"][()]
        w1 = f["text_encoder/penultimate"].shape[-1]
        sel = list(PIPE_PROMPT_INDICES)
        e1 = np.abs(pe[..., :w1] - f["text_encoder/penultimate"][sel]).max()
        e2 = np.abs(pe[..., w1:] - f["text_encoder_2/penultimate"][sel]).max()
        e3 = np.abs(p["pooled_prompt_embeds"][()] - f["text_encoder_2/text_embeds"][sel]).max()
        assert e1 == 0 and e2 == 0 and e3 == 0, (e1, e2, e3)
        assert (p["prompt_input_ids"][()] == f["tokenizer/input_ids"][sel]).all()
        assert (p["prompt_input_ids_2"][()] == f["tokenizer_2/input_ids"][sel]).all()
        q = f["pipeline_euler_noneg"]
        assert not q["negative_prompt_embeds"][()].any() and not q["negative_pooled_prompt_embeds"][()].any()
        assert p["negative_prompt_embeds"][()].any()
        assert (q["add_time_ids"][()] == np.array([[1024, 768, 16, 32, 896, 640]] * 4, np.float32)).all()
        assert (p["add_time_ids"][()] == np.array([[HEIGHT, WIDTH, 0, 0, HEIGHT, WIDTH]] * 4, np.float32)).all()
        assert (p["images_uint8"][()] == uint8_image(p["images"][()])).all()
        print(f"checks ok: euler step bit-exact with step's own formula, {e_step:.2e} with x + eps*dt "
              f"(latents up to {scale:.3g}); "
              f"prompt_embeds == penultimates exactly; noneg negatives are zeros")


def table(path):
    rows = []

    def visit(name, d):
        if not isinstance(d, h5py.Dataset) or name.endswith("_f64"):
            return
        v = d[()]
        rng = ""
        if d.dtype.kind in "fiu" and v.size:
            rng = f"{v.min():.4g} .. {v.max():.4g}"
        diff = rel = ""
        twin = name + "_f64"
        if twin in d.file:
            t = d.file[twin][()]
            if d.dtype == np.uint8:
                dd = np.abs(v.astype(np.int64) - t.astype(np.int64))
                diff, rel = f"{dd.max()}", f"{int((dd > 0).sum())} differ"
            else:
                m = np.abs(v.astype(np.float64) - t).max()
                diff, rel = f"{m:.2e}", f"{m / max(np.abs(t).max(), 1e-30):.1e}"
        rows.append(f"| {name} | {tuple(d.shape)} | {d.dtype if d.dtype.kind != 'O' else 'utf-8 string'} | "
                    f"{rng} | {diff} | {rel} |")
    with h5py.File(path, "r") as f:
        f.visititems(visit)
    print("| dataset | shape | dtype | min .. max | max abs f32-f64 | rel |")
    print("|---|---|---|---|---|---|")
    print("\n".join(sorted(rows)))


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--table":
        table(sys.argv[2])
        return
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    tok_src = sys.argv[2] if len(sys.argv) == 3 else \
        os.path.join(here, "..", "..", "..", "shared", "refdata", "tiny-sdxl-a")
    torch.set_num_threads(NUM_THREADS)
    check_bmm_sizes()
    os.makedirs(out, exist_ok=True)
    factors, counts = build(out, tok_src)
    print("calibration factors", factors, "parameters", counts)
    path = golden(out, factors)
    check(path)
    print("wrote", out)


if __name__ == "__main__":
    main()
