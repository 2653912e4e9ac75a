#!/usr/bin/env python3
"""Builds tests/data/single-file: tiny single-file checkpoints in the original
(LDM / CompVis / SGM) key layout for SD 1.x, SD 2.x and SDXL, and what
diffusers' from_single_file makes of each, saved as a diffusers folder.

For each of sd1, sd2 and sdxl:
  <name>.safetensors  the single file, written here by an inverse of diffusers'
                      mapping (diffusers/loaders/single_file_utils.py): the
                      UNet under model.diffusion_model., the VAE under
                      first_stage_model., the text encoder(s) under
                      cond_stage_model.transformer. (CLIP, SD 1.x),
                      cond_stage_model.model. (OpenCLIP with fused in_proj,
                      SD 2.x) or conditioner.embedders.{0,1}. (SDXL), plus the
                      extra entries real checkpoints carry (the noise schedule
                      buffers, an int64 position_ids, logit_scale, an unused
                      last OpenCLIP layer, EMA copies of two UNet weights).
  <name>/             diffusers' <Pipeline>.from_single_file(<name>.safetensors,
                      config=<the tiny diffusers folder>, torch_dtype=<the
                      file's dtype>) saved with save_pretrained: the expected
                      side. It holds the tiny folder's configs, tokenizer(s)
                      and scheduler too, so it is also the --config folder of
                      `tpumesh convert <name>.safetensors --config <name>`.

The tiny models:
  sd1   tests/data/tiny-sd-b's text encoder (CLIP, 3 layers) and VAE; its UNet
        with conv (not linear) proj_in/proj_out as SD 1.x has (the same values
        reshaped to 1x1 convs, use_linear_projection false); the tiny CLIP-BPE
        tokenizer and a PNDM scheduler. Stored as F16.
  sd2   new, seeded: an OpenCLIP-shaped text encoder (gelu, hidden 24, 4 heads,
        3 layers used; the file holds 4 resblocks, a text_projection and
        logit_scale as an OpenCLIP ViT-H checkpoint holds 24 resblocks of
        which SD 2.x uses 23), a UNet laid out as SD 2.x's (linear
        projections, per-block head counts, upcast attention, layers_per_block
        2, CrossAttn/CrossAttn/Down), tiny-sd-b's VAE, the tiny tokenizer padded
        with "!" as SD 2.x's, and a DDIM v-prediction scheduler. Stored as F16.
  sdxl  tests/data/tiny-sdxl-b as it is (two text encoders, text_projection).
        Stored as BF16.

The script checks that every parameter diffusers loaded equals the tiny
folder's (cast to the file's dtype): the inverse mapping is then exact.

Offline tool: the build and the tests never run it. Run from the repository
root with the venv that has diffusers 0.42.1, transformers 5.24 and torch:

  HF_HUB_OFFLINE=1 /opt/venvs/torch-current/bin/python \\
      scripts/refdata/make_single_file_refs.py [OUT_DIR]

OUT_DIR defaults to tests/data/single-file (replaced whole). It also writes
OUT_DIR/layouts.json: the name, dtype and shape of every entry of a full-size
SD 1.5, SD 2.1 and SDXL base single file (the built-in architectures' configs,
read from models/architectures.cc, on torch's meta device, through the same
inverse mapping, with the extras real files carry): single_file_test.cc makes
sparse files of these headers to check the built-in path at real sizes.

  .../python scripts/refdata/make_single_file_refs.py --from-model MODEL.h5 ARCH OUT.safetensors

writes a full-size single file (F16) from a tpumesh model file of a built-in
architecture (`tpumesh init --arch sd15 -o MODEL.h5`), for measuring convert.
"""
import re
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import diffusers  # noqa: E402
import transformers  # noqa: E402
from diffusers import (AutoencoderKL, DDIMScheduler, PNDMScheduler,  # noqa: E402
                       StableDiffusionPipeline, StableDiffusionXLPipeline,
                       UNet2DConditionModel)
from transformers import CLIPTextConfig, CLIPTextModel  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SD_B = os.path.join(REPO, "tests/data/tiny-sd-b")
SDXL_B = os.path.join(REPO, "tests/data/tiny-sdxl-b")
SEED = 3232

# ---------------------------------------------------------------------------
# diffusers name -> LDM name (the inverse of single_file_utils' mapping).

RESNET = [("norm1", "in_layers.0"), ("conv1", "in_layers.2"), ("norm2", "out_layers.0"),
          ("conv2", "out_layers.3"), ("time_emb_proj", "emb_layers.1"), ("conv_shortcut", "skip_connection")]


