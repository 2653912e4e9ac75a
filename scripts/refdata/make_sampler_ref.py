#!/usr/bin/env python3
"""Writes tests/data/scheduler_ref_samplers.h5: what diffusers 0.42.1 computes
for the sigma schedules and samplers added for issue 32 -- Karras, exponential
and beta sigmas (use_karras_sigmas, use_exponential_sigmas, use_beta_sigmas:
scipy.stats.beta.ppf) on Euler, LMS,
DPM-Solver++ 2M and Heun, HeunDiscreteScheduler, DPMSolverMultistepScheduler
with algorithm_type "sde-dpmsolver++" (DPM++ 2M SDE) and "sde-dpmsolver", and
DPMSolverSinglestepScheduler with solver_order 2 and algorithm_type
"sde-dpmsolver++" (tpumesh's dpmpp_2s_a, see schedulers/schedulers.h).

Offline tool (not used by the build or the tests). Run it with the project's
reference venv (diffusers 0.42.1, torch 2.15, numpy 2.4, scipy for LMS's quad):
  /opt/venvs/torch-current/bin/pip install h5py scipy
  /opt/venvs/torch-current/bin/python scripts/refdata/make_sampler_ref.py \
      tests/data/scheduler_ref_samplers.h5
Nothing is transcribed: every number is what the unmodified diffusers classes
return, built with SchedulerClass.from_config(config) as a pipeline's scheduler
swap does. One splice, because diffusers has no such class: euler_a with
Karras/exponential/beta sigmas is EulerAncestralDiscreteScheduler whose sigmas and
timesteps are replaced, after set_timesteps, by those EulerDiscreteScheduler
computes from the same config (tpumesh's definition of that combination).

torch 2.15's CPU linspace rounds start + step * i once per element, torch
1.13's AVX2 kernel (what schedulers/ reproduces, tests/data/scheduler_ref.h5)
added j * step to 8-lane bases: some betas differ by an ulp. So that the
schedules and steps are compared from the same betas, the file keeps torch
2.15's betas and the C++ test passes them as trained_betas (the betas
themselves are compared too, within 1e-6).

Contents:
  betas/<beta_schedule>_<beta_start>_<beta_end>: (1000,) f32, torch 2.15's
      betas for the linear and scaled_linear configs used below.
  schedules/  one row per (scheduler, config, num_inference_steps):
      scheduler, config (str: the JSON given to from_config), steps (i32),
      offsets / sigma_offsets (i32, into the flat arrays), timesteps (f64 flat:
      diffusers' f32 or int64 values, exact), sigmas (f32 flat),
      init_noise_sigma (f32).
  trajectories/cases (str), trajectories/<case>/: a run on a [2,4,4,4] latent
      with synthetic model outputs (the f32 function of make_scheduler_ref.py)
      following StableDiffusionPipeline's loop: scheduler, config, steps,
      timesteps (f64), init_noise, init_noise_sigma, latents_init,
      model_input (S,...), model_output (S,...), latents (S,...) after each
      step, and noise (S,...) for the samplers that draw it (recorded from
      diffusers' randn_tensor calls; one per step, the C++ test feeds them
      back through its NoiseFn).
  img2img/cases (str), img2img/<case>/: the same from the middle of a run as
      StableDiffusionImg2ImgPipeline drives it: get_timesteps(n, strength)
      (t_start = n - int(n * strength), begin = t_start * scheduler.order),
      set_begin_index(begin), add_noise(original, add_noise_noise,
      timesteps[begin]) -> latents_init, then the steps from begin on:
      scheduler, config, steps, begin (i32), original, add_noise_noise,
      latents_init, model_output, latents, noise as above (S - begin rows).
"""
import json
import sys

import h5py
import numpy as np
import torch

import diffusers
from diffusers import (DPMSolverMultistepScheduler, DPMSolverSinglestepScheduler, EulerAncestralDiscreteScheduler,
                       EulerDiscreteScheduler, HeunDiscreteScheduler, LMSDiscreteScheduler)
