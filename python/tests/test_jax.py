"""tpumesh.jax live: functions lowered by the jax installed here, run on the
emulated mesh, compared with jax's own outputs on the CPU. Those tests are
deselected where jax is not importable (conftest.py); tests/data's stored
programs cover the same path there (test_stablehlo.py). Without jax,
tpumesh.jax raises a clear ImportError (tested everywhere)."""

import os

# pmap over 8 host devices, as the exported programs were made (before jax
# is first imported).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import numpy as np
import pytest

import tpumesh

needs_jax = pytest.mark.needs_jax


def close(got, want, rel=1e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    assert np.abs(got - want).max(initial=0) <= rel * max(np.abs(want).max(initial=0), 1e-30)


@needs_jax
def test_jitted_mlp():
    import jax
    import jax.numpy as jnp

    def mlp(params, x):
        (w1, b1), (w2, b2) = params
        return jnp.tanh(x @ w1 + b1) @ w2 + b2

    k = jax.random.split(jax.random.key(0), 3)
    params = ((jax.random.normal(k[0], (16, 32)), jnp.zeros(32)), (jax.random.normal(k[1], (32, 4)), jnp.ones(4)))
    x = jax.random.normal(k[2], (8, 16))
    out, report = tpumesh.jax.run(jax.jit(mlp), params, x)
    close(out, mlp(params, x))
    assert report["summary"]["devices"] == 1
    priced = tpumesh.jax.price(mlp, params, x)
    assert priced["summary"]["modelled_seconds"] > 0


@needs_jax
def test_pmapped_psum_bit_for_bit():
    import jax

    n = jax.local_device_count()
    f = jax.pmap(lambda x: jax.lax.psum(x, "i") * 2.0, axis_name="i")
    x = np.arange(n * 6, dtype=np.float32).reshape(n, 6) / 7
    out, report = tpumesh.jax.run(f, x)
    assert np.asarray(out).tobytes() == np.asarray(f(x)).tobytes()
    assert report["summary"]["devices"] == n


@needs_jax
def test_jitted_shard_map_bit_for_bit():
    import jax
    from jax.sharding import Mesh, PartitionSpec as P

    try:
        from jax import shard_map
    except ImportError:  # jax < 0.7
        from jax.experimental.shard_map import shard_map
    if jax.device_count() < 8:
        pytest.skip("needs 8 host devices (XLA_FLAGS was set after jax was imported)")
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))
    f = jax.jit(shard_map(lambda a: jax.lax.psum(a, "y") * 2, mesh=mesh, in_specs=P("x", "y"),
                          out_specs=P("x", None)))
    x = np.arange(8 * 12, dtype=np.float32).reshape(8, 12) / 3
    out, report = tpumesh.jax.run(f, x)
    assert np.asarray(out).tobytes() == np.asarray(f(x)).tobytes()
    assert report["summary"]["devices"] == 8


@needs_jax
def test_outputs_keep_the_function_structure():
    import jax.numpy as jnp

    def f(x, unused):
        return {"double": x * 2, "pair": (x + 1, x.sum())}

    x = np.arange(6, dtype=np.float32)
    out, _ = tpumesh.jax.run(f, x, np.zeros(3, np.float32))
    assert set(out) == {"double", "pair"}
    np.testing.assert_array_equal(out["pair"][0], x + 1)
    assert float(out["pair"][1]) == float(jnp.sum(x))


@needs_jax
def test_jitted_conv_block():
    """A UNet block's ops in plain jax (convolutions, a group norm, attention over a context, a strided
    conv and a nearest upsample): what the Flax UNet below runs, with no diffusers."""
    import jax
    import jax.numpy as jnp

    k = jax.random.split(jax.random.key(3), 4)
    x = jax.random.normal(k[0], (2, 4, 16, 16))
    w1 = jax.random.normal(k[1], (8, 4, 3, 3)) * 0.2
    w2 = jax.random.normal(k[2], (4, 8, 3, 3)) * 0.2
    ctx = jax.random.normal(k[3], (2, 7, 8))
    dims = ("NCHW", "OIHW", "NCHW")

    def f(x, w1, w2, ctx):
        h = jax.lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dims)
        g = h.reshape(2, 2, 4, 16, 16)
        g = (g - g.mean((2, 3, 4), keepdims=True)) * jax.lax.rsqrt(g.var((2, 3, 4), keepdims=True) + 1e-5)
        h = jax.nn.silu(g.reshape(h.shape))
        q = h.reshape(2, 8, 256).transpose(0, 2, 1)
        a = jax.nn.softmax(q @ ctx.transpose(0, 2, 1) / jnp.sqrt(8.0), axis=-1) @ ctx
        h = h + a.transpose(0, 2, 1).reshape(h.shape)
        h = jax.lax.conv_general_dilated(h, w2, (2, 2), ((1, 1), (1, 1)), dimension_numbers=dims)
        return jnp.repeat(jnp.repeat(h, 2, axis=2), 2, axis=3) + x

    out, report = tpumesh.jax.run(f, x, w1, w2, ctx)
    want = jax.jit(f)(x, w1, w2, ctx)
    assert np.abs(np.asarray(want)).max() > 0.1
    close(out, want)
    assert report["summary"]["devices"] == 1


@needs_jax
@pytest.mark.needs_flax_unet
def test_tiny_flax_unet():
    import diffusers.models.unets.unet_2d_condition_flax as flax
    import jax
    import jax.numpy as jnp

    unet = flax.FlaxUNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4,
                                         block_out_channels=(32, 64), layers_per_block=1, attention_head_dim=8,
                                         cross_attention_dim=32,
                                         down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                         up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))
    sample = jax.random.normal(jax.random.key(1), (2, 4, 16, 16))
    t = jnp.array([10, 500], dtype=jnp.int32)
    ctx = jax.random.normal(jax.random.key(2), (2, 77, 32))
    params = unet.init(jax.random.key(0), sample, t, ctx)

    def f(p, s, t, c):
        return unet.apply(p, s, t, c).sample

    out, _ = tpumesh.jax.run(f, params, sample, t, ctx)
    close(out, jax.jit(f)(params, sample, t, ctx))


# Runs with or without jax: the import is faked away.
def test_without_jax_a_clear_import_error(monkeypatch):
    import importlib

    real = importlib.import_module

    def no_jax(name, *args):
        if name == "jax":
            raise ImportError("No module named 'jax'")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_jax)
    with pytest.raises(ImportError, match="tpumesh.jax lowers functions with jax, which is not importable"):
        tpumesh.jax.run(lambda x: x, np.zeros(2, np.float32))
