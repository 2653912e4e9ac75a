#!/usr/bin/env python3
"""Offline training of the tpumesh default model: a tiny Stable-Diffusion-shaped
text-to-image model (CLIP text encoder + UNet2DConditionModel + AutoencoderKL)
on synthetic "a {colour} {shape} on a {colour} background" images (data.py).

Phases (each resumable, all deterministic from the seeds):
  1. VAE        AutoencoderKL on freshly generated images (vae.pt when done).
  2. latents    a fixed, seeded dataset of --dataset-size images, encoded with
                the frozen VAE (posterior mean); scaling_factor = 1/std
                (latents.pt).
  3. joint      UNet + text encoder, DDPM epsilon loss with offset noise and
                min-SNR-5 weighting, 10% empty captions, AdamW, EMA
                (ckpt.pt every --ckpt-every steps; --resume continues it, a
                larger --steps extends it).
  4. export     the EMA weights as a diffusers StableDiffusionPipeline folder
                (OUT/model) with tpumesh_training.json.

Usage (see README.md):
  OMP_NUM_THREADS=1 /opt/peers-venv/bin/python scripts/train_default/train.py \
      --out out/train_default --steps 2600 --threads 1 [--resume]
"""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import classify  # noqa: E402
import data  # noqa: E402
import tokenizer_files  # noqa: E402

# Fixed seeds (all randomness derives from these).
SEEDS = {
    "init": 0,            # torch.manual_seed for the weight initialisation
    "vae_data": 1,        # VAE phase images: default_rng([vae_data, step])
    "vae_noise": 2,       # VAE posterior sampling: torch.Generator(vae_noise * 1_000_003 + step)
    "dataset": 3,         # the fixed joint-phase dataset: data.make_dataset(dataset, N)
    "train": 4,           # joint phase batches/timesteps/noise: torch.Generator(train * 1_000_003 + step)
    "clean_test": 1234,   # 900 clean images for the classifier / VAE reconstruction checks
}

TRAIN_SCHEDULE = {"num_train_timesteps": 1000, "beta_schedule": "linear", "beta_start": 0.0001, "beta_end": 0.02,
                  "prediction_type": "epsilon"}

# Inference scheduler written to scheduler/scheduler_config.json.
DDIM_CONFIG = dict(num_train_timesteps=1000, beta_start=0.0001, beta_end=0.02, beta_schedule="linear",
                   prediction_type="epsilon", clip_sample=False, set_alpha_to_one=False, steps_offset=0,
                   timestep_spacing="trailing", trained_betas=None, thresholding=False,
                   rescale_betas_zero_snr=False,
                   skip_prk_steps=True)  # so that --scheduler pndm (PLMS) runs from it too
VAE_CONFIG = dict(in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 2,
                  up_block_types=["UpDecoderBlock2D"] * 2, block_out_channels=[32, 64], layers_per_block=1,
                  act_fn="silu", latent_channels=4, norm_num_groups=16, sample_size=32, scaling_factor=1.0)
UNET_CONFIG = dict(sample_size=16, in_channels=4, out_channels=4,
                   down_block_types=["DownBlock2D", "CrossAttnDownBlock2D"],
                   up_block_types=["CrossAttnUpBlock2D", "UpBlock2D"],
                   mid_block_type="UNetMidBlock2DCrossAttn",
                   block_out_channels=[32, 64], layers_per_block=1, cross_attention_dim=64,
                   attention_head_dim=8, norm_num_groups=16, act_fn="silu", flip_sin_to_cos=True, freq_shift=0,
                   use_linear_projection=False, upcast_attention=False)
TEXT_CONFIG = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   max_position_embeddings=77, hidden_act="quick_gelu", layer_norm_eps=1e-5, projection_dim=64,
                   attention_dropout=0.0, dropout=0.0)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="out/train_default")
    p.add_argument("--steps", type=int, default=2600, help="total joint-phase steps (extend with --resume)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--resume", action="store_true", help="reuse vae.pt / latents.pt / ckpt.pt in --out")
    p.add_argument("--vae-steps", type=int, default=1400)
    p.add_argument("--vae-batch", type=int, default=16)
    p.add_argument("--vae-lr", type=float, default=1e-3)
    p.add_argument("--vae-kl", type=float, default=1e-6)
    p.add_argument("--dataset-size", type=int, default=30000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--decay-from", type=int, default=0,
                   help="from this joint step on, cosine decay of the lr to 0.1x at --steps (0: constant lr)")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--ema-decay", type=float, default=0.999)
    p.add_argument("--offset-noise", type=float, default=0.1)
    p.add_argument("--min-snr", type=float, default=5.0, help="min-SNR-gamma weighting; 0 disables")
    p.add_argument("--uncond-prob", type=float, default=0.1)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--ckpt-every", type=int, default=200)
    p.add_argument("--no-export", action="store_true")
    return p.parse_args()