from diffusers.schedulers import scheduling_dpmsolver_multistep as multistep_module
from diffusers.schedulers import scheduling_dpmsolver_singlestep as singlestep_module
from diffusers.schedulers import scheduling_euler_ancestral_discrete as euler_a_module

# tpumesh name -> (diffusers class, config keys the name forces).
NAMES = {
    "lms": (LMSDiscreteScheduler, {}),
    "euler": (EulerDiscreteScheduler, {}),
    "euler_a": (EulerAncestralDiscreteScheduler, {}),
    "dpmpp_2m": (DPMSolverMultistepScheduler, {}),
    "heun": (HeunDiscreteScheduler, {}),
    "dpmpp_2m_sde": (DPMSolverMultistepScheduler, {"algorithm_type": "sde-dpmsolver++"}),
    "dpmpp_2s_a": (DPMSolverSinglestepScheduler, {"algorithm_type": "sde-dpmsolver++", "solver_order": 2}),
}
NOISY = {"euler_a", "dpmpp_2m_sde", "dpmpp_2s_a"}


def noisy(name, config):
    return name in NOISY or config.get("algorithm_type", "").startswith("sde-")

SD = {
    "_class_name": "PNDMScheduler",
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
    cls, forced = NAMES[name]
    s = cls.from_config(config, **forced)
    return s


def set_timesteps(name, s, config, n):
    s.set_timesteps(n)
    if name == "euler_a" and any(config.get(k) for k in ("use_karras_sigmas", "use_exponential_sigmas",
                                                           "use_beta_sigmas")):
        e = EulerDiscreteScheduler.from_config(config)
        e.set_timesteps(n)
        s.sigmas = e.sigmas.clone()
        s.timesteps = e.timesteps.clone()


def string_array(xs):
    return np.array(xs, dtype=h5py.string_dtype())


def timesteps_f64(s):
    return s.timesteps.numpy().astype(np.float64)  # f32 or int64 < 2^24: exact


KARRAS = {"use_karras_sigmas": True}
EXPO = {"use_exponential_sigmas": True}
BETA = {"use_beta_sigmas": True}


def schedule_variants():
    v = []
    for name in ["lms", "euler", "euler_a", "dpmpp_2m", "heun", "dpmpp_2m_sde", "dpmpp_2s_a"]:
        for sig in [KARRAS, EXPO, BETA]:
            for spacing in ["leading", "linspace", "trailing"]:
                v.append((name, sd(timestep_spacing=spacing, **sig)))
    for name in ["heun", "dpmpp_2m_sde", "dpmpp_2s_a"]:
        for spacing in ["leading", "linspace", "trailing"]:
            v.append((name, sd(timestep_spacing=spacing)))
    # Each class's own defaults (Heun's beta_start/beta_end differ).
    for name in ["heun", "dpmpp_2s_a", "euler", "lms", "dpmpp_2m"]:
        v.append((name, {}))
        v.append((name, KARRAS))
    v.append(("euler", sd(use_karras_sigmas=True, sigma_min=0.1, sigma_max=10.0)))
    v.append(("euler", sd(use_exponential_sigmas=True, sigma_max=20.0)))
    v.append(("euler", sd(use_karras_sigmas=True, final_sigmas_type="sigma_min", timestep_spacing="linspace")))
    v.append(("dpmpp_2m", sd(use_karras_sigmas=True, beta_schedule="squaredcos_cap_v2")))
    v.append(("dpmpp_2m", sd(use_karras_sigmas=True, final_sigmas_type="sigma_min", lambda_min_clipped=-5.1)))
    v.append(("dpmpp_2m", sd(use_exponential_sigmas=True, beta_schedule="linear", beta_start=0.0001,
                             beta_end=0.02)))
    v.append(("dpmpp_2s_a", sd(use_karras_sigmas=True, final_sigmas_type="sigma_min", lambda_min_clipped=-5.1)))
    v.append(("dpmpp_2s_a", sd(timestep_spacing="linspace", lambda_min_clipped=-5.1)))
    v.append(("heun", sd(use_karras_sigmas=True, beta_schedule="squaredcos_cap_v2")))
    v.append(("euler", sd(use_beta_sigmas=True, sigma_min=0.05, sigma_max=12.0)))
    return v


def write_betas(f):
    g = f.create_group("betas")
    for schedule, start, end in [("scaled_linear", 0.00085, 0.012), ("linear", 0.0001, 0.02),
                                 ("linear", 0.00085, 0.012)]:
        s = HeunDiscreteScheduler(beta_schedule=schedule, beta_start=start, beta_end=end)
        g["%s_%g_%g" % (schedule, start, end)] = s.betas.numpy().astype(np.float32)


def write_schedules(f):
    names, configs, steps, offsets, sig_offsets, inits = [], [], [], [0], [0], []
    timesteps, sigmas = [], []
    for name, config in schedule_variants():
        for n in [1, 2, 3, 5, 10, 25, 50]:
            s = make(name, config)
            set_timesteps(name, s, config, n)
            names.append(name)
            configs.append(json.dumps(config))
            steps.append(n)
            ts = timesteps_f64(s)
            timesteps.append(ts)
            offsets.append(offsets[-1] + len(ts))
            sig = s.sigmas.numpy().astype(np.float32)
            sigmas.append(sig)
            sig_offsets.append(sig_offsets[-1] + len(sig))
            inits.append(float(s.init_noise_sigma))
    g = f.create_group("schedules")
    g["scheduler"] = string_array(names)
    g["config"] = string_array(configs)
    g["steps"] = np.array(steps, np.int32)
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
    ("euler_karras_10", "euler", sd(**KARRAS), 10),
    ("euler_expo_v_linspace_8", "euler", sd(prediction_type="v_prediction", timestep_spacing="linspace", **EXPO), 8),
    ("euler_a_karras_10", "euler_a", sd(**KARRAS), 10),
    ("euler_a_expo_trailing_7", "euler_a", sd(timestep_spacing="trailing", **EXPO), 7),
    ("lms_karras_10", "lms", sd(**KARRAS), 10),
    ("lms_expo_linspace_9", "lms", sd(timestep_spacing="linspace", **EXPO), 9),
    ("dpmpp_2m_karras_20", "dpmpp_2m", sd(**KARRAS), 20),
    ("dpmpp_2m_karras_v_8", "dpmpp_2m", sd(prediction_type="v_prediction", **KARRAS), 8),
    ("dpmpp_2m_expo_12", "dpmpp_2m", sd(**EXPO), 12),
    ("dpmpp_3m_karras_heun_16", "dpmpp_2m", sd(solver_order=3, solver_type="heun", **KARRAS), 16),
    ("heun_sd_10", "heun", sd(), 10),
    ("heun_karras_linspace_8", "heun", sd(timestep_spacing="linspace", **KARRAS), 8),
    ("heun_expo_v_6", "heun", sd(prediction_type="v_prediction", **EXPO), 6),
    ("heun_sample_clip_trailing_5", "heun", sd(prediction_type="sample", clip_sample=True, clip_sample_range=0.5,
                                              timestep_spacing="trailing"), 5),
    ("heun_defaults_1", "heun", {}, 1),
    ("dpmpp_2m_sde_sd_10", "dpmpp_2m_sde", sd(), 10),
    ("dpmpp_2m_sde_karras_20", "dpmpp_2m_sde", sd(**KARRAS), 20),
    ("dpmpp_2m_sde_heun_v_linspace_8", "dpmpp_2m_sde", sd(solver_type="heun", prediction_type="v_prediction",
                                                          timestep_spacing="linspace"), 8),
    ("dpmpp_3m_sde_expo_16", "dpmpp_2m_sde", sd(solver_order=3, **EXPO), 16),
    ("dpmpp_2m_sde_sigmamin_9", "dpmpp_2m_sde", sd(final_sigmas_type="sigma_min", timestep_spacing="trailing"), 9),
    ("dpmpp_2s_a_sd_10", "dpmpp_2s_a", sd(), 10),
    ("dpmpp_2s_a_karras_15", "dpmpp_2s_a", sd(**KARRAS), 15),
    ("dpmpp_2s_a_heun_v_8", "dpmpp_2s_a", sd(solver_type="heun", prediction_type="v_prediction"), 8),
    ("dpmpp_2s_a_expo_sample_7", "dpmpp_2s_a", sd(prediction_type="sample", **EXPO), 7),
    ("dpmpp_2s_a_sigmamin_nolof_12", "dpmpp_2s_a", sd(final_sigmas_type="sigma_min", lower_order_final=False), 12),
    ("dpm_sde_midpoint_sigmamin_10", "dpmpp_2m", sd(algorithm_type="sde-dpmsolver", final_sigmas_type="sigma_min"),
     10),
    ("dpm_sde_heun_v_karras_12", "dpmpp_2m", sd(algorithm_type="sde-dpmsolver", solver_type="heun",
                                                final_sigmas_type="sigma_min", prediction_type="v_prediction",
                                                **KARRAS), 12),
    ("dpm_sde_order1_trailing_6", "dpmpp_2m", sd(algorithm_type="sde-dpmsolver", solver_order=1,
                                                 final_sigmas_type="sigma_min", timestep_spacing="trailing"), 6),
    ("euler_beta_10", "euler", sd(**BETA), 10),
    ("euler_a_beta_8", "euler_a", sd(**BETA), 8),
    ("lms_beta_8", "lms", sd(**BETA), 8),
    ("dpmpp_2m_beta_12", "dpmpp_2m", sd(**BETA), 12),
    ("heun_beta_6", "heun", sd(**BETA), 6),
    ("dpmpp_2m_sde_beta_10", "dpmpp_2m_sde", sd(**BETA), 10),
    ("dpmpp_2s_a_beta_9", "dpmpp_2s_a", sd(**BETA), 9),
]