def unet_to_ldm(sd, cfg):
    L = cfg["layers_per_block"]
    has_attn_up = ["CrossAttn" in t for t in cfg["up_block_types"]]
    fixed = {"time_embedding.linear_1": "time_embed.0", "time_embedding.linear_2": "time_embed.2",
             "conv_in": "input_blocks.0.0", "conv_norm_out": "out.0", "conv_out": "out.2",
             "add_embedding.linear_1": "label_emb.0.0", "add_embedding.linear_2": "label_emb.0.2"}
    out = {}
    for k, v in sd.items():
        p = k.split(".")
        new = None
        for d, l in fixed.items():
            if k.startswith(d + "."):
                new = l + k[len(d):]
        if new is None and p[0] == "down_blocks":
            b = int(p[1])
            if p[2] == "resnets":
                i, rest = 1 + b * (L + 1) + int(p[3]), ".".join(p[4:])
                for d, l in RESNET:
                    rest = rest.replace(d, l)
                new = f"input_blocks.{i}.0.{rest}"
            elif p[2] == "attentions":
                new = f"input_blocks.{1 + b * (L + 1) + int(p[3])}.1." + ".".join(p[4:])
            elif p[2] == "downsamplers":
                new = f"input_blocks.{1 + b * (L + 1) + L}.0.op." + ".".join(p[5:])
        elif new is None and p[0] == "mid_block":
            j = {"resnets.0": 0, "attentions.0": 1, "resnets.1": 2}[p[1] + "." + p[2]]
            rest = ".".join(p[3:])
            if p[1] == "resnets":
                for d, l in RESNET:
                    rest = rest.replace(d, l)
            new = f"middle_block.{j}.{rest}"
        elif new is None and p[0] == "up_blocks":
            b = int(p[1])
            if p[2] == "resnets":
                i, rest = b * (L + 1) + int(p[3]), ".".join(p[4:])
                for d, l in RESNET:
                    rest = rest.replace(d, l)
                new = f"output_blocks.{i}.0.{rest}"
            elif p[2] == "attentions":
                new = f"output_blocks.{b * (L + 1) + int(p[3])}.1." + ".".join(p[4:])
            elif p[2] == "upsamplers":
                j = 2 if has_attn_up[b] else 1
                new = f"output_blocks.{b * (L + 1) + L}.{j}.conv." + ".".join(p[5:])
        if new is None:
            raise SystemExit(f"unet: no LDM name for {k}")
        out["model.diffusion_model." + new] = v
    return out


def vae_to_ldm(sd, cfg):
    n = len(cfg["up_block_types"])
    attn = {"group_norm": "norm", "to_q": "q", "to_k": "k", "to_v": "v", "to_out.0": "proj_out"}
    out = {}
    for k, v in sd.items():
        p = k.split(".")
        new = k
        if p[1] == "down_blocks":
            if p[3] == "resnets":
                new = f"{p[0]}.down.{p[2]}.block.{p[4]}." + ".".join(p[5:]).replace("conv_shortcut", "nin_shortcut")
            else:
                new = f"{p[0]}.down.{p[2]}.downsample.conv." + ".".join(p[6:])
        elif p[1] == "up_blocks":
            b = n - 1 - int(p[2])
            if p[3] == "resnets":
                new = f"{p[0]}.up.{b}.block.{p[4]}." + ".".join(p[5:]).replace("conv_shortcut", "nin_shortcut")
            else:
                new = f"{p[0]}.up.{b}.upsample.conv." + ".".join(p[6:])
        elif p[1] == "mid_block" and p[2] == "resnets":
            new = f"{p[0]}.mid.block_{int(p[3]) + 1}." + ".".join(p[4:]).replace("conv_shortcut", "nin_shortcut")
        elif p[1] == "mid_block" and p[2] == "attentions":
            rest = ".".join(p[4:])
            for d, l in attn.items():
                if rest.startswith(d + "."):
                    rest = l + rest[len(d):]
            new = f"{p[0]}.mid.attn_1.{rest}"
            if v.ndim == 2:  # LDM's attention projections are 1x1 convs
                v = v[:, :, None, None]
        elif p[1] == "conv_norm_out":
            new = f"{p[0]}.norm_out." + ".".join(p[2:])
        out["first_stage_model." + new] = v
    return out


def clip_to_ldm(sd, prefix):
    return {prefix + (k if k.startswith("text_model.") else "text_model." + k): v for k, v in sd.items()}


