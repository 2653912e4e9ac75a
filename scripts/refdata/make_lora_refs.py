#!/usr/bin/env python3
"""Builds tests/data/lora: small random LoRAs for the tiny SD (tests/data/tiny-sd-b)
and tiny SDXL (tests/data/tiny-sdxl-b) models, written in each key format
tpumesh reads, and what diffusers computes when it fuses them: for each case
NAME, NAME.safetensors (or NAME_1/NAME_2 for two LoRAs fused one after the
other) and NAME.h5 with the fused weights of every module the LoRA touches.

Offline tool: the build and the tests never run it. Uses the venv
/opt/venvs/torch-current (diffusers 0.42.1, transformers 5.24, torch 2.15,
safetensors) with peft from PyPI:

  /opt/venvs/torch-current/bin/pip install peft
  /opt/venvs/torch-current/bin/python scripts/refdata/make_lora_refs.py tests/data/lora

The fusion is diffusers' own: `pipe.load_lora_weights(file);
pipe.fuse_lora(lora_scale=SCALE)` (with `pipe.unload_lora_weights()` between
two LoRAs, whose fused weights stay), on the pipeline in float32 on the CPU.
Every fused weight is also recomputed here from the file in float64
(W + SCALE * alpha / rank * up @ down, the conv LoRAs as a 1x1 up over a kxk
down), and the script stops if the two differ by more than 1e-6: a LoRA of
these files that diffusers would load otherwise (a key it ignores, an alpha
it reads for another module) is caught here, not in the C++ test.

Cases (each NAME.h5: datasets COMPONENT/PARAM, the fused f32 weight, named as
in the model file (CLIP text models with their `text_model.` prefix);
string lists COMPONENT_names (the touched PARAMs) and `components`; `scales`
f32 [n], the scale of each LoRA in order):

  sd_kohya    tiny-sd-b, kohya names (lora_unet_*, lora_te_*), every Linear
              and conv of the UNet (3x3 convs with their own rank and alpha,
              LoCon style) and the text encoder's attention and MLP, rank 4,
              alpha 2 (linear) / rank 2, alpha 3 (3x3 conv); scale 0.75
  sd_peft     tiny-sd-b, diffusers/PEFT names (unet.*, text_encoder.*,
              lora_A/lora_B) with diffusers' lora_adapter_metadata (r 4,
              lora_alpha 8, a rank_pattern and alpha_pattern for the 3x3
              convs); scale 1.25
  sd_old      tiny-sd-b, the older diffusers names (unet.*.processor.to_q_lora.down,
              unet.*.lora.down, text_encoder.*.q_proj.lora_linear_layer.down), no
              alphas (alpha = rank); scale 0.625
  sd_two      sd_kohya_1 (scale 0.75) then sd_peft_2 (scale -0.5) on tiny-sd-b
  sd_kohya_sgm.safetensors  sd_kohya's tensors under the SGM UNet names (its
              up_blocks.0 upsampler as output_blocks_1_1_conv, as SD 1.x's LDM
              layout has it): no .h5, tpumesh must fuse it as sd_kohya
  sdxl_kohya  tiny-sdxl-b, kohya's SDXL names: the UNet in the SGM layout
              (lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q,
              ..._in_layers_2, label_emb_0_0, out_2), lora_te1_* and
              lora_te2_*; rank 4 alpha 1 / conv rank 3 alpha 6; scale 1.5
  sdxl_kohya_bf16.h5  sdxl_kohya.safetensors at 1.5 fused by diffusers into
              tiny-sdxl-b loaded in bfloat16 (the weights sdxl_kohya touches,
              their bf16 bits as uint16, dtype="bfloat16", gzip'ed)
  sdxl_peft   tiny-sdxl-b, unet.*, text_encoder.*, text_encoder_2.* (with
              text_projection) and metadata (r 4, lora_alpha 2); scale 0.75
"""
import json
import os
import sys
import zlib

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SD = os.path.join(REPO, "tests/data/tiny-sd-b")
SDXL = os.path.join(REPO, "tests/data/tiny-sdxl-b")
SEED = 3232
torch.set_num_threads(2)


