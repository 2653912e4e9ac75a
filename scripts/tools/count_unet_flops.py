#!/usr/bin/env python3
"""Counts the FLOPs of one diffusers UNet2DConditionModel forward pass.

Offline tool (not used by the build or the tests): builds the UNet from a
config.json with random weights in PyTorch and counts 2*M*N*K for every
Conv2d, Linear and attention matmul (torch.bmm / torch.baddbmm, which
diffusers' AttnProcessor uses on torch 1.x) that runs.

  python3 count_unet_flops.py CONFIG.json --batch 2 --latent 64 --context 77
"""
import argparse
import json

import torch
from diffusers import UNet2DConditionModel

parser = argparse.ArgumentParser()
parser.add_argument("config")
parser.add_argument("--batch", type=int, default=2)
parser.add_argument("--latent", type=int, default=64)
parser.add_argument("--context", type=int, default=77)
args = parser.parse_args()

with open(args.config) as f:
    config = json.load(f)
unet = UNet2DConditionModel.from_config(config).eval()
flops = {"conv": 0, "linear": 0, "attention": 0}


def conv_hook(m, inp, out):
    n, co, ho, wo = out.shape
    ci = m.in_channels // m.groups
    flops["conv"] += 2 * n * co * ho * wo * ci * m.kernel_size[0] * m.kernel_size[1]


def linear_hook(m, inp, out):
    rows = out.numel() // m.out_features
    flops["linear"] += 2 * rows * m.in_features * m.out_features


for mod in unet.modules():
    if isinstance(mod, torch.nn.Conv2d):
        mod.register_forward_hook(conv_hook)
    elif isinstance(mod, torch.nn.Linear):
        mod.register_forward_hook(linear_hook)

bmm, baddbmm = torch.bmm, torch.baddbmm


def counted_bmm(a, b, *rest, **kw):
    flops["attention"] += 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    return bmm(a, b, *rest, **kw)


def counted_baddbmm(c, a, b, *rest, **kw):
    flops["attention"] += 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    return baddbmm(c, a, b, *rest, **kw)


torch.bmm, torch.baddbmm = counted_bmm, counted_baddbmm
cross = config["cross_attention_dim"]
cross = cross[0] if isinstance(cross, list) else cross
with torch.no_grad():
    unet(torch.randn(args.batch, config.get("in_channels", 4), args.latent, args.latent),
         torch.tensor([981] * args.batch), torch.randn(args.batch, args.context, cross))
total = sum(flops.values())
print(json.dumps({**flops, "total": total, "total_gflop": total / 1e9}))