def open_clip_to_ldm(sd, prefix, layers_in_file, hidden, proj_dim, gen):
    """OpenCLIP layout; extra resblocks (beyond the config's) are random."""
    out = {}
    sd = {k.removeprefix("text_model."): v for k, v in sd.items()}
    out[prefix + "token_embedding.weight"] = sd["embeddings.token_embedding.weight"]
    out[prefix + "positional_embedding"] = sd["embeddings.position_embedding.weight"]
    out[prefix + "ln_final.weight"] = sd["final_layer_norm.weight"]
    out[prefix + "ln_final.bias"] = sd["final_layer_norm.bias"]
    if "text_projection.weight" in sd:
        out[prefix + "text_projection"] = sd["text_projection.weight"].T.contiguous()
    else:  # SD 2.x's checkpoint has one; diffusers ignores it
        out[prefix + "text_projection"] = torch.randn(hidden, proj_dim, generator=gen)
    out[prefix + "logit_scale"] = torch.tensor(4.6052)
    dtype = out[prefix + "ln_final.weight"].dtype
    for layer in range(layers_in_file):
        s, t = f"encoder.layers.{layer}.", f"{prefix}transformer.resblocks.{layer}."
        if s + "layer_norm1.weight" not in sd:  # the unused last layer
            for name, shape in [("ln_1.weight", (hidden,)), ("ln_1.bias", (hidden,)),
                                ("attn.in_proj_weight", (3 * hidden, hidden)), ("attn.in_proj_bias", (3 * hidden,)),
                                ("attn.out_proj.weight", (hidden, hidden)), ("attn.out_proj.bias", (hidden,)),
                                ("ln_2.weight", (hidden,)), ("ln_2.bias", (hidden,)),
                                ("mlp.c_fc.weight", (4 * hidden, hidden)), ("mlp.c_fc.bias", (4 * hidden,)),
                                ("mlp.c_proj.weight", (hidden, 4 * hidden)), ("mlp.c_proj.bias", (hidden,))]:
                out[t + name] = torch.randn(*shape, generator=gen).to(dtype)
            continue
        for d, l in [("layer_norm1", "ln_1"), ("layer_norm2", "ln_2"), ("self_attn.out_proj", "attn.out_proj"),
                     ("mlp.fc1", "mlp.c_fc"), ("mlp.fc2", "mlp.c_proj")]:
            for w in ("weight", "bias"):
                out[t + l + "." + w] = sd[s + d + "." + w]
        for w in ("weight", "bias"):
            out[t + "attn.in_proj_" + w] = torch.cat([sd[s + f"self_attn.{q}_proj.{w}"] for q in "qkv"], 0)
    return out


# ---------------------------------------------------------------------------
# The tiny diffusers folders (config= for from_single_file).

def reinit(module, gen):
    """conv/linear N(0, 1/fan_in), norms 1 + N(0, 0.1^2), biases N(0, 0.1^2)."""
    with torch.no_grad():
        for name, p in sorted(module.named_parameters()):
            if p.ndim >= 2:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in ** 0.5)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def copy_tokenizer(src, dst):
    shutil.copytree(src, dst)


def model_index(cls, text2=False):
    m = {"_class_name": cls, "_diffusers_version": diffusers.__version__,
         "feature_extractor": [None, None], "image_encoder": [None, None],
         "requires_safety_checker": False, "safety_checker": [None, None],
         "scheduler": ["diffusers", "PNDMScheduler"], "text_encoder": ["transformers", "CLIPTextModel"],
         "tokenizer": ["transformers", "CLIPTokenizer"], "unet": ["diffusers", "UNet2DConditionModel"],
         "vae": ["diffusers", "AutoencoderKL"]}
    return m


def make_sd1(root):
    os.makedirs(root)
    shutil.copytree(os.path.join(SD_B, "text_encoder"), os.path.join(root, "text_encoder"))
    shutil.copytree(os.path.join(SD_B, "vae"), os.path.join(root, "vae"))
    copy_tokenizer(os.path.join(SDXL_B, "tokenizer"), os.path.join(root, "tokenizer"))
    # The UNet with conv proj_in/proj_out (SD 1.x): same values as 1x1 convs.
    cfg = json.load(open(os.path.join(SD_B, "unet/config.json")))
    cfg["use_linear_projection"] = False
    sd = load_file(os.path.join(SD_B, "unet/diffusion_pytorch_model.safetensors"))
    for k in list(sd):
        if (".proj_in." in k or ".proj_out." in k) and k.endswith("weight"):
            sd[k] = sd[k][:, :, None, None].contiguous()
    unet = UNet2DConditionModel.from_config({k: v for k, v in cfg.items() if not k.startswith("_")})
    unet.load_state_dict(sd, strict=True)
    unet.save_pretrained(os.path.join(root, "unet"))
    PNDMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", skip_prk_steps=True,
                  steps_offset=1, set_alpha_to_one=False).save_pretrained(
        os.path.join(root, "scheduler"))
    idx = model_index("StableDiffusionPipeline")
    json.dump(idx, open(os.path.join(root, "model_index.json"), "w"), indent=2)


