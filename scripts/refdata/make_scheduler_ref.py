#!/usr/bin/env python3
"""Writes tests/data/scheduler_ref.h5: what the real diffusers 0.30.0
schedulers compute, for the schedulers and options the tiny-sd golden
pipelines do not cover (LMS, Euler-ancestral, DPM-Solver++ and other
spacings, prediction types and beta schedules of all six).

Offline tool (not used by the build or the tests). It needs torch; the file
was made with Debian's (python3-torch 1.13.1, the torch the tiny-sd golden
was made with; CPU capability AVX2) and diffusers from PyPI:
  apt-get install python3-torch python3-scipy
  /usr/bin/python3 -m venv --system-site-packages /tmp/venv-sched
  /tmp/venv-sched/bin/pip install diffusers==0.30.0 'huggingface_hub<0.26' h5py
  /tmp/venv-sched/bin/python scripts/refdata/make_scheduler_ref.py tests/data/scheduler_ref.h5
Nothing is transcribed: every number is what the unmodified diffusers classes
return, built with SchedulerClass.from_config(config) as a pipeline's
scheduler swap does.

Contents:
  betas/<schedule>/{betas,alphas_cumprod}  (1000,) f32 for linear,
      scaled_linear (SD's 0.00085..0.012) and squaredcos_cap_v2.
  schedules/  one row per (scheduler, config, num_inference_steps):
      scheduler (str), config (str, the JSON given to from_config), steps (i32),
      valid (i32: 0 when diffusers' grid indexes alphas_cumprod out of range, so
      that its step would raise), offsets (i32, into the flat arrays),
      timesteps (f32 flat: diffusers' f32 or int64 values, exact), sigmas (f32
      flat; none for pndm/ddim),
      init_noise_sigma (f32).
  trajectories/cases: the case names (str).
  trajectories/<case>/: a run on a [2,4,4,4] latent from synthetic model
      outputs (a fixed nonlinear function of the scaled input and t, made in
      torch f32) following StableDiffusionPipeline's loop:
        scheduler, config (str), steps (i32), timesteps (f64),
        init_noise (f32, N(0,1)), init_noise_sigma (f32),
        latents_init (init_noise * init_noise_sigma),
        model_input (S,...) scale_model_input's output, model_output (S,...),
        latents (S,...) after each step, noise (S,...) Euler-ancestral's draws
        (recorded from its generator; the C++ test feeds them back).
  lms_coefficients/<case>: (S,4) f64, get_lms_coefficient(order, t, k) of a
      run (NaN where k >= order).
"""
import importlib.metadata
import json
import sys

import h5py
import numpy as np
import torch

import diffusers
from diffusers import (DDIMScheduler, DPMSolverMultistepScheduler, EulerAncestralDiscreteScheduler,
                       EulerDiscreteScheduler, LMSDiscreteScheduler, PNDMScheduler)
from diffusers.schedulers import scheduling_euler_ancestral_discrete as euler_a_module

CLASSES = {
    "pndm": PNDMScheduler,
    "ddim": DDIMScheduler,
    "lms": LMSDiscreteScheduler,
    "euler": EulerDiscreteScheduler,
    "euler_a": EulerAncestralDiscreteScheduler,
    "dpmpp_2m": DPMSolverMultistepScheduler,
}

# Stable Diffusion 1.x's scheduler_config.json (the tiny-sd one).
SD = {
    "_class_name": "PNDMScheduler",
    "_diffusers_version": "0.30.0",
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "beta_start": 0.00085,
    "clip_sample": False,
    "num_train_timesteps": 1000,
    "prediction_type": "epsilon",
    "set_alpha_to_one": False,
    "skip_prk_steps": True,
    "steps_offset": 1,
    "timestep_spacing": "leading",
    "trained_betas": None,
}


def sd(**overrides):
    c = dict(SD)
    c.update(overrides)
    return c


def make(name, config):
    return CLASSES[name].from_config(config)


def string_array(xs):
    return np.array(xs, dtype=h5py.string_dtype())


def write_betas(f):
    g = f.create_group("betas")
    for schedule, kw in [("linear", {}), ("scaled_linear", {"beta_start": 0.00085, "beta_end": 0.012}),
                         ("squaredcos_cap_v2", {})]:
        s = DDIMScheduler(beta_schedule=schedule, **kw)
        h = g.create_group(schedule)
        h["betas"] = s.betas.numpy().astype(np.float32)
        h["alphas_cumprod"] = s.alphas_cumprod.numpy().astype(np.float32)


def in_range(name, s, n, n_train=1000):
    """Whether diffusers' PNDM/DDIM steps would index alphas_cumprod in range."""
    ratio = n_train // n
    for i, t in enumerate(int(x) for x in s.timesteps):
        cur, prev = (t + ratio, t) if (name == "pndm" and i == 1) else (t, t - ratio)
        if not -n_train <= cur < n_train or n_train <= prev:
            return False
    return True


