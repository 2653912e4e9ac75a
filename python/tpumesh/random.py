"""tpumesh.random: jax.random's threefry keys and draws, bit for bit.

Keys are raw uint32[2] arrays, what jax.random.key_data(key) or a legacy
jax.random.PRNGKey(seed) holds; split(key, n) gives uint32[n, 2]. Both of
JAX's threefry implementations: "partitionable" (the default from jax 0.5)
and "original" (jax < 0.5, jax_threefry_partitionable=False); each call
takes `impl=`, else tpumesh.config's jax_threefry_partitionable (True).
uniform and normal are float32, the bits XLA:CPU gives (mesh/prng.h).
"""

import numpy as np

from tpumesh import _check, _tpumesh
from tpumesh._config import config

__all__ = ["PRNGKey", "bits", "fold_in", "key", "key_data", "normal", "split", "uniform"]


def _impl(impl):
    if impl is None:
        return config.prng_impl()
    return _check.string("impl", impl)


def _key(key):
    if not isinstance(key, np.ndarray) and (not hasattr(key, "__array__") or isinstance(key, (str, bytes))):
        raise TypeError(f"key must be a uint32[2] array (tpumesh.random.key or jax.random.key_data), "
                        f"not {_check._what(key)}")
    k = np.asarray(key)
    if k.dtype.kind != "u" or k.dtype.itemsize != 4:  # uint32 in either byte order
        raise ValueError(f"a key is uint32[2] (jax.random.key_data), got dtype {k.dtype}")
    return k


def _shape(shape):
    if _check._is_int(shape):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"shape must be a tuple of ints, not {_check._what(shape)}")
    return [_check.integer(f"shape[{i}]", d, -(1 << 63), (1 << 63) - 1) for i, d in enumerate(shape)]


def _float32(dtype, what):
    if np.dtype(dtype) != np.float32:
        raise ValueError(f"tpumesh.random.{what} draws float32 only (jax.random's default), not {np.dtype(dtype)}")


def key(seed):
    """jax.random.key(seed)'s data, [seed >> 32, seed & 0xffffffff] (jax_enable_x64's; the
    same as the default for 0 <= seed < 2**32). A negative seed is its two's complement."""
    seed = _check.integer("seed", seed)
    if not -(1 << 63) <= seed < (1 << 64):
        raise ValueError(f"seed must be from -2**63 to 2**64 - 1, got {seed}")
    return _tpumesh.key_from_seed(seed & ((1 << 64) - 1))


PRNGKey = key


def key_data(key):
    """The key's uint32[2] (keys are raw data here already)."""
    return _key(key)


def split(key, num=2, *, impl=None):
    """jax.random.split(key, num): uint32[num, 2]."""
    return _tpumesh.split(_key(key), _check.integer("num", num, 0, (1 << 31) - 1), _impl(impl))


def fold_in(key, data, *, impl=None):
    """jax.random.fold_in(key, data) (the same in both implementations)."""
    data = _check.integer("data", data)
    if not 0 <= data < (1 << 32):
        raise ValueError(f"fold_in data must be from 0 to 2**32 - 1, got {data}")
    return _tpumesh.fold_in(_key(key), data, _impl(impl))


def bits(key, shape=(), dtype=np.uint32, *, impl=None):
    """jax.random.bits(key, shape, jnp.uint32)."""
    if np.dtype(dtype) != np.uint32:
        raise ValueError(f"tpumesh.random.bits draws uint32 only, not {np.dtype(dtype)}")
    return _tpumesh.bits(_key(key), _shape(shape), _impl(impl))


def uniform(key, shape=(), dtype=np.float32, minval=0.0, maxval=1.0, *, impl=None):
    """jax.random.uniform(key, shape, jnp.float32, minval, maxval)."""
    _float32(dtype, "uniform")
    return _tpumesh.uniform(_key(key), _shape(shape), _check.number("minval", minval), _check.number("maxval", maxval), _impl(impl))


def normal(key, shape=(), dtype=np.float32, *, impl=None):
    """jax.random.normal(key, shape, jnp.float32)."""
    _float32(dtype, "normal")
    return _tpumesh.normal(_key(key), _shape(shape), _impl(impl))