def load_sd():
    from diffusers import AutoencoderKL, PNDMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextModel, CLIPTokenizer
    # tiny-sd-b has no tokenizer or scheduler: any will do, the fusion does not use them.
    return StableDiffusionPipeline(
        vae=AutoencoderKL.from_pretrained(SD, subfolder="vae"),
        text_encoder=CLIPTextModel.from_pretrained(SD, subfolder="text_encoder"),
        tokenizer=CLIPTokenizer.from_pretrained(SDXL, subfolder="tokenizer"),
        unet=UNet2DConditionModel.from_pretrained(SD, subfolder="unet"),
        scheduler=PNDMScheduler(), safety_checker=None, feature_extractor=None,
        requires_safety_checker=False)


def load_sdxl():
    from diffusers import StableDiffusionXLPipeline
    return StableDiffusionXLPipeline.from_pretrained(SDXL)


def targets(module, text):
    """The Linear and Conv2d modules a LoRA of the test touches, by name (text
    encoders: attention and MLP, and text_projection when there is one)."""
    out, kinds = [], set()
    for name, m in module.named_modules():
        if text:
            if name.endswith(("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2", "text_projection")):
                out.append((name, m))
        elif isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)):
            # The data stays small: the first module of each kind (to_q,
            # conv1, ...), every down- and upsampler (their SGM names depend
            # on the block) and a sixteenth of the others.
            kind = ".".join(p for p in name.split(".")[-2:] if not p.isdigit())
            if kind not in kinds or "samplers" in name or zlib.crc32(name.encode()) % 16 == 0:
                kinds.add(kind)
                out.append((name, m))
    return out


def canonical_text(name):
    # Our model file keeps transformers 4's names (text_model.encoder...);
    # transformers 5's CLIPTextModel drops text_model.
    if name.startswith(("text_model.", "text_projection")):
        return name
    return "text_model." + name


def make_pair(gen, m, rank):
    w = m.weight
    if isinstance(m, torch.nn.Conv2d):
        down = torch.randn((rank, w.shape[1]) + tuple(w.shape[2:]), generator=gen) * 0.3
        up = torch.randn((w.shape[0], rank, 1, 1), generator=gen) * 0.3
    else:
        down = torch.randn((rank, w.shape[1]), generator=gen) * 0.3
        up = torch.randn((w.shape[0], rank), generator=gen) * 0.3
    return down.float().contiguous(), up.float().contiguous()


def is_kxk(m):
    return isinstance(m, torch.nn.Conv2d) and tuple(m.weight.shape[2:]) != (1, 1)


def sgm_name(name, lpb, up_attn=None):
    """A diffusers UNet module name in the SGM (LDM) layout kohya uses for SDXL
    (up_attn: whether each up block has attentions; without, its upsampler is
    layer 1, as in SD 1.x's LDM checkpoints)."""
    p = name.split(".")
    inner = {"conv1": "in_layers.2", "conv2": "out_layers.3", "time_emb_proj": "emb_layers.1",
             "conv_shortcut": "skip_connection"}
    if name == "conv_in":
        return "input_blocks.0.0"
    if name == "conv_out":
        return "out.2"
    if name.startswith("time_embedding.linear_"):
        return "time_embed." + ("0" if name.endswith("1") else "2")
    if name.startswith("add_embedding.linear_"):
        return "label_emb.0." + ("0" if name.endswith("1") else "2")
    if p[0] == "down_blocks":
        b = int(p[1])
        if p[2] == "downsamplers":
            return f"input_blocks.{(b + 1) * (lpb + 1)}.0.op"
        i = 1 + b * (lpb + 1) + int(p[3])
        if p[2] == "resnets":
            return f"input_blocks.{i}.0." + inner[p[4]]
        return f"input_blocks.{i}.1." + ".".join(p[4:])
    if p[0] == "mid_block":
        if p[1] == "resnets":
            return f"middle_block.{0 if p[2] == '0' else 2}." + inner[p[3]]
        return "middle_block.1." + ".".join(p[3:])
    if p[0] == "up_blocks":
        b = int(p[1])
        if p[2] == "upsamplers":
            layer = 2 if up_attn is None or up_attn[b] else 1
            return f"output_blocks.{b * (lpb + 1) + lpb}.{layer}.conv"
        i = b * (lpb + 1) + int(p[3])
        if p[2] == "resnets":
            return f"output_blocks.{i}.0." + inner[p[4]]
        return f"output_blocks.{i}.1." + ".".join(p[4:])
    raise ValueError(name)


