#!/usr/bin/env python3
"""Writes tests/data/prng_ref.json: what JAX's own PRNG gives, for the C++ tests.

Offline tool (not used by the build or the tests). Run in a venv with jax:
  python3 -m venv /tmp/jaxref && /tmp/jaxref/bin/pip install jax numpy
  /tmp/jaxref/bin/python scripts/refdata/make_prng_ref.py tests/data/prng_ref.json
Floats are stored as their uint32 bit patterns so the tests compare bits.
"""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

# x64 on, so that key(seed) = [seed >> 32, seed & 0xffffffff] for 64-bit seeds
# (with x64 off JAX truncates a Python int seed to 32 bits). Every array
# asked for below is explicitly 32-bit, so x64 changes nothing else.
jax.config.update("jax_enable_x64", True)

SEEDS = [0, 1, 42, 2**32 + 7, 0xDEADBEEFCAFEF00D]


def key_of(seed):
    # jax.random.PRNGKey takes a Python int; uint64 seeds above 2**63 go in as
    # their int64 two's complement, which JAX splits the same way.
    if seed >= 2**63:
        seed -= 2**64
    return jax.random.PRNGKey(np.int64(seed))


def u32(a):
    return [int(v) for v in np.asarray(a, dtype=np.uint32).ravel()]


def f32bits(a):
    return [int(v) for v in np.asarray(a, dtype=np.float32).ravel().view(np.uint32)]


def cases(partitionable):
    jax.config.update("jax_threefry_partitionable", partitionable)
    out = []
    for seed in SEEDS:
        k = key_of(seed)
        c = {"seed": str(seed), "key": u32(k)}
        c["split"] = {str(n): u32(jax.random.split(k, n)) for n in (2, 3, 8)}
        c["fold_in"] = {str(d): u32(jax.random.fold_in(k, d)) for d in (0, 1, 12345)}
        c["bits"] = {"x".join(map(str, s)): u32(jax.random.bits(k, s, jnp.uint32)) for s in [(5,), (2, 3), (7,)]}
        shapes = [(8,), (3, 5), (1, 4, 8, 8)]
        c["uniform"] = {"x".join(map(str, s)): f32bits(jax.random.uniform(k, s, jnp.float32)) for s in shapes}
        c["uniform_m2_3"] = f32bits(jax.random.uniform(k, (9,), jnp.float32, -2.0, 3.0))
        c["normal"] = {"x".join(map(str, s)): f32bits(jax.random.normal(k, s, jnp.float32)) for s in shapes}
        out.append(c)
    return out


def main():
    # Threefry-2x32-20 known answers (Random123 kat_vectors), through JAX.
    from jax.extend import random as jprng
    kat = []
    for key, ctr in [((0, 0), (0, 0)),
                     ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF)),
                     ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3))]:
        o = jprng.threefry_2x32(np.array(key, np.uint32), np.array(ctr, np.uint32))
        kat.append({"key": list(key), "ctr": list(ctr), "out": u32(o)})
    ref = {
        "jax_version": jax.__version__,
        "threefry_kat_via_jax": kat,
        "original": cases(False),
        "partitionable": cases(True),
    }
    with open(sys.argv[1], "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
