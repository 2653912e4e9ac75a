#!/usr/bin/env python3
"""Writes tests/data/prng_ref.json: what JAX's own PRNG gives, for the C++ tests.

Offline tool (not used by the build or the tests). Run in a venv outside the
repository, with CPU jax from PyPI:
  python3 -m venv /tmp/jaxenv && /tmp/jaxenv/bin/pip install jax
  /tmp/jaxenv/bin/python scripts/refdata/make_prng_ref.py tests/data/prng_ref.json
The file records the jax/jaxlib versions it was made with (0.10.2 for the
committed one) and the machine: uniform and normal are what XLA:CPU computes on
x86-64 with FMA. Floats are stored as their uint32 bit patterns so the tests
compare bits.

Contents:
  threefry_kat      Random123 threefry2x32_20 known answers, checked here
                    against JAX's own threefry_2x32.
  seed_keys         key_data(key(seed)) with jax_enable_x64 on and off.
  original,         per seed and implementation: key, split 2/3/8, fold_in,
  partitionable     bits, uniform, normal (shapes include an odd size and a
                    latent-like (1, 4, 8, 8)).
  from_bits         the float32 value JAX's uniform(-2, 3) and normal give for
                    a random word: a table of chosen words (branch boundaries of
                    erf_inv/log1p, the ends of the range) and, for all 2^23
                    words that differ (bits >> 9), one digest per block.
"""
import importlib.metadata
import json
import platform
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src.lax import special as lax_special

SEEDS = [0, 1, 42, 2**32 + 7, 0xDEADBEEFCAFEF00D]
KEY_SEEDS = [0, 1, 42, 2**31, 2**32 + 7, -1, -5, -(2**40) - 3, 2**63 - 1]

# Random123 kat_vectors, threefry2x32 with 20 rounds: (ctr, key, expected).
RANDOM123_KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
]

NUM_WORDS = 1 << 23  # distinct inputs of uniform/normal: bits >> 9
NUM_BLOCKS = 64


def u32(a):
    return [int(v) for v in np.asarray(a, dtype=np.uint32).ravel()]


def f32bits(a):
    return [int(v) for v in np.asarray(a, dtype=np.float32).ravel().view(np.uint32)]


def threefry_kat():
    from jax.extend import random as jprng
    out = []
    for ctr, key, want in RANDOM123_KAT:
        got = u32(jprng.threefry_2x32(np.array(key, np.uint32), np.array(ctr, np.uint32)))
        assert got == list(want), (ctr, key, got, want)
        out.append({"key": list(key), "ctr": list(ctr), "out": got})
    return out


def seed_keys():
    """key(seed) in the default x32 mode, then in x64 mode (left on after)."""
    x32 = {s: u32(jax.random.key_data(jax.random.key(s))) for s in KEY_SEEDS}
    jax.config.update("jax_enable_x64", True)
    x64 = {s: u32(jax.random.key_data(jax.random.key(s))) for s in KEY_SEEDS}
    return [{"seed": str(s), "x64": x64[s], "x32": x32[s]} for s in KEY_SEEDS]


def key_of(seed):
    # With x64 on, key(seed) = [seed >> 32, seed & 0xffffffff]. uint64 seeds
    # above 2**63 go in as their int64 two's complement, split the same way.
    if seed >= 2**63:
        seed -= 2**64
    return jax.random.PRNGKey(np.int64(seed))


def cases(partitionable):
    jax.config.update("jax_threefry_partitionable", partitionable)
    out = []
    for seed in SEEDS:
        k = key_of(seed)
        c = {"seed": str(seed), "key": u32(k)}
        c["split"] = {str(n): u32(jax.random.split(k, n)) for n in (2, 3, 8)}
        c["fold_in"] = {str(d): u32(jax.random.fold_in(k, d)) for d in (0, 1, 12345)}
        c["bits"] = {"x".join(map(str, s)): u32(jax.random.bits(k, s, jnp.uint32))
                     for s in [(5,), (2, 3), (7,)]}
        shapes = [(8,), (3, 5), (1, 4, 8, 8)]
        c["uniform"] = {"x".join(map(str, s)): f32bits(jax.random.uniform(k, s, jnp.float32))
                        for s in shapes}
        c["uniform_m2_3"] = f32bits(jax.random.uniform(k, (9,), jnp.float32, -2.0, 3.0))
        c["normal"] = {"x".join(map(str, s)): f32bits(jax.random.normal(k, s, jnp.float32))
                       for s in shapes}
        out.append(c)
    return out


