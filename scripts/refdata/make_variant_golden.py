#!/usr/bin/env python3
"""Builds tests/data/tiny-sd-b: a second tiny Stable Diffusion variant with
other sizes than ../shared/refdata/tiny-sd-a (three UNet levels, SD 2.x-style
per-block head counts with use_linear_projection, one layer per block, a
three-level VAE with two resnets per block, a GELU CLIP text encoder), and
golden.h5 with what diffusers 0.30.0 / transformers 4.44.2 compute from it.

Offline tool: the build and the tests never run it. Dataset names follow
tiny-sd-a's golden.h5 (text_encoder/..., unet/{t981,t1,tpair}/...,
vae_decode/..., vae_encode/...).

  /usr/bin/python3 scripts/refdata/make_variant_golden.py tests/data/tiny-sd-b
"""
import json
import os
import sys

import h5py
import numpy as np
import torch
from diffusers import AutoencoderKL, UNet2DConditionModel
from transformers import CLIPTextConfig, CLIPTextModel

out = sys.argv[1]
torch.manual_seed(0)
torch.set_num_threads(1)

unet = UNet2DConditionModel(
    sample_size=16, in_channels=4, out_channels=4,
    down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
    block_out_channels=(16, 24, 32), layers_per_block=1, attention_head_dim=(2, 3, 4),
    use_linear_projection=True, cross_attention_dim=16, norm_num_groups=8)
vae = AutoencoderKL(
    in_channels=3, out_channels=3, latent_channels=4,
    down_block_types=("DownEncoderBlock2D",) * 3, up_block_types=("UpDecoderBlock2D",) * 3,
    block_out_channels=(8, 16, 16), layers_per_block=2, norm_num_groups=4, sample_size=64,
    scaling_factor=0.13025)
text = CLIPTextModel(CLIPTextConfig(
    vocab_size=1000, hidden_size=16, intermediate_size=40, num_attention_heads=2, num_hidden_layers=3,
    hidden_act="gelu", max_position_embeddings=77, bos_token_id=0, eos_token_id=2, pad_token_id=1))


def reinit(model):
    # As tiny-sd-a: every layer matters (conv/linear N(0, 1/fan_in), norms
    # 1 + N(0, 0.1^2), biases N(0, 0.1^2), embeddings N(0, 1)).
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() >= 2 and "embedding" not in name:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


for m in (unet, vae, text):
    reinit(m)
    m.eval()
unet.save_pretrained(os.path.join(out, "unet"), safe_serialization=True)
vae.save_pretrained(os.path.join(out, "vae"), safe_serialization=True)
text.save_pretrained(os.path.join(out, "text_encoder"), safe_serialization=True)

g = torch.Generator().manual_seed(7)
with torch.no_grad(), h5py.File(os.path.join(out, "golden.h5"), "w") as f:
    f.attrs["made_by"] = "scripts/refdata/make_variant_golden.py"
    f.attrs["torch"] = str(torch.__version__)
    import diffusers, transformers
    f.attrs["diffusers"] = str(diffusers.__version__)
    f.attrs["transformers"] = str(transformers.__version__)
    ids = torch.randint(3, 1000, (3, 77), generator=g)
    ids[:, 0] = 0
    ids[0, 10:] = 2
    ids[1, 40:] = 2
    ids[2, 76] = 2
    hidden = text(ids).last_hidden_state
    f["text_encoder/input_ids"] = ids.numpy().astype(np.int64)
    f["text_encoder/last_hidden_state"] = hidden.numpy()
    sample = torch.randn(2, 4, 16, 16, generator=g)
    ehs = torch.randn(2, 77, 16, generator=g)
    f["unet/sample"] = sample.numpy()
    f["unet/encoder_hidden_states"] = ehs.numpy()
    for name, t in (("t981", torch.tensor(981)), ("t1", torch.tensor(1)), ("tpair", torch.tensor([981, 1]))):
        f[f"unet/{name}/timestep"] = t.numpy().astype(np.int64)
        f[f"unet/{name}/noise_pred"] = unet(sample, t, ehs).sample.numpy()
    z = torch.randn(2, 4, 16, 16, generator=g)
    f["vae_decode/decoder_input"] = (z / vae.config.scaling_factor).numpy()
    f["vae_decode/decoded"] = vae.decode(z / vae.config.scaling_factor).sample.numpy()
    image = torch.rand(2, 3, 64, 64, generator=g) * 2 - 1
    f["vae_encode/image"] = image.numpy()
    f["vae_encode/mean"] = vae.encode(image).latent_dist.mean.numpy()
print("wrote", out)

# An SDXL-shaped UNet (tiny-sdxl-unet): added text/time conditioning
# (addition_embed_type "text_time"), transformer_layers_per_block > 1,
# per-block heads, linear projections; golden "unet_xl/..." in golden.h5.
torch.manual_seed(1)
unet_xl = UNet2DConditionModel(
    sample_size=16, in_channels=4, out_channels=4,
    down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
    up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
    block_out_channels=(16, 24, 32), layers_per_block=2, attention_head_dim=(2, 3, 4),
    transformer_layers_per_block=(1, 2, 3), use_linear_projection=True, cross_attention_dim=24,
    norm_num_groups=8, addition_embed_type="text_time", addition_time_embed_dim=8,
    projection_class_embeddings_input_dim=20 + 6 * 8)
reinit(unet_xl)
unet_xl.eval()
unet_xl.save_pretrained(os.path.join(out, "unet_xl"), safe_serialization=True)
g = torch.Generator().manual_seed(11)
with torch.no_grad(), h5py.File(os.path.join(out, "golden.h5"), "a") as f:
    sample = torch.randn(2, 4, 16, 16, generator=g)
    ehs = torch.randn(2, 77, 24, generator=g)
    text_embeds = torch.randn(2, 20, generator=g)
    time_ids = torch.tensor([[64.0, 64, 0, 0, 64, 64], [48.0, 64, 8, 0, 64, 48]])
    f["unet_xl/sample"] = sample.numpy()
    f["unet_xl/encoder_hidden_states"] = ehs.numpy()
    f["unet_xl/text_embeds"] = text_embeds.numpy()
    f["unet_xl/time_ids"] = time_ids.numpy()
    t = torch.tensor([981, 1])
    f["unet_xl/timestep"] = t.numpy().astype(np.int64)
    f["unet_xl/noise_pred"] = unet_xl(sample, t, ehs, added_cond_kwargs={"text_embeds": text_embeds,
                                                                         "time_ids": time_ids}).sample.numpy()
print("wrote unet_xl")