def write_schedules(f):
    names, configs, steps, valid, offsets, sig_offsets, inits = [], [], [], [], [0], [0], []
    timesteps, sigmas = [], []
    step_counts = [1, 2, 3, 4, 5, 7, 10, 25, 50, 61, 121, 1000]
    variants = []
    for name in CLASSES:
        for spacing in ["leading", "trailing", "linspace"]:
            variants.append((name, sd(timestep_spacing=spacing)))
    # Spacing unset: each scheduler's own default; no steps_offset.
    for name in CLASSES:
        variants.append((name, {"beta_schedule": "linear", "skip_prk_steps": True}))
    variants.append(("euler", sd(timestep_spacing="linspace", final_sigmas_type="sigma_min")))
    variants.append(("dpmpp_2m", sd(timestep_spacing="linspace", final_sigmas_type="sigma_min")))
    variants.append(("dpmpp_2m", sd(timestep_spacing="linspace", lambda_min_clipped=-5.1)))
    variants.append(("dpmpp_2m", sd(timestep_spacing="trailing", lambda_min_clipped=-5.1)))
    variants.append(("ddim", sd(timestep_spacing="trailing", beta_schedule="squaredcos_cap_v2")))
    for name, config in variants:
        for n in step_counts:
            if n == 1000 and name not in ("pndm", "ddim"):
                continue  # 1000 steps: only to see PNDM/DDIM's grid leave alphas_cumprod
            s = make(name, config)
            s.set_timesteps(n)
            ts = s.timesteps.numpy().astype(np.float32)  # all f32 or int < 2^24: exact
            names.append(name)
            configs.append(json.dumps(config))
            steps.append(n)
            ok = in_range(name, s, n) if name in ("pndm", "ddim") else True
            valid.append(1 if ok else 0)
            timesteps.append(ts)
            offsets.append(offsets[-1] + len(ts))
            sig = s.sigmas.numpy().astype(np.float32) if hasattr(s, "sigmas") and name not in ("pndm", "ddim") else \
                np.zeros(0, np.float32)
            sigmas.append(sig)
            sig_offsets.append(sig_offsets[-1] + len(sig))
            inits.append(float(s.init_noise_sigma))
    g = f.create_group("schedules")
    g["scheduler"] = string_array(names)
    g["config"] = string_array(configs)
    g["steps"] = np.array(steps, np.int32)
    g["valid"] = np.array(valid, np.int32)
    g["offsets"] = np.array(offsets, np.int32)
    g["sigma_offsets"] = np.array(sig_offsets, np.int32)
    g["timesteps"] = np.concatenate(timesteps)
    g["sigmas"] = np.concatenate(sigmas)
    g["init_noise_sigma"] = np.array(inits, np.float32)
    print("schedules: %d rows, %d timesteps" % (len(names), offsets[-1]))


PHASE = torch.linspace(-2.0, 2.0, 128, dtype=torch.float32).reshape(2, 4, 4, 4)


def synthetic_model(x, t):
    """A denoiser-like f32 function of the scaled input and the timestep."""
    tt = torch.tensor(float(t) / 1000.0, dtype=torch.float32)
    return 0.8 * torch.tanh(x) + 0.3 * torch.sin(3.0 * PHASE + 5.0 * tt) - 0.1 * x


TRAJECTORIES = [
    ("pndm_sd_10", "pndm", sd(), 10),
    ("pndm_v_linspace_cos_7", "pndm", sd(prediction_type="v_prediction", timestep_spacing="linspace",
                                         beta_schedule="squaredcos_cap_v2"), 7),
    ("pndm_trailing_linear_alpha1_5", "pndm", sd(timestep_spacing="trailing", beta_schedule="linear",
                                                 beta_start=0.0001, beta_end=0.02, set_alpha_to_one=True), 5),
    ("pndm_sd_2", "pndm", sd(), 2),
    ("ddim_sd_10", "ddim", sd(), 10),
    ("ddim_defaults_sample_linspace_6", "ddim", {"prediction_type": "sample", "timestep_spacing": "linspace"}, 6),
    ("ddim_v_trailing_8", "ddim", sd(prediction_type="v_prediction", timestep_spacing="trailing"), 8),
    ("lms_sd_10", "lms", sd(), 10),
    ("lms_linspace_12", "lms", sd(timestep_spacing="linspace"), 12),
    ("lms_v_trailing_6", "lms", sd(prediction_type="v_prediction", timestep_spacing="trailing"), 6),
    ("lms_sample_linear_5", "lms", {"prediction_type": "sample"}, 5),
    # quad bisects once for one coefficient of the last step here.
    ("lms_cos_linspace_2", "lms", sd(timestep_spacing="linspace", beta_schedule="squaredcos_cap_v2"), 2),
    ("euler_linspace_10", "euler", sd(timestep_spacing="linspace"), 10),
    ("euler_v_trailing_sigmamin_6", "euler", sd(prediction_type="v_prediction", timestep_spacing="trailing",
                                                final_sigmas_type="sigma_min"), 6),
    ("euler_sample_leading_5", "euler", sd(prediction_type="sample"), 5),
    ("euler_a_sd_10", "euler_a", sd(), 10),
    ("euler_a_v_linspace_8", "euler_a", sd(prediction_type="v_prediction", timestep_spacing="linspace"), 8),
    ("euler_a_trailing_cos_6", "euler_a", sd(timestep_spacing="trailing", beta_schedule="squaredcos_cap_v2"), 6),
    ("dpmpp_2m_linspace_10", "dpmpp_2m", sd(timestep_spacing="linspace"), 10),
    ("dpmpp_2m_sd_20", "dpmpp_2m", sd(), 20),
    ("dpmpp_2m_v_trailing_8", "dpmpp_2m", sd(prediction_type="v_prediction", timestep_spacing="trailing"), 8),
    ("dpmpp_2m_sample_6", "dpmpp_2m", sd(prediction_type="sample", timestep_spacing="linspace"), 6),
    ("dpmpp_2m_defaults_25", "dpmpp_2m", {}, 25),
    ("dpmpp_3m_heun_sigmamin_20", "dpmpp_2m", sd(timestep_spacing="linspace", solver_order=3, solver_type="heun",
                                                 final_sigmas_type="sigma_min", euler_at_final=True), 20),
    ("dpmpp_3m_12", "dpmpp_2m", sd(timestep_spacing="trailing", solver_order=3), 12),
    ("dpmpp_1_5", "dpmpp_2m", sd(timestep_spacing="linspace", solver_order=1), 5),
    ("dpmsolver_midpoint_sigmamin_12", "dpmpp_2m", sd(timestep_spacing="linspace", algorithm_type="dpmsolver",
                                                      final_sigmas_type="sigma_min"), 12),
    ("dpmsolver_3_heun_v_16", "dpmpp_2m", sd(timestep_spacing="linspace", algorithm_type="dpmsolver",
                                             solver_order=3, solver_type="heun", final_sigmas_type="sigma_min",
                                             prediction_type="v_prediction", lower_order_final=False), 16),
    ("dpmpp_2m_heun_clipped_9", "dpmpp_2m", sd(timestep_spacing="linspace", solver_type="heun",
                                               lambda_min_clipped=-5.1), 9),
]