def build(pipe, case, gen):
    """The LoRA tensors of one case in its key format, its safetensors
    metadata, and what tpumesh must compute: {component: {module: (down, up,
    alpha)}}."""
    fmt = case["format"]
    comps = [("unet", pipe.unet, False), ("text_encoder", pipe.text_encoder, True)]
    if getattr(pipe, "text_encoder_2", None) is not None:
        comps.append(("text_encoder_2", pipe.text_encoder_2, True))
    tensors, expect, meta = {}, {}, {}
    lpb = pipe.unet.config.layers_per_block
    for comp, model, text in comps:
        expect[comp] = {}
        rank_pattern, alpha_pattern = {}, {}
        for name, m in targets(model, text):
            if text and name.endswith("text_projection") and fmt != "peft":
                continue  # diffusers drops a kohya text_projection LoRA when out_proj has one too
            conv = is_kxk(m)
            rank = case["conv_rank"] if conv else case["rank"]
            alpha = case["conv_alpha"] if conv else case["alpha"]
            down, up = make_pair(gen, m, rank)
            if case.get("f16"):  # stored as float16, as many published LoRAs are
                down, up = down.half().float(), up.half().float()
            cname = canonical_text(name) if text else name
            expect[comp][cname] = (down, up, alpha, rank)
            if fmt == "kohya":
                prefix = {"unet": "lora_unet_", "text_encoder": case.get("te1", "lora_te_"),
                          "text_encoder_2": "lora_te2_"}[comp]
                path = sgm_name(name, lpb) if (comp == "unet" and case.get("sgm")) else cname
                key = prefix + path.replace(".", "_")
                tensors[key + ".lora_down.weight"] = down
                tensors[key + ".lora_up.weight"] = up
                tensors[key + ".alpha"] = torch.tensor(float(alpha))
            elif fmt == "peft":
                key = f"{comp}.{cname}"
                tensors[key + ".lora_A.weight"] = down
                tensors[key + ".lora_B.weight"] = up
                short = name.removeprefix("text_model.")
                if conv:
                    rank_pattern[short] = rank
                    alpha_pattern[short] = alpha
            elif fmt == "old":
                if comp == "unet":
                    last = name.split(".")[-1]
                    if last in ("to_q", "to_k", "to_v"):
                        key = f"unet.{name[:-len(last) - 1]}.processor.{last}_lora"
                    elif name.endswith("to_out.0"):
                        key = f"unet.{name[:-len('to_out.0') - 1]}.processor.to_out_lora"
                    else:
                        key = f"unet.{name}.lora"
                    tensors[key + ".down.weight"] = down
                    tensors[key + ".up.weight"] = up
                else:
                    key = f"{comp}.{cname}.lora_linear_layer"
                    tensors[key + ".down.weight"] = down
                    tensors[key + ".up.weight"] = up
        if fmt == "peft":
            meta[f"{comp}.r"] = case["rank"]
            meta[f"{comp}.lora_alpha"] = case["alpha"]
            meta[f"{comp}.rank_pattern"] = rank_pattern
            meta[f"{comp}.alpha_pattern"] = alpha_pattern
            meta[f"{comp}.target_modules"] = sorted({n.removeprefix("text_model.") for n in
                                                     (k for k in (x for x, _ in targets(model, text)))})
    if case.get("f16"):
        tensors = {k: v.half() for k, v in tensors.items()}
    metadata = {"format": "pt"}
    if meta:
        metadata["lora_adapter_metadata"] = json.dumps(meta, indent=2, sort_keys=True)
    return tensors, metadata, expect