def make_sd2(root, gen):
    os.makedirs(root)
    te = CLIPTextModel(CLIPTextConfig(hidden_size=24, intermediate_size=96, num_hidden_layers=3,
                                      num_attention_heads=4, hidden_act="gelu", vocab_size=1000,
                                      max_position_embeddings=77, projection_dim=24, layer_norm_eps=1e-5,
                                      bos_token_id=0, eos_token_id=2, pad_token_id=1))
    reinit(te, gen)
    te.save_pretrained(os.path.join(root, "text_encoder"))
    unet = UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=2, block_out_channels=(8, 16, 24),
        down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
        attention_head_dim=(1, 2, 3), cross_attention_dim=24, norm_num_groups=4,
        use_linear_projection=True, upcast_attention=True)
    reinit(unet, gen)
    unet.save_pretrained(os.path.join(root, "unet"))
    shutil.copytree(os.path.join(SD_B, "vae"), os.path.join(root, "vae"))
    copy_tokenizer(os.path.join(SDXL_B, "tokenizer_2"), os.path.join(root, "tokenizer"))
    DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                  set_alpha_to_one=False, steps_offset=1, prediction_type="v_prediction").save_pretrained(
        os.path.join(root, "scheduler"))
    idx = model_index("StableDiffusionPipeline")
    idx["scheduler"] = ["diffusers", "DDIMScheduler"]
    json.dump(idx, open(os.path.join(root, "model_index.json"), "w"), indent=2)


def folder_state(root, comp):
    for f in ("model.safetensors", "diffusion_pytorch_model.safetensors"):
        p = os.path.join(root, comp, f)
        if os.path.exists(p):
            return load_file(p), json.load(open(os.path.join(root, comp, "config.json")))
    raise SystemExit(f"{root}/{comp}: no weights")


def ldm_file(root, kind, gen):
    out = {}
    unet, ucfg = folder_state(root, "unet")
    vae, vcfg = folder_state(root, "vae")
    te, tcfg = folder_state(root, "text_encoder")
    out.update(unet_to_ldm(unet, ucfg))
    out.update(vae_to_ldm(vae, vcfg))
    if kind == "sd1":
        out.update(clip_to_ldm(te, "cond_stage_model.transformer."))
        out["cond_stage_model.transformer.text_model.embeddings.position_ids"] = torch.arange(77)[None]
    elif kind == "sd2":
        out.update(open_clip_to_ldm(te, "cond_stage_model.model.", tcfg["num_hidden_layers"] + 1,
                                    tcfg["hidden_size"], tcfg["hidden_size"], gen))
    else:
        out.update(clip_to_ldm(te, "conditioner.embedders.0.transformer."))
        te2, t2cfg = folder_state(root, "text_encoder_2")
        out.update(open_clip_to_ldm(te2, "conditioner.embedders.1.model.", t2cfg["num_hidden_layers"],
                                    t2cfg["hidden_size"], t2cfg["projection_dim"], gen))
    # What real checkpoints carry beside the models (diffusers ignores them).
    betas = torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000, dtype=torch.float64) ** 2
    out["betas"] = betas.float()
    out["alphas_cumprod"] = torch.cumprod(1 - betas, 0).float()
    for k in ("model.diffusion_model.out.2.weight", "model.diffusion_model.out.2.bias"):
        out["model_ema." + k.replace("model.diffusion_model.", "diffusion_model").replace(".", "")] = out[k] + 1
    return out