def write_trajectories(f):
    g = f.create_group("trajectories")
    g["cases"] = string_array([case for case, _, _, _ in TRAJECTORIES])
    lms = f.create_group("lms_coefficients")
    for case, name, config, n in TRAJECTORIES:
        s = make(name, config)
        s.set_timesteps(n)
        gen = torch.Generator().manual_seed(1234)
        init_noise = torch.randn((2, 4, 4, 4), generator=gen, dtype=torch.float32)
        latents = init_noise * s.init_noise_sigma  # prepare_latents
        latents_init = latents.clone()
        drawn = []
        original_randn = euler_a_module.randn_tensor

        def recording_randn(*args, **kwargs):
            x = original_randn(*args, **kwargs)
            drawn.append(x.clone())
            return x

        euler_a_module.randn_tensor = recording_randn
        inputs, outputs, after = [], [], []
        try:
            for t in s.timesteps:
                x_in = s.scale_model_input(latents, t)
                mo = synthetic_model(x_in, t)
                inputs.append(x_in.clone())
                outputs.append(mo.clone())
                extra = {"generator": gen} if name == "euler_a" else {}
                latents = s.step(mo, t, latents, return_dict=False, **extra)[0]
                after.append(latents.clone())
        finally:
            euler_a_module.randn_tensor = original_randn
        h = g.create_group(case)
        h["scheduler"] = string_array([name])
        h["config"] = string_array([json.dumps(config)])
        h["steps"] = np.array([n], np.int32)
        h["timesteps"] = s.timesteps.numpy().astype(np.float64)
        h["init_noise"] = init_noise.numpy()
        h["init_noise_sigma"] = np.array([float(s.init_noise_sigma)], np.float32)
        h["latents_init"] = latents_init.numpy()
        h["model_input"] = torch.stack(inputs).numpy()
        h["model_output"] = torch.stack(outputs).numpy()
        h["latents"] = torch.stack(after).numpy()
        if name == "euler_a":
            assert len(drawn) == len(s.timesteps)
            h["noise"] = torch.stack(drawn).numpy()
        if name == "lms":
            coeffs = np.full((len(s.timesteps), 4), np.nan)
            for i in range(len(s.timesteps)):
                order = min(i + 1, 4)
                for k in range(order):
                    coeffs[i, k] = s.get_lms_coefficient(order, i, k)
            lms[case] = coeffs
        print("%-34s %-8s %2d steps, |latents| <= %.3g" % (case, name, len(s.timesteps),
                                                          float(torch.stack(after).abs().max())))


def main(path):
    torch.set_num_threads(1)
    with h5py.File(path, "w") as f:
        f.attrs["versions"] = json.dumps({
            "diffusers": diffusers.__version__, "torch": torch.__version__, "numpy": np.__version__,
            "scipy": importlib.metadata.version("scipy"),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()
            if hasattr(torch.backends, "cpu") else "AVX2 (torch 1.13 reports it in torch.__config__.show())",
        })
        write_betas(f)
        write_schedules(f)
        write_trajectories(f)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_scheduler_ref.py OUT_H5")
    main(sys.argv[1])