class Log:
    def __init__(self, path):
        self.path = path

    def __call__(self, msg):
        line = time.strftime("%Y-%m-%d %H:%M:%S ") + msg
        print(line, flush=True)
        with open(self.path, "a") as f:
            f.write(line + "\n")


def atomic_save(torch, obj, path):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def to_tensor(torch, imgs):
    """uint8 [N, H, W, 3] -> float [N, 3, H, W] in [-1, 1]."""
    return torch.from_numpy(imgs).permute(0, 3, 1, 2).float().div(127.5).sub(1.0)


def to_uint8(torch, x):
    return ((x.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()


def save_grid(imgs, path, cols=16, scale=4):
    from PIL import Image
    n = len(imgs)
    rows = (n + cols - 1) // cols
    h, w = imgs.shape[1:3]
    grid = np.full((rows * (h + 2), cols * (w + 2), 3), 128, np.uint8)
    for i, im in enumerate(imgs):
        r, c = divmod(i, cols)
        grid[r * (h + 2) + 1:r * (h + 2) + 1 + h, c * (w + 2) + 1:c * (w + 2) + 1 + w] = im
    Image.fromarray(grid).resize((grid.shape[1] * scale, grid.shape[0] * scale), Image.NEAREST).save(path)


def classifier_accuracy(imgs, labels):
    ok = 0
    fills = {s: [] for s in data.SHAPES}
    for im, lab in zip(imgs, labels):
        r = classify.classify(im)
        ok += classify.correct(r, lab)
        fills[lab[0]].append(r["fill"])
    return ok, {s: [float(min(v)), float(max(v))] for s, v in fills.items() if v}


def build_tokenizer(out):
    tok_dir = os.path.join(out, "tokenizer")
    vocab, merges = tokenizer_files.build(data.WORDS, tok_dir)
    caps = [data.caption(*t) for t in data.all_triples()]
    tok = tokenizer_files.verify_with_transformers(tok_dir, data.WORDS, caps)
    return tok_dir, vocab, merges, tok


def make_vae(torch):
    from diffusers import AutoencoderKL
    torch.manual_seed(SEEDS["init"])
    return AutoencoderKL(**VAE_CONFIG)


def vae_phase(torch, args, log):
    """Trains the VAE to --vae-steps total steps. With --resume, a vae.pt at
    fewer steps is continued (lr schedule recomputed for the new total, 50-step
    re-warmup), one at >= --vae-steps is used as is."""
    path = os.path.join(args.out, "vae.pt")
    vae = make_vae(torch)
    opt = torch.optim.Adam(vae.parameters(), lr=args.vae_lr)
    start, seconds, segments, losses = 0, 0.0, [], []
    if args.resume and os.path.exists(path):
        st = torch.load(path)
        vae.load_state_dict(st["vae"])
        if st["step"] >= args.vae_steps:
            log("vae: loaded %s (%d steps, final loss %.5f)" % (path, st["step"], st["final_loss"]))
            return vae, st
        if os.path.exists(os.path.join(args.out, "ckpt.pt")):
            sys.exit("vae.pt has %d steps < --vae-steps %d but the joint phase (ckpt.pt) was trained on its latents; "
                     "keep --vae-steps <= %d" % (st["step"], args.vae_steps, st["step"]))
        if "opt" in st:
            opt.load_state_dict(st["opt"])
        start, seconds, segments = st["step"], st["seconds"], st.get("segments", [[0, st["step"]]])
        log("vae: continuing %s from step %d to %d" % (path, start, args.vae_steps))
    t0 = time.time()
    vae.train()
    triples = data.all_triples()
    for step in range(start, args.vae_steps):
        lr = args.vae_lr * min(1.0, (step - start + 1) / 50) * (
            0.5 * (1 + math.cos(math.pi * step / args.vae_steps)) * 0.9 + 0.1)
        for g in opt.param_groups:
            g["lr"] = lr
        rng = np.random.default_rng([SEEDS["vae_data"], step])
        tri, sizes, jx, jy = data.sample_params(rng, args.vae_batch)
        imgs = np.stack([data.render(*triples[t], int(s), int(a), int(b)) for t, s, a, b in zip(tri, sizes, jx, jy)])
        x = to_tensor(torch, imgs)
        post = vae.encode(x).latent_dist
        gen = torch.Generator().manual_seed(SEEDS["vae_noise"] * 1_000_003 + step)
        z = post.mean + post.std * torch.randn(post.mean.shape, generator=gen)
        y = vae.decode(z).sample
        rec = (y - x).pow(2).mean() + (y - x).abs().mean()
        kl = post.kl().mean()
        loss = rec + args.vae_kl * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(rec.item())
        if (step + 1) % args.log_every == 0 or step + 1 == args.vae_steps:
            el = time.time() - t0
            log("vae step %d/%d rec(mse+l1) %.5f kl %.1f lr %.2e  %.1f img/s  elapsed %.0fs" % (
                step + 1, args.vae_steps, float(np.mean(losses[-args.log_every:])), kl.item(), lr,
                (step + 1 - start) * args.vae_batch / el, seconds + el))
    seconds += time.time() - t0
    segments.append([start, args.vae_steps])
    vae.eval()
    # Reconstruction check on the clean test set.
    imgs, _, labels = data.make_dataset(SEEDS["clean_test"], 900)
    with torch.no_grad():
        recs = np.concatenate([to_uint8(torch, vae.decode(vae.encode(to_tensor(torch, imgs[i:i + 100])).latent_dist.mean).sample)
                               for i in range(0, 900, 100)])
    ok, fills = classifier_accuracy(recs, labels)
    max_err = int(np.abs(recs.astype(int) - imgs.astype(int)).max())
    mean_err = float(np.abs(recs.astype(int) - imgs.astype(int)).mean())
    save_grid(np.concatenate([imgs[:32], recs[:32]]), os.path.join(args.out, "vae_recon.png"))
    st = {"vae": vae.state_dict(), "opt": opt.state_dict(), "done": True, "step": args.vae_steps,
          "final_loss": float(np.mean(losses[-50:])), "seconds": seconds, "segments": segments,
          "recon_classifier": ok, "recon_fill_range": fills,
          "recon_mean_abs_err": mean_err, "recon_max_abs_err": max_err}
    atomic_save(torch, st, path)
    log("vae: %d steps, %.0fs in all; reconstructions of 900 clean images: classifier %d/900, mean |err| %.2f, "
        "max |err| %d, fill ranges %s (grid vae_recon.png)" % (args.vae_steps, seconds, ok, mean_err, max_err, fills))
    return vae, st


def latent_phase(torch, args, vae, vae_step, tok, log):
    path = os.path.join(args.out, "latents.pt")
    if args.resume and os.path.exists(path):
        st = torch.load(path)
        if st["n"] == args.dataset_size and st.get("vae_step") == vae_step:
            log("latents: loaded %s (%d, scaling_factor %.5f)" % (path, st["n"], st["scaling_factor"]))
            return st
    t0 = time.time()
    imgs, caps, labels = data.make_dataset(SEEDS["dataset"], args.dataset_size)
    lat = []
    with torch.no_grad():
        for i in range(0, len(imgs), 250):
            lat.append(vae.encode(to_tensor(torch, imgs[i:i + 250])).latent_dist.mean)
    lat = torch.cat(lat)
    std = lat.std().item()
    uniq = sorted(set(caps))
    ids = tok(uniq + [""], padding="max_length", max_length=77, truncation=True, return_tensors="pt").input_ids
    cap_index = torch.tensor([uniq.index(c) for c in caps])
    st = {"n": args.dataset_size, "vae_step": vae_step, "latents": lat, "scaling_factor": 1.0 / std, "latent_mean": lat.mean().item(),
          "latent_std": std, "caption_ids": ids[:-1], "empty_ids": ids[-1], "cap_index": cap_index,
          "seconds": time.time() - t0}
    atomic_save(torch, st, path)
    log("latents: %d images encoded in %.0fs, latent mean %.4f std %.4f -> scaling_factor %.5f" % (
        args.dataset_size, st["seconds"], st["latent_mean"], std, st["scaling_factor"]))
    return st


def make_text_unet(torch, vocab):
    from diffusers import UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel
    torch.manual_seed(SEEDS["init"] + 1)
    unet = UNet2DConditionModel(**UNET_CONFIG)
    cfg = CLIPTextConfig(vocab_size=len(vocab), bos_token_id=vocab["<|startoftext|>"],
                         eos_token_id=vocab["<|endoftext|>"], pad_token_id=vocab["<|endoftext|>"], **TEXT_CONFIG)
    text = CLIPTextModel(cfg)
    return text, unet


def joint_phase(torch, args, vocab, lat, log):
    import copy
    text, unet = make_text_unet(torch, vocab)
    params = list(unet.parameters()) + list(text.parameters())
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.999), weight_decay=args.weight_decay)
    ema_unet, ema_text = copy.deepcopy(unet), copy.deepcopy(text)
    for p in list(ema_unet.parameters()) + list(ema_text.parameters()):
        p.requires_grad_(False)
    path = os.path.join(args.out, "ckpt.pt")
    step, seconds, history = 0, 0.0, []
    if args.resume and os.path.exists(path):
        ck = torch.load(path)
        unet.load_state_dict(ck["unet"])
        text.load_state_dict(ck["text"])
        ema_unet.load_state_dict(ck["ema_unet"])
        ema_text.load_state_dict(ck["ema_text"])
        opt.load_state_dict(ck["opt"])
        step, seconds, history = ck["step"], ck["seconds"], ck["history"]
        log("joint: resumed %s at step %d (%.0fs trained)" % (path, step, seconds))

    def save():
        atomic_save(torch, {"unet": unet.state_dict(), "text": text.state_dict(), "ema_unet": ema_unet.state_dict(),
                            "ema_text": ema_text.state_dict(), "opt": opt.state_dict(), "step": step,
                            "seconds": seconds, "history": history}, path)

    betas = torch.linspace(TRAIN_SCHEDULE["beta_start"], TRAIN_SCHEDULE["beta_end"],
                           TRAIN_SCHEDULE["num_train_timesteps"], dtype=torch.float32)
    acp = torch.cumprod(1.0 - betas, dim=0)
    snr = acp / (1 - acp)
    latents = lat["latents"] * lat["scaling_factor"]
    cap_ids, empty_ids, cap_index = lat["caption_ids"], lat["empty_ids"], lat["cap_index"]
    n = latents.shape[0]
    unet.train()
    text.train()
    ema_params = list(ema_unet.parameters()) + list(ema_text.parameters())
    window = []
    t_start = time.time() - seconds
    t_log, step_log = time.time(), step
    if step >= args.steps:
        log("joint: already at step %d >= --steps %d" % (step, args.steps))
    while step < args.steps:
        lr = args.lr * min(1.0, (step + 1) / args.warmup)
        if args.decay_from and step >= args.decay_from:
            frac = (step - args.decay_from) / max(1, args.steps - args.decay_from)
            lr = args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        gen = torch.Generator().manual_seed(SEEDS["train"] * 1_000_003 + step)
        idx = torch.randint(0, n, (args.batch,), generator=gen)
        x0 = latents[idx]
        ids = cap_ids[cap_index[idx]].clone()
        drop = torch.rand(args.batch, generator=gen) < args.uncond_prob
        ids[drop] = empty_ids
        t = torch.randint(0, TRAIN_SCHEDULE["num_train_timesteps"], (args.batch,), generator=gen)
        noise = torch.randn(x0.shape, generator=gen)
        if args.offset_noise > 0:
            noise = noise + args.offset_noise * torch.randn(x0.shape[0], x0.shape[1], 1, 1, generator=gen)
        a = acp[t].view(-1, 1, 1, 1)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        enc = text(ids)[0]
        pred = unet(xt, t, enc).sample
        mse = (pred - noise).pow(2).mean(dim=(1, 2, 3))
        w = torch.clamp(snr[t], max=args.min_snr) / snr[t] if args.min_snr > 0 else torch.ones_like(mse)
        loss = (w * mse).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(params, args.grad_clip)
        opt.step()
        decay = min(args.ema_decay, (1 + step) / (10 + step))
        with torch.no_grad():
            for pe, p in zip(ema_params, params):
                pe.mul_(decay).add_(p.detach(), alpha=1 - decay)
        step += 1
        window.append((loss.item(), mse.mean().item(), float(gnorm)))
        if step % args.log_every == 0 or step == args.steps:
            now = time.time()
            seconds = now - t_start
            wl = np.array(window)
            rec = {"step": step, "loss": float(wl[:, 0].mean()), "mse": float(wl[:, 1].mean()),
                   "grad_norm": float(wl[:, 2].mean()), "lr": lr,
                   "images_per_s": (step - step_log) * args.batch / (now - t_log), "elapsed_s": seconds}
            history.append(rec)
            log("joint step %d/%d loss %.4f mse %.4f |g| %.3f lr %.2e  %.1f img/s  elapsed %.0fs" % (
                step, args.steps, rec["loss"], rec["mse"], rec["grad_norm"], lr, rec["images_per_s"], seconds))
            window, t_log, step_log = [], now, step
        if step % args.ckpt_every == 0 or step == args.steps:
            seconds = time.time() - t_start
            save()
    seconds = time.time() - t_start
    return ema_text, ema_unet, step, seconds, history