def state(pipe):
    out = {}
    for comp in ("unet", "text_encoder", "text_encoder_2"):
        model = getattr(pipe, comp, None)
        if model is None:
            continue
        sd = {}
        for name, p in model.state_dict().items():
            name = name.replace(".base_layer.", ".")
            if ".lora_" in name:
                continue
            if comp != "unet":
                name = canonical_text(name)
            sd[name] = p.detach().clone()
        out[comp] = sd
    return out


def expected(before, expects, scales):
    """float64: W + scale * alpha / rank * up @ down, one LoRA after the other."""
    after = {c: {k: v.double() for k, v in sd.items()} for c, sd in before.items()}
    for expect, scale in zip(expects, scales):
        for comp, mods in expect.items():
            for name, (down, up, alpha, rank) in mods.items():
                d, u = down.double(), up.double()
                if d.dim() == 4:
                    delta = torch.einsum("or,rikl->oikl", u[:, :, 0, 0], d)
                else:
                    delta = u @ d
                after[comp][name + ".weight"] += scale * alpha / rank * delta
    return after


CASES = {
    "sd_kohya": [dict(format="kohya", rank=4, alpha=2.0, conv_rank=2, conv_alpha=3.0, scale=0.75)],
    "sd_peft": [dict(format="peft", rank=4, alpha=8, conv_rank=2, conv_alpha=1, scale=1.25)],
    "sd_old": [dict(format="old", rank=3, alpha=3, conv_rank=3, conv_alpha=3, scale=0.625)],
    "sd_two": [dict(format="kohya", rank=4, alpha=2.0, conv_rank=2, conv_alpha=3.0, scale=0.75),
               dict(format="peft", rank=2, alpha=4, conv_rank=3, conv_alpha=3, scale=-0.5)],
    "sdxl_kohya": [dict(format="kohya", rank=4, alpha=1.0, conv_rank=3, conv_alpha=6.0, scale=1.5,
                        sgm=True, te1="lora_te1_", f16=True)],
    "sdxl_peft": [dict(format="peft", rank=4, alpha=2, conv_rank=4, conv_alpha=2, scale=0.75)],
}


def run_case(out_dir, name, specs):
    gen = torch.Generator().manual_seed(SEED + sum(map(ord, name)))
    pipe = load_sdxl() if name.startswith("sdxl") else load_sd()
    before = state(pipe)
    files, expects, scales = [], [], []
    for i, case in enumerate(specs):
        tensors, metadata, expect = build(pipe, case, gen)
        fname = f"{name}.safetensors" if len(specs) == 1 else f"{name}_{i + 1}.safetensors"
        path = os.path.join(out_dir, fname)
        save_file(tensors, path, metadata=metadata)
        files.append(path)
        expects.append(expect)
        scales.append(case["scale"])
    for path, scale in zip(files, scales):
        pipe.load_lora_weights(path)
        pipe.fuse_lora(lora_scale=scale)
        pipe.unload_lora_weights()
    after = state(pipe)
    want = expected(before, expects, scales)
    touched = {}
    for expect in expects:
        for comp, mods in expect.items():
            touched.setdefault(comp, set()).update(k + ".weight" for k in mods)
    worst = 0.0
    for comp, sd in after.items():
        for k, v in sd.items():
            diff = (v.double() - want[comp][k]).abs().max().item() if v.is_floating_point() else 0.0
            worst = max(worst, diff)
            if diff > 1e-6:
                sys.exit(f"{name}: diffusers' {comp}/{k} differs from W + s*a/r*BA by {diff:g}")
            changed = not torch.equal(v, before[comp][k])
            if changed != (k in touched.get(comp, ())):
                sys.exit(f"{name}: {comp}/{k} changed={changed} but touched={k in touched.get(comp, ())}")
    with h5py.File(os.path.join(out_dir, name + ".h5"), "w") as h:
        comps = sorted(c for c in touched if touched[c])
        h.create_dataset("components", data=np.array(comps, dtype=h5py.string_dtype()))
        h.create_dataset("scales", data=np.array(scales, dtype=np.float32))
        for comp in comps:
            names = sorted(touched[comp])
            h.create_dataset(f"{comp}_names", data=np.array(names, dtype=h5py.string_dtype()))
            for k in names:
                h.create_dataset(f"{comp}/{k}", data=after[comp][k].numpy().astype(np.float32))
        h.attrs["made_by"] = "scripts/refdata/make_lora_refs.py"
        h.attrs["files"] = json.dumps([os.path.basename(f) for f in files])
        import diffusers, peft, transformers
        h.attrs["versions"] = json.dumps({"diffusers": diffusers.__version__, "peft": peft.__version__,
                                          "transformers": transformers.__version__,
                                          "torch": torch.__version__})
    print(f"{name}: {sum(len(v) for v in touched.values())} weights, diffusers vs float64 {worst:.2e}")