def write_trajectories(f):
    g = f.create_group("trajectories")
    g["cases"] = string_array([case for case, _, _, _ in TRAJECTORIES])
    for case, name, config, n in TRAJECTORIES:
        s = make(name, config)
        set_timesteps(name, s, config, n)
        gen = torch.Generator().manual_seed(1234)
        init_noise = torch.randn((2, 4, 4, 4), generator=gen, dtype=torch.float32)
        latents = init_noise * s.init_noise_sigma  # prepare_latents
        latents_init = latents.clone()
        drawn = []
        modules = [euler_a_module, multistep_module, singlestep_module]
        originals = [m.randn_tensor for m in modules]

        def recording_randn(*args, _original=originals[0], **kwargs):
            x = _original(*args, **kwargs)
            drawn.append(x.clone())
            return x

        for m in modules:
            m.randn_tensor = recording_randn
        inputs, outputs, after = [], [], []
        try:
            for t in s.timesteps:
                x_in = s.scale_model_input(latents, t)
                mo = synthetic_model(x_in, t)
                inputs.append(x_in.clone())
                outputs.append(mo.clone())
                extra = {"generator": gen} if noisy(name, config) else {}
                latents = s.step(mo, t, latents, return_dict=False, **extra)[0]
                after.append(latents.clone())
        finally:
            for m, o in zip(modules, originals):
                m.randn_tensor = o
        h = g.create_group(case)
        h["scheduler"] = string_array([name])
        h["config"] = string_array([json.dumps(config)])
        h["steps"] = np.array([n], np.int32)
        h["timesteps"] = timesteps_f64(s)
        h["sigmas"] = s.sigmas.numpy().astype(np.float32)
        h["init_noise"] = init_noise.numpy()
        h["init_noise_sigma"] = np.array([float(s.init_noise_sigma)], np.float32)
        h["latents_init"] = latents_init.numpy()
        h["model_input"] = torch.stack(inputs).numpy()
        h["model_output"] = torch.stack(outputs).numpy()
        h["latents"] = torch.stack(after).numpy()
        if noisy(name, config):
            assert len(drawn) == len(s.timesteps), (case, len(drawn))
            h["noise"] = torch.stack(drawn).numpy()
        else:
            assert not drawn
        print("%-32s %-12s %2d steps, |latents| <= %.3g" % (case, name, len(s.timesteps),
                                                            float(torch.stack(after).abs().max())))


