"""tpumesh.random against the numbers JAX produced (tests/data/prng_ref.json,
the known answers tests/mesh/prng_test.cc checks): keys, split, fold_in,
bits, uniform and normal, bit for bit, in both threefry implementations."""

import json

import numpy as np
import pytest

import tpumesh
from tpumesh import random

from conftest import DATA


@pytest.fixture(scope="module")
def ref():
    return json.loads((DATA / "prng_ref.json").read_text())


def shape_of(text):
    return tuple(int(d) for d in text.split("x"))


def same_bits(got, want):
    got = np.ascontiguousarray(got)
    assert got.size == len(want)
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint32), np.array(want, dtype=np.uint32))


@pytest.mark.parametrize("impl", ["original", "partitionable"])
def test_every_case_matches_jax(ref, impl):
    cases = 0
    assert len(ref[impl]) == 5
    for c in ref[impl]:
        key = random.key(int(c["seed"]))
        assert key.dtype == np.uint32 and key.shape == (2,)
        same_bits(key, c["key"])
        for n, want in c["split"].items():
            keys = random.split(key, int(n), impl=impl)
            assert keys.shape == (int(n), 2)
            same_bits(keys, want)
        for d, want in c["fold_in"].items():
            same_bits(random.fold_in(key, int(d), impl=impl), want)
        for s, want in c["bits"].items():
            same_bits(random.bits(key, shape_of(s), impl=impl), want)
        for s, want in c["uniform"].items():
            u = random.uniform(key, shape_of(s), impl=impl)
            assert u.dtype == np.float32 and u.shape == shape_of(s)
            same_bits(u, want)
        for s, want in c["normal"].items():
            same_bits(random.normal(key, shape_of(s), impl=impl), want)
        same_bits(random.uniform(key, (9,), minval=-2.0, maxval=3.0, impl=impl), c["uniform_m2_3"])
        cases += 17
    assert cases == 5 * 17


def test_seed_keys(ref):
    for c in ref["seed_keys"]:
        same_bits(random.key(int(c["seed"])), c["x64"])


def test_documented_split_values():
    # mesh/prng.h's contract: split(key(0), 2) in both modes.
    same_bits(random.split(random.key(0), 2, impl="original"), [4146024105, 967050713, 2718843009, 1272950319])
    same_bits(random.split(random.key(0), 2, impl="partitionable"), [1797259609, 2579123966, 928981903, 3453687069])


def test_config_chooses_the_implementation():
    key = random.key(0)
    try:
        tpumesh.config.update("jax_threefry_partitionable", False)
        np.testing.assert_array_equal(random.split(key), random.split(key, impl="original"))
    finally:
        tpumesh.config.update("jax_threefry_partitionable", True)
    np.testing.assert_array_equal(random.split(key), random.split(key, impl="partitionable"))


def test_bad_arguments_are_value_errors():
    key = random.key(0)
    with pytest.raises(ValueError, match="num"):
        random.split(key, -1)
    with pytest.raises(ValueError, match="uint32"):
        random.split(np.zeros(3, dtype=np.uint32))
    with pytest.raises(ValueError, match="impl"):
        random.normal(key, (2,), impl="threefry")
    with pytest.raises(ValueError):
        random.normal(key, (2, -1))
    with pytest.raises(ValueError, match="float32"):
        random.normal(key, (2,), dtype=np.float64)
    with pytest.raises(ValueError, match="seed"):
        random.key(1 << 64)
    # -1 is its two's complement, as jax with x64
    same_bits(random.key(-1), [0xFFFFFFFF, 0xFFFFFFFF])