def export(torch, args, tok_dir, vocab, merges, vae, lat, text, unet, meta):
    import shutil
    from diffusers import DDIMScheduler, StableDiffusionPipeline
    from transformers import CLIPTokenizer
    model_dir = os.path.join(args.out, "model")
    tmp = model_dir + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    vae.register_to_config(scaling_factor=float(lat["scaling_factor"]))
    sched = DDIMScheduler.from_config(DDIM_CONFIG)
    tok = CLIPTokenizer.from_pretrained(tok_dir)
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text, tokenizer=tok, unet=unet, scheduler=sched,
                                   safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    pipe.save_pretrained(tmp, safe_serialization=True)
    # StableDiffusionPipeline.__init__ rewrites steps_offset to 1 (a deprecation
    # shim); write the scheduler as configured (with "trailing" spacing,
    # steps_offset does not change the timesteps).
    sched = DDIMScheduler.from_config(DDIM_CONFIG)
    sched.save_config(os.path.join(tmp, "scheduler"))
    # The hand-built tokenizer files, byte for byte (save_pretrained rewrites them).
    for f in os.listdir(tok_dir):
        shutil.copyfile(os.path.join(tok_dir, f), os.path.join(tmp, "tokenizer", f))
    for f in ("added_tokens.json", "tokenizer.json"):
        if os.path.exists(os.path.join(tmp, "tokenizer", f)):
            os.remove(os.path.join(tmp, "tokenizer", f))
    with open(os.path.join(tmp, "tpumesh_training.json"), "w") as f:
        json.dump(meta, f, indent=2)
    shutil.rmtree(model_dir, ignore_errors=True)
    os.replace(tmp, model_dir)
    return model_dir


