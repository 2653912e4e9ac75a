"""The seed notebook's steps ("Stable Diffusion in JAX/Flax") on tpumesh, in
Python, on the embedded default model (docs/python.md, docs/jax-notebook.md).

Each cell (# %%) is one notebook step: devices, load, replicate, shard the
prompts, split the key, pmap (one generate over the mesh), the image grid;
then a seeds x steps table. It writes OUT_DIR/grid.png (the 8 images, 2 x 4,
enlarged 4x), OUT_DIR/images/ (the PNGs `tpumesh generate` would write) and
OUT_DIR/seeds_x_steps.png (rows: 5, 10, 25, 50 steps; columns: seeds 0-7),
in 14-18 s on 2 busy vCPUs (docs/python.md).

    PYTHONPATH=build/release/python python3 python/examples/seed_steps.py [OUT_DIR]
"""

import pathlib
import sys
import time

import numpy as np

import tpumesh

out_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "out-seed-steps")
out_dir.mkdir(parents=True, exist_ok=True)
t0 = time.perf_counter()

# %% 1. Devices: jax.device_count() -> 8, jax.devices()
devices = tpumesh.devices()  # a v5e-8 (2x4), emulated
print(devices)
num_devices = len(devices)

# %% 2. Load the pipeline: FlaxStableDiffusionPipeline.from_pretrained(...)
pipe = tpumesh.Pipeline.default()  # the embedded shapes model (32x32 pictures)
print(pipe, "- it knows:", " ".join(pipe.vocabulary()))

# %% 3. Replicate the parameters: p_params = replicate(params)
# The model is placed on every device of the mesh it first runs on (data=8:
# each device holds all of it, as replicate() puts a copy in each HBM; the
# report's param_bytes_per_device says how much).
mesh = f"data={num_devices}"

# %% 4. Shard the prompts: prompt_ids = shard(prepare_inputs([prompt] * 8))
prompt = "a yellow triangle on a blue background"
prompts = [prompt] * num_devices  # one per device; a prompt each would do too
print("prompts per device:", np.array(prompts).reshape(num_devices, -1).shape)

# %% 5. Split the key: rng = jax.random.split(PRNGKey(seed), jax.device_count())
seed = 0
rng = tpumesh.random.split(tpumesh.random.key(seed), num_devices)
print("keys:", rng.shape, rng.dtype, "device 0:", rng[0])

# %% 6. pmap: images = pipeline(prompt_ids, p_params, rng, jit=True)[0]
out = pipe.generate(prompts, seed=seed, steps=50, mesh=mesh)
print(out)
print(f"host {out.run_seconds:.2f} s (plan built in {out.compile_seconds:.2f} s); "
      f"modelled on the v5e: {out.modelled_seconds * 1e3:.3f} ms")
# Each device started from normal(rng[d], (1, 4, h, w)), JAX's bits:
latent_shape = (1, *out.initial_latents.shape[1:])  # (1, 4, 16, 16) for 32x32 images
for d in range(num_devices):
    assert np.array_equal(out.initial_latents[d:d + 1], tpumesh.random.normal(rng[d], latent_shape))
# Run it again: the plan is cached, as jit's compiled function is.
again = pipe.generate(prompts, seed=seed, steps=50, mesh=mesh)
assert not again.compiled and np.array_equal(again.images, out.images)

summary = out.report["summary"]
print("report:", {k: summary[k] for k in ("modelled_seconds", "images", "mesh", "param_bytes_per_device", "flops",
                                          "mxu_utilisation")})


# %% 7. The image grid: make_image_grid(images, rows=2, cols=4)
def image_grid(images, rows, cols, scale=4):
    b, h, w, c = images.shape
    grid = images.reshape(rows, cols, h, w, c).transpose(0, 2, 1, 3, 4).reshape(rows * h, cols * w, c)
    return grid.repeat(scale, axis=0).repeat(scale, axis=1)


tpumesh.io.write_png(out_dir / "grid.png", image_grid(out.images, 2, 4))
out.save(out_dir / "images")  # image_00.png ... grid.png, as `tpumesh generate -o` writes them

# %% 8. Seeds x steps: a row per step count, a column per seed. Seed s's
# start is what a one-image run with that seed draws, normal(split(key(s),
# 1)[0], ...); the 8 seeds of a row run on the 8 devices at once (latents=).
seeds = list(range(num_devices))
latents = np.concatenate([tpumesh.random.normal(tpumesh.random.split(tpumesh.random.key(s), 1)[0], latent_shape)
                          for s in seeds])
rows = []
for steps in (5, 10, 25, 50):
    row = pipe.generate(prompts, steps=steps, mesh=mesh, latents=latents)
    rows.append(row.images)
    print(f"steps {steps:2d}: host {row.run_seconds:.2f} s, modelled {row.modelled_seconds * 1e3:.3f} ms")
table = np.stack(rows)  # [steps, seeds, h, w, 3]
tpumesh.io.write_png(out_dir / "seeds_x_steps.png", image_grid(table.reshape(-1, *table.shape[2:]), len(rows), len(seeds)))

print(f"wrote {out_dir}/grid.png, {out_dir}/seeds_x_steps.png and {out_dir}/images/ in {time.perf_counter() - t0:.1f} s")