IMG2IMG = [
    ("heun_karras_s06_8", "heun", sd(**KARRAS), 8, 0.6),
    ("heun_sd_s05_7", "heun", sd(), 7, 0.5),
    ("dpmpp_2s_a_s07_10", "dpmpp_2s_a", sd(), 10, 0.7),
    ("dpmpp_2s_a_karras_s05_9", "dpmpp_2s_a", sd(**KARRAS), 9, 0.5),
    ("dpmpp_2m_sde_karras_s06_10", "dpmpp_2m_sde", sd(**KARRAS), 10, 0.6),
    ("euler_a_expo_s05_8", "euler_a", sd(**EXPO), 8, 0.5),
    ("lms_karras_s075_8", "lms", sd(**KARRAS), 8, 0.75),
]


def write_img2img(f):
    g = f.create_group("img2img")
    g["cases"] = string_array([case for case, _, _, _, _ in IMG2IMG])
    for case, name, config, n, strength in IMG2IMG:
        s = make(name, config)
        set_timesteps(name, s, config, n)
        # StableDiffusionImg2ImgPipeline.get_timesteps
        init_timestep = min(int(n * strength), n)
        t_start = max(n - init_timestep, 0)
        begin = t_start * s.order
        timesteps = s.timesteps[begin:]
        s.set_begin_index(begin)
        gen = torch.Generator().manual_seed(4321)
        original = torch.randn((2, 4, 4, 4), generator=gen, dtype=torch.float32) * 0.5
        an_noise = torch.randn((2, 4, 4, 4), generator=gen, dtype=torch.float32)
        latents = s.add_noise(original, an_noise, timesteps[:1].repeat(2))
        latents_init = latents.clone()
        drawn = []
        modules = [euler_a_module, multistep_module, singlestep_module]
        originals = [m.randn_tensor for m in modules]

        def recording_randn(*args, _original=originals[0], **kwargs):
            x = _original(*args, **kwargs)
            drawn.append(x.clone())
            return x

        for m in modules:
            m.randn_tensor = recording_randn
        outputs, after = [], []
        try:
            for t in timesteps:
                x_in = s.scale_model_input(latents, t)
                mo = synthetic_model(x_in, t)
                outputs.append(mo.clone())
                extra = {"generator": gen} if noisy(name, config) else {}
                latents = s.step(mo, t, latents, return_dict=False, **extra)[0]
                after.append(latents.clone())
        finally:
            for m, o in zip(modules, originals):
                m.randn_tensor = o
        h = g.create_group(case)
        h["scheduler"] = string_array([name])
        h["config"] = string_array([json.dumps(config)])
        h["steps"] = np.array([n], np.int32)
        h["begin"] = np.array([begin], np.int32)
        h["original"] = original.numpy()
        h["add_noise_noise"] = an_noise.numpy()
        h["latents_init"] = latents_init.numpy()
        h["model_output"] = torch.stack(outputs).numpy()
        h["latents"] = torch.stack(after).numpy()
        if noisy(name, config):
            assert len(drawn) == len(timesteps), (case, len(drawn))
            h["noise"] = torch.stack(drawn).numpy()
        print("img2img %-26s %-12s begin %2d of %2d" % (case, name, begin, len(s.timesteps)))


def main(path):
    torch.set_num_threads(1)
    with h5py.File(path, "w") as f:
        f.attrs["versions"] = json.dumps({
            "diffusers": diffusers.__version__, "torch": torch.__version__, "numpy": np.__version__,
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        })
        write_betas(f)
        write_schedules(f)
        write_trajectories(f)
        write_img2img(f)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_sampler_ref.py OUT_H5")
    main(sys.argv[1])