def sgm_copy(out_dir, src, dst, unet):
    """src's tensors under SGM UNet names (kohya's layout for SDXL, here for
    the SD model): tpumesh must fuse them as src's. diffusers maps SGM names
    only in its SDXL pipeline, so the reference is src's."""
    from safetensors.torch import load_file
    lpb = unet.config.layers_per_block
    up_attn = ["CrossAttn" in t for t in unet.config.up_block_types]
    names = {n.replace(".", "_"): sgm_name(n, lpb, up_attn).replace(".", "_")
             for n, m in unet.named_modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))}
    out = {}
    for k, v in load_file(os.path.join(out_dir, src)).items():
        if k.startswith("lora_unet_"):
            module, rest = k[len("lora_unet_"):].split(".", 1)
            k = "lora_unet_" + names[module] + "." + rest
        out[k] = v
    save_file(out, os.path.join(out_dir, dst), metadata={"format": "pt"})
    print(f"{dst}: {src} under SGM UNet names")


def bf16_case(out_dir):
    """sdxl_kohya_bf16.h5: sdxl_kohya.safetensors (scale 1.5) fused by diffusers
    into the tiny SDXL loaded in bfloat16 (peft fuses a bf16 layer in f32 and
    rounds), the touched weights (those of sdxl_kohya.h5) as their bf16 bits
    (uint16 with the attribute dtype="bfloat16", as tpumesh model files store
    bf16), gzip'ed."""
    from diffusers import StableDiffusionXLPipeline
    pipe = StableDiffusionXLPipeline.from_pretrained(SDXL, torch_dtype=torch.bfloat16)
    pipe.load_lora_weights(os.path.join(out_dir, "sdxl_kohya.safetensors"))
    pipe.fuse_lora(lora_scale=1.5)
    pipe.unload_lora_weights()
    after = state(pipe)
    with h5py.File(os.path.join(out_dir, "sdxl_kohya.h5"), "r") as ref, \
            h5py.File(os.path.join(out_dir, "sdxl_kohya_bf16.h5"), "w") as h:
        comps = [c.decode() if isinstance(c, bytes) else c for c in ref["components"][()]]
        h.create_dataset("components", data=np.array(comps, dtype=h5py.string_dtype()))
        h.create_dataset("scales", data=np.array([1.5], dtype=np.float32))
        n = 0
        for comp in comps:
            names = [x.decode() if isinstance(x, bytes) else x for x in ref[f"{comp}_names"][()]]
            h.create_dataset(f"{comp}_names", data=np.array(names, dtype=h5py.string_dtype()))
            for k in names:
                bits = after[comp][k].contiguous().view(torch.int16).numpy().view(np.uint16)
                h.create_dataset(f"{comp}/{k}", data=bits, compression="gzip")
                h[f"{comp}/{k}"].attrs["dtype"] = "bfloat16"
                n += 1
        h.attrs["made_by"] = "scripts/refdata/make_lora_refs.py"
    print(f"sdxl_kohya_bf16: {n} weights fused in bfloat16")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "tests/data/lora")
    os.makedirs(out_dir, exist_ok=True)
    only = sys.argv[2:]
    for name, specs in CASES.items():
        if not only or name in only:
            run_case(out_dir, name, specs)
    if not only or "sd_kohya" in only:
        sgm_copy(out_dir, "sd_kohya.safetensors", "sd_kohya_sgm.safetensors", load_sd().unet)
    if not only or "sdxl_kohya" in only or "sdxl_kohya_bf16" in only:
        bf16_case(out_dir)


if __name__ == "__main__":
    main()