# jax.random._uniform and _normal_real after the random bits, op for op, so
# that every word can be fed in. main() checks them against the real thing.
def _uniform_from_bits(bits, minval, maxval):
    float_bits = lax.shift_right_logical(bits, jnp.array(32 - 23, np.uint32))
    float_bits = lax.bitwise_or(
        float_bits, jnp.asarray(np.array(1.0, np.float32).view(np.uint32), dtype=np.uint32))
    floats = lax.bitcast_convert_type(float_bits, np.float32) - jnp.array(1.0, np.float32)
    minval = lax.convert_element_type(minval, np.float32)
    maxval = lax.convert_element_type(maxval, np.float32)
    return lax.max(minval, floats * (maxval - minval) + minval)


@jax.jit
def uniform_from_bits(bits, minval, maxval):
    return _uniform_from_bits(bits, minval, maxval)


@jax.jit
def normal_from_bits(bits):
    lo = np.nextafter(np.array(-1.0, np.float32), np.array(0.0, np.float32), dtype=np.float32)
    u = _uniform_from_bits(bits, lo, np.array(1.0, np.float32))
    return lax.mul(np.array(np.sqrt(2), np.float32), lax_special.erf_inv(u))


def check_from_bits_against_jax():
    for partitionable in (False, True):
        jax.config.update("jax_threefry_partitionable", partitionable)
        for seed in (0, 3, 99):
            k = jax.random.PRNGKey(seed)
            n = 1 << 20
            bits = jax.random.bits(k, (n,), jnp.uint32)
            assert f32bits(jax.random.normal(k, (n,), jnp.float32)) == f32bits(normal_from_bits(bits))
            assert (f32bits(jax.random.uniform(k, (n,), jnp.float32, -2.0, 3.0)) ==
                    f32bits(uniform_from_bits(bits, np.float32(-2.0), np.float32(3.0))))


def mix64(z):
    """splitmix64's finalizer on a uint64 array (wrapping arithmetic)."""
    z = z.astype(np.uint64)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def block_digests(values):
    """Per block: sum over words m of mix64((m << 32) | bits(value[m])) mod 2^64."""
    m = np.arange(NUM_WORDS, dtype=np.uint64)
    h = mix64((m << np.uint64(32)) | values.view(np.uint32).astype(np.uint64))
    sums = h.reshape(NUM_BLOCKS, -1).sum(axis=1, dtype=np.uint64)  # wraps
    return [f"{int(s):016x}" for s in sums]


def chosen_words():
    """Words around erf_inv's branch points, u = 0 and the ends of the range."""
    m = np.arange(NUM_WORDS, dtype=np.float64)
    lo = float(np.nextafter(np.float32(-1), np.float32(0)))
    u = (m / NUM_WORDS) * 2.0 + lo
    picks = set(range(0, 4)) | set(range(NUM_WORDS - 4, NUM_WORDS))
    w = -np.log1p(-u * u)
    for cond in (w < 5.0, u * u < np.sqrt(2.0) - 1.0, u < 0.0):
        edges = np.nonzero(np.diff(cond.astype(np.int8)))[0]
        for e in edges:
            picks |= set(range(max(0, int(e) - 3), min(NUM_WORDS, int(e) + 5)))
    picks |= set(range(0, NUM_WORDS, NUM_WORDS // 64))
    return sorted(picks)


def from_bits():
    words = (np.arange(NUM_WORDS, dtype=np.uint32) << np.uint32(9))
    normal = np.asarray(normal_from_bits(words), dtype=np.float32)
    uniform = np.asarray(uniform_from_bits(words, np.float32(-2.0), np.float32(3.0)), dtype=np.float32)
    picks = chosen_words()
    return {
        "num_blocks": NUM_BLOCKS,
        "words": [int(m) << 9 for m in picks],
        "normal": f32bits(normal[picks]),
        "uniform_m2_3": f32bits(uniform[picks]),
        "normal_digests": block_digests(normal),
        "uniform_m2_3_digests": block_digests(uniform),
    }


def main():
    ref = {
        "jax_version": jax.__version__,
        "jaxlib_version": importlib.metadata.version("jaxlib"),
        "made_on": f"{jax.default_backend()} {platform.machine()}",
        "threefry_kat": threefry_kat(),
        "seed_keys": seed_keys(),  # turns x64 on for the rest
        "original": cases(False),
        "partitionable": cases(True),
    }
    check_from_bits_against_jax()
    ref["from_bits"] = from_bits()
    with open(sys.argv[1], "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