def builtin_configs():
    """The built-in architectures' config texts (models/architectures.cc)."""
    src = open(os.path.join(REPO, "models/architectures.cc")).read()
    texts = {m.group(1): json.loads(m.group(2))
             for m in re.finditer(r'constexpr char (k\w+)\[\] = R"\((.*?)\)";', src, re.S)}
    return {"sd15": {"text_encoder": texts["kClipL"], "unet": texts["kUNetSd15"], "vae": texts["kVaeSd"]},
            "sd21": {"text_encoder": texts["kClipH"], "unet": texts["kUNetSd21"], "vae": texts["kVaeSd21"]},
            "sdxl": {"text_encoder": texts["kClipL"], "text_encoder_2": texts["kClipBigG"],
                     "unet": texts["kUNetSdxl"], "vae": texts["kVaeSdxl"]}}


def ldm_state(arch, cfgs, states, gen):
    """The single file's tensors from each component's diffusers state dict."""
    kind = {"sd15": "sd1", "sd21": "sd2", "sdxl": "sdxl"}[arch]
    out = {}
    out.update(unet_to_ldm(states["unet"], cfgs["unet"]))
    out.update(vae_to_ldm(states["vae"], cfgs["vae"]))
    te, tcfg = states["text_encoder"], cfgs["text_encoder"]
    if kind == "sd1":
        out.update(clip_to_ldm(te, "cond_stage_model.transformer."))
        out["cond_stage_model.transformer.text_model.embeddings.position_ids"] = torch.arange(77)[None]
    elif kind == "sd2":
        # OpenCLIP ViT-H: 24 resblocks, SD 2.x uses 23 (the config's).
        out.update(open_clip_to_ldm(te, "cond_stage_model.model.", tcfg["num_hidden_layers"] + 1,
                                    tcfg["hidden_size"], tcfg["hidden_size"], gen))
    else:
        out.update(clip_to_ldm(te, "conditioner.embedders.0.transformer."))
        t2cfg = cfgs["text_encoder_2"]
        out.update(open_clip_to_ldm(states["text_encoder_2"], "conditioner.embedders.1.model.",
                                    t2cfg["num_hidden_layers"], t2cfg["hidden_size"], t2cfg["projection_dim"], gen))
    return out


def full_size_layouts():
    """{arch: [[name, dtype, shape], ...]} of full-size single files."""
    from transformers import CLIPTextModelWithProjection
    layouts = {}
    gen = torch.Generator().manual_seed(SEED)
    for arch, cfgs in builtin_configs().items():
        states = {}
        with torch.device("meta"):
            states["unet"] = UNet2DConditionModel.from_config(cfgs["unet"]).state_dict()
            states["vae"] = AutoencoderKL.from_config(cfgs["vae"]).state_dict()
            for comp in ("text_encoder", "text_encoder_2"):
                if comp in cfgs:
                    c = CLIPTextConfig(**cfgs[comp])
                    cls = CLIPTextModelWithProjection if comp == "text_encoder_2" else CLIPTextModel
                    states[comp] = cls(c).state_dict()
        sd = ldm_state(arch, cfgs, states, gen)
        sd["betas"] = torch.zeros(1000)
        sd["alphas_cumprod"] = torch.zeros(1000)
        layouts[arch] = [[k, "I64" if not v.is_floating_point() else "F16", list(v.shape)]
                         for k, v in sorted(sd.items())]
    return layouts