def main():
    args = parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    os.makedirs(args.out, exist_ok=True)
    log = Log(os.path.join(args.out, "train.log"))
    if not args.resume and any(os.path.exists(os.path.join(args.out, f)) for f in ("vae.pt", "latents.pt", "ckpt.pt")):
        sys.exit("%s holds a run (vae.pt / latents.pt / ckpt.pt): pass --resume or use an empty --out" % args.out)
    log("train.py %s" % " ".join(sys.argv[1:]))
    log("torch %s threads %d" % (torch.__version__, torch.get_num_threads()))
    t_all = time.time()

    tok_dir, vocab, merges, tok = build_tokenizer(args.out)
    log("tokenizer: %d tokens, %d merges, every grammar word one token (checked with transformers)" % (
        len(vocab), len(merges)))
    clean_imgs, _, clean_labels = data.make_dataset(SEEDS["clean_test"], 900)
    clean_ok, clean_fills = classifier_accuracy(clean_imgs, clean_labels)
    log("classifier on 900 clean generated images: %d/900, fill ranges %s" % (clean_ok, clean_fills))

    vae, vae_st = vae_phase(torch, args, log)
    for p in vae.parameters():
        p.requires_grad_(False)
    lat = latent_phase(torch, args, vae, vae_st["step"], tok, log)
    text, unet, steps, seconds, history = joint_phase(torch, args, vocab, lat, log)
    if args.no_export:
        return
    final = history[-1] if history else {}
    meta = {
        "what": "tpumesh default model: tiny SD-1.x-shaped text-to-image model trained offline on synthetic shapes "
                "by scripts/train_default/train.py",
        "vocabulary": data.WORDS,  # the words it knows (tpumesh generate names the others)
        "data_generator": data.generator_settings(),
        "dataset": {"size": args.dataset_size, "seed": SEEDS["dataset"],
                    "generator_call": "data.make_dataset(%d, %d)" % (SEEDS["dataset"], args.dataset_size)},
        "tokenizer": {"vocab_size": len(vocab), "num_merges": len(merges),
                      "word_ids": {w: vocab[w + "</w>"] for w in data.WORDS},
                      "bos_id": vocab["<|startoftext|>"], "eos_id": vocab["<|endoftext|>"],
                      "pad_id": vocab["<|endoftext|>"], "max_length": 77},
        "classifier": {"rule": "scripts/train_default/classify.py (README.md)",
                       "fg_threshold": classify.FG_THRESHOLD,
                       "shape_rule": "best intersection over union with the circle, square and triangle drawn to "
                                     "fill the mask's bounding box (classify.py)",
                       "clean_accuracy": "%d/900" % clean_ok, "clean_fill_ranges": clean_fills,
                       "vae_reconstruction_accuracy": "%d/900" % vae_st["recon_classifier"],
                       "vae_reconstruction_fill_ranges": vae_st["recon_fill_range"]},
        "seeds": SEEDS,
        "configs": {"vae": VAE_CONFIG, "unet": UNET_CONFIG, "text_encoder": TEXT_CONFIG},
        "vae_training": {"steps": vae_st["step"], "batch": args.vae_batch, "lr": args.vae_lr,
                         "lr_schedule": "50-step linear warmup, cosine to 0.1x over the total steps "
                                        "(a continued run re-warms for 50 steps and recomputes the cosine)",
                         "segments": vae_st.get("segments"),
                         "loss": "MSE + L1 on [-1, 1] pixels + kl_weight * KL", "kl_weight": args.vae_kl,
                         "optimizer": "Adam", "final_recon_loss": vae_st["final_loss"],
                         "wall_time_s": vae_st["seconds"], "recon_mean_abs_err_8bit": vae_st["recon_mean_abs_err"],
                         "recon_max_abs_err_8bit": vae_st["recon_max_abs_err"],
                         "latents": "posterior mean; scaling_factor = 1/std of the dataset latents",
                         "scaling_factor": lat["scaling_factor"]},
        "joint_training": {"steps": steps, "batch": args.batch, "lr": args.lr, "warmup_steps": args.warmup,
                           "lr_schedule": ("linear warmup then constant" if not args.decay_from else
                                           "linear warmup, constant, then from step %d cosine to 0.1x at the last "
                                           "step" % args.decay_from), "optimizer": "AdamW(0.9, 0.999)",
                           "weight_decay": args.weight_decay, "grad_clip": args.grad_clip,
                           "ema_decay": args.ema_decay, "ema_warmup": "decay = min(ema_decay, (1+step)/(10+step))",
                           "exported_weights": "EMA of UNet + text encoder",
                           "noise_schedule": TRAIN_SCHEDULE, "offset_noise": args.offset_noise,
                           "min_snr_gamma": args.min_snr, "uncond_prob": args.uncond_prob,
                           "wall_time_s": seconds, "final_loss": final.get("loss"), "final_mse": final.get("mse"),
                           "images_per_s": final.get("images_per_s"), "history": history},
        "threads": args.threads,
        "torch": torch.__version__,
        "total_wall_time_s_this_invocation": time.time() - t_all,
        "eval": {"prompts": [data.caption(*t) for t in data.eval_prompts()],
                 "labels": data.eval_prompts(), "seeds": [0, 1], "guidance_scale": 7.5,
                 "num_inference_steps": 25, "scheduler": "DDIMScheduler (scheduler/)", "height": 32, "width": 32,
                 "score": None, "note": "score filled in by sample_eval.py"},
    }
    model_dir = export(torch, args, tok_dir, vocab, merges, vae, lat, text, unet, meta)
    log("exported %s (joint steps %d, final loss %s)" % (model_dir, steps, final.get("loss")))


if __name__ == "__main__":
    main()