def from_model(model_h5, arch, out_path):
    """A full-size F16 single file from a tpumesh model file (h5py)."""
    import h5py
    import numpy as np
    cfgs = builtin_configs()[arch]
    states = {}
    with h5py.File(model_h5, "r") as f:
        for comp in cfgs:
            sd = {}
            def visit(name, obj, comp=comp, sd=sd):
                if isinstance(obj, h5py.Dataset) and obj.dtype != object and obj.dtype.kind != "S":
                    a = obj[()]
                    t = (torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
                         if obj.attrs.get("dtype") in (b"bfloat16", "bfloat16") else torch.from_numpy(a))
                    sd[name] = t.to(torch.float16)
            f[comp].visititems(visit)
            states[comp] = sd
    sd = ldm_state(arch, cfgs, states, torch.Generator().manual_seed(SEED))
    sd = {k: (v.to(torch.float16) if v.is_floating_point() else v).contiguous() for k, v in sorted(sd.items())}
    save_file(sd, out_path, metadata={"format": "pt"})
    print(f"{out_path}: {len(sd)} tensors")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--from-model":
        return from_model(sys.argv[2], sys.argv[3], sys.argv[4])
    out_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "tests/data/single-file"))
    gen = torch.Generator().manual_seed(SEED)
    tmp = tempfile.mkdtemp(prefix="single-file-refs.")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    make_sd1(os.path.join(tmp, "sd1"))
    make_sd2(os.path.join(tmp, "sd2"), gen)
    shutil.copytree(SDXL_B, os.path.join(tmp, "sdxl"),
                    ignore=shutil.ignore_patterns("golden.h5", "README.md"))
    runs = [("sd1", StableDiffusionPipeline, torch.float16),
            ("sd2", StableDiffusionPipeline, torch.float16),
            ("sdxl", StableDiffusionXLPipeline, torch.bfloat16)]
    for kind, cls, dtype in runs:
        root = os.path.join(tmp, kind)
        sd = ldm_file(root, kind, gen)
        sd = {k: (v.to(dtype) if v.is_floating_point() else v).contiguous() for k, v in sd.items()}
        sd = dict(sorted(sd.items()))
        path = os.path.join(out_dir, kind + ".safetensors")
        save_file(sd, path, metadata={"format": "pt"})
        pipe = cls.from_single_file(path, config=root, torch_dtype=dtype, local_files_only=True)
        # The inverse mapping is exact: diffusers loaded every parameter of the
        # tiny folder, bit for bit (after the cast to the file's dtype).
        comps = ["unet", "vae", "text_encoder"] + (["text_encoder_2"] if kind == "sdxl" else [])
        for comp in comps:
            want, _ = folder_state(root, comp)
            want = {k.removeprefix("text_model."): v for k, v in want.items()}
            got = {k.removeprefix("text_model."): v for k, v in getattr(pipe, comp).state_dict().items()}
            got = {k: v for k, v in got.items() if k != "embeddings.position_ids"}
            want = {k: v for k, v in want.items() if k != "embeddings.position_ids"}
            if set(got) != set(want):
                raise SystemExit(f"{kind}/{comp}: names differ: {sorted(set(got) ^ set(want))[:5]}")
            for k in want:
                if not torch.equal(got[k], want[k].to(dtype)):
                    raise SystemExit(f"{kind}/{comp}: {k} differs")
        print(f"{kind}: prediction_type={pipe.scheduler.config.prediction_type}, "
              f"{len(sd)} entries in the single file, every parameter equal")
        saved = os.path.join(out_dir, kind)
        pipe.save_pretrained(saved, safe_serialization=True)
    shutil.rmtree(tmp)
    with open(os.path.join(out_dir, "layouts.json"), "w") as f:
        json.dump(full_size_layouts(), f, separators=(",", ":"))
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(README.format(diffusers=diffusers.__version__, transformers=transformers.__version__,
                              torch=torch.__version__))


README = """# single-file: tiny single-file checkpoints and what diffusers makes of them

Made by scripts/refdata/make_single_file_refs.py (its docstring says how) with diffusers {diffusers},
transformers {transformers} and torch {torch}.

- `sd1.safetensors` (F16), `sd2.safetensors` (F16), `sdxl.safetensors` (BF16): single files in the
  original LDM / SGM key layout (model.diffusion_model., first_stage_model., cond_stage_model.transformer.
  / cond_stage_model.model. / conditioner.embedders.0.transformer. and .1.model.), with the entries
  real checkpoints carry beside the models (betas, alphas_cumprod, model_ema.*, position_ids,
  logit_scale, text_projection; sd2's OpenCLIP holds one more resblock than its text encoder uses).
- `sd1/`, `sd2/`, `sdxl/`: `<Pipeline>.from_single_file(<name>.safetensors, config=<tiny folder>,
  torch_dtype=<the file's dtype>)` saved with `save_pretrained`: the expected side of
  tests/pipeline/single_file_test.cc, and the `--config` folder of `tpumesh convert <name>.safetensors`.
  As transformers 5 saves them: the text encoder's parameters without the `text_model.` prefix (a
  CLIPTextModel since transformers 5.6), the tokenizers as tokenizer.json + tokenizer_config.json.

- `layouts.json`: {{arch: [[name, dtype, shape], ...]}} of full-size SD 1.5, SD 2.1 and SDXL base single
  files (the built-in architectures' configs through the same inverse mapping, on torch's meta device; no
  values): the test writes sparse files with these headers to check the built-in path at real sizes.

sd1 is tests/data/tiny-sd-b with SD 1.x's conv proj_in/proj_out; sd2 is a new seeded model with an
OpenCLIP-shaped text encoder (gelu, fused in_proj in the file), SD 2.x's UNet layout and a DDIM
v-prediction scheduler; sdxl is tests/data/tiny-sdxl-b.
"""

if __name__ == "__main__":
    main()
