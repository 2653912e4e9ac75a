"""tpumesh as JAX's own backend (docs/pjrt.md): the PJRT plugin found by JAX's
plugin discovery (jax_plugins.tpumesh, from the build's python/ folder on
PYTHONPATH, or installed by `pip install .`), its devices as jax.devices()
shows them. Each case runs in a fresh interpreter: JAX_PLATFORMS and the
plugin's configuration are read once, at jax's backend setup. Deselected
where jax is not importable (conftest.py)."""

import json
import os
import subprocess
import sys

import pytest

import tpumesh

needs_jax = pytest.mark.needs_jax

# Prints what JAX shows of its devices, as JSON.
PROBE = """
import json, sys
import jax
platform = sys.argv[1] if len(sys.argv) > 1 else None
devices = jax.devices(platform) if platform else jax.devices()
print(json.dumps({
    "default_backend": jax.default_backend(),
    "count": len(devices),
    "devices": [{"id": d.id, "platform": d.platform, "kind": d.device_kind, "coords": list(d.coords),
                 "core_on_chip": d.core_on_chip, "repr": repr(d),
                 "bytes_limit": d.memory_stats()["bytes_limit"]} for d in devices],
}))
"""


def run_jax(env=None, args=()):
    full = dict(os.environ)
    for k in ("JAX_PLATFORMS", "TPUMESH_PJRT_CHIP", "TPUMESH_PJRT_DEVICES", "TPUMESH_PJRT_TOPOLOGY", "XLA_FLAGS"):
        full.pop(k, None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-c", PROBE, *args], env=full, capture_output=True, text=True,
                          timeout=300)


def probe(env=None, args=()):
    r = run_jax(env, args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


@needs_jax
def test_jax_platforms_tpumesh_lists_a_v5e_2x4():
    got = probe({"JAX_PLATFORMS": "tpumesh"})
    ours = tpumesh.devices()  # the module's own v5e-8, as the CLI places it
    assert got["default_backend"] == "tpumesh"
    assert got["count"] == 8 == len(ours)
    for d, o in zip(got["devices"], ours):
        assert d["id"] == o.id
        assert d["platform"] == "tpumesh"
        assert d["kind"] == "TPU v5 lite" == o.device_kind.removesuffix(" (emulated)")
        assert tuple(d["coords"]) == o.coords
        assert d["core_on_chip"] == o.core_on_chip == 0
        assert d["bytes_limit"] == o.hbm_bytes == 16 << 30
    assert [tuple(d["coords"]) for d in got["devices"]] == [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0),
                                                              (0, 2, 0), (1, 2, 0), (0, 3, 0), (1, 3, 0)]
    assert got["devices"][1]["repr"] == "TpuDevice(id=1, process_index=0, coords=(1,0,0), core_on_chip=0)"


@needs_jax
def test_chip_and_topology_from_the_environment():
    got = probe({"JAX_PLATFORMS": "tpumesh", "TPUMESH_PJRT_CHIP": "v4", "TPUMESH_PJRT_TOPOLOGY": "2x2x1"})
    ours = tpumesh.devices("v4", "2x2x1")
    assert got["count"] == 4 == len(ours)
    assert [d["kind"] for d in got["devices"]] == [o.device_kind.removesuffix(" (emulated)") for o in ours]
    assert [tuple(d["coords"]) for d in got["devices"]] == [o.coords for o in ours]
    assert [d["bytes_limit"] for d in got["devices"]] == [o.hbm_bytes for o in ours]
    assert probe({"JAX_PLATFORMS": "tpumesh", "TPUMESH_PJRT_DEVICES": "4"})["count"] == 4


@needs_jax
def test_cpu_stays_jaxs_default():
    # Installed but not asked for: jax's default devices are still the CPU's; ours by name.
    got = probe(args=("tpumesh",))
    assert got["default_backend"] == "cpu"
    assert got["count"] == 8 and {d["platform"] for d in got["devices"]} == {"tpumesh"}


@needs_jax
def test_bad_configuration_is_an_exception_with_our_message():
    r = run_jax({"JAX_PLATFORMS": "tpumesh", "TPUMESH_PJRT_DEVICES": "zero"})
    assert r.returncode == 1, r.stderr  # a Python exception, not a crash
    assert "TPUMESH_PJRT_DEVICES must be a device count from 1 to 1024, got 'zero'" in r.stderr


# jax.device_put onto each device and back, as the plugin's buffers hold them.
ROUND_TRIP = """
import json
import numpy as np
import jax
import jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
devices = jax.devices()
cases = [np.arange(4.0), np.arange(12, dtype=np.int32).reshape(3, 4).T, np.array([True, False]),
         np.linspace(-2, 2, 6, dtype=jnp.bfloat16).reshape(2, 3), np.array(7, np.uint8), np.zeros((0, 3), np.float32)]
out = []
for i, x in enumerate(cases):
    y = jax.device_put(x, devices[i % len(devices)])
    back = np.asarray(y)
    out.append({"equal": bool(back.dtype == x.dtype and back.shape == x.shape and np.array_equal(back, x)),
                "device": next(iter(y.devices())).id, "in_use": y.devices().pop().memory_stats()["bytes_in_use"]})
moved = jax.device_put(jax.device_put(np.arange(6.0).reshape(2, 3), devices[2]), devices[6])
out.append({"equal": bool(np.array_equal(np.asarray(moved), np.arange(6.0).reshape(2, 3))),
            "device": next(iter(moved.devices())).id, "in_use": devices[6].memory_stats()["bytes_in_use"]})
y = jax.device_put(np.ones((1024,), np.float32), devices[7])
before = devices[7].memory_stats()["bytes_in_use"]
y.delete()
out.append({"freed": before - devices[7].memory_stats()["bytes_in_use"]})
print(json.dumps(out))
"""


@needs_jax
def test_device_put_and_back():
    env = dict(os.environ, JAX_PLATFORMS="tpumesh")
    r = subprocess.run([sys.executable, "-c", ROUND_TRIP], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.splitlines()[-1])
    *cases, freed = got
    assert all(c["equal"] for c in cases), cases
    assert [c["device"] for c in cases] == list(range(len(cases) - 1)) + [6]  # the last moved from device 2
    assert cases[0]["in_use"] == 4 * 8  # f64 under x64: the emulated device counts what it holds
    assert freed == {"freed": 4096}


@needs_jax
def test_portable_artifact_decodes_to_text_our_reader_runs():
    # Route (b) of docs/pjrt.md: the bytes compile receives (a portable artifact of the lowered module, at
    # the version the plugin advertises) decoded by this process's jaxlib, then read and run by hlo/:
    # the same outputs, bit for bit, and the same priced report as the lowered module's own text.
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir.dialects import stablehlo

    from jax_plugins.tpumesh import _decode

    def f(x, w):
        return jnp.tanh(x @ w) * 2.0 + jnp.sum(x, axis=1, keepdims=True)

    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    w = np.linspace(0.5, -0.5, 48, dtype=np.float32).reshape(8, 6)
    lowered = jax.jit(f).lower(x, w)
    artifact = stablehlo.serialize_portable_artifact_str(
        jax_mlir.module_to_bytecode(lowered.compiler_ir("stablehlo")), "1.17.0")
    assert artifact[:4] == b"ML\xefR" and b"StableHLO_v1.17.0" in artifact[:32]
    assert _decode.current_version() == stablehlo.get_current_version()
    text = _decode.program_text(artifact)
    assert "stablehlo.dot_general" in text and "func.func public @main" in text
    decoded = tpumesh.stablehlo.run(text, x, w)
    lowered_run = tpumesh.stablehlo.run(lowered.as_text(), x, w)
    assert len(decoded.outputs) == 1
    assert np.array_equal(decoded.outputs[0], lowered_run.outputs[0])
    assert decoded.report["summary"]["modelled_seconds"] == lowered_run.report["summary"]["modelled_seconds"]
    np.testing.assert_allclose(decoded.outputs[0], np.asarray(jax.jit(f)(x, w)), rtol=1e-5, atol=1e-6)
    assert _decode.program_text(text.encode()) == text  # text passes through


# Runs `code` in a fresh interpreter with JAX_PLATFORMS=tpumesh,cpu; returns
# its last stdout line as JSON.
def run_code(code, env=None):
    full = dict(os.environ, JAX_PLATFORMS="tpumesh,cpu")
    full.update(env or {})
    r = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


# The same functions on tpumesh's devices (the default) and on JAX's CPU.
SAME_AS_CPU = """
import json
import numpy as np
import jax, jax.numpy as jnp

def mlp_grad(w, x):
    return jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w) ** 2))(w)

w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
x = np.linspace(0, 1, 8, dtype=np.float32).reshape(2, 4)
cases = {
    "eager": lambda: jnp.exp(jnp.arange(6.0).reshape(2, 3)).sum(axis=0) * 2 - 1,
    "jit_grad": lambda: jax.jit(mlp_grad)(w, x),
    "random": lambda: jax.random.normal(jax.random.key(3), (5,)),
    "int": lambda: jnp.cumsum(jnp.arange(10, dtype=jnp.int32)) % 7,
    "bf16": lambda: (jnp.ones((4, 4), jnp.bfloat16) @ jnp.full((4, 2), 0.5, jnp.bfloat16)).astype(jnp.float32),
}
out = {}
for name, f in cases.items():
    got = f()
    on = sorted(d.platform for d in got.devices())
    with jax.default_device(jax.devices("cpu")[0]):
        want = f()
    out[name] = {"on": on, "equal": bool(np.allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)),
                 "dtype": str(got.dtype)}
print(json.dumps(out))
"""


@needs_jax
def test_jit_and_eager_ops_run_on_tpumesh_as_on_cpu():
    got = run_code(SAME_AS_CPU)
    for name, case in got.items():
        assert case["on"] == ["tpumesh"], (name, case)
        assert case["equal"], (name, case)


@needs_jax
def test_results_land_on_the_device_of_their_arguments_and_count_in_its_hbm():
    code = """
import json
import numpy as np
import jax, jax.numpy as jnp
d = jax.devices()[5]
x = jax.device_put(np.arange(1024, dtype=np.float32), d)
before = d.memory_stats()["bytes_in_use"]
y = jax.jit(lambda a: a * 2)(x)
print(json.dumps({"device": y.devices().pop().id, "grew": d.memory_stats()["bytes_in_use"] - before,
                  "sum": float(np.asarray(y).sum())}))
"""
    got = run_code(code)
    assert got == {"device": 5, "grew": 4096, "sum": float(2 * sum(range(1024)))}


@needs_jax
def test_cost_analysis_is_what_simulate_prices():
    code = """
import json
import numpy as np
import jax, jax.numpy as jnp
import tpumesh
def f(x, w):
    return jnp.tanh(x @ w) * 2.0 + jnp.sum(x, axis=1, keepdims=True)
x = np.ones((16, 32), np.float32); w = np.ones((32, 8), np.float32)
lowered = jax.jit(f).lower(x, w)
cost = lowered.compile().cost_analysis()
cost = cost[0] if isinstance(cost, list) else cost
priced = tpumesh.stablehlo.run(lowered.as_text(), x, w).report["summary"]
print(json.dumps({"flops": cost["flops"], "priced_flops": priced["flops"],
                  "seconds": cost["tpumesh_modelled_seconds"], "priced_seconds": priced["modelled_seconds"]}))
"""
    got = run_code(code)
    assert got["flops"] == got["priced_flops"] > 16 * 32 * 8 * 2
    assert got["seconds"] == pytest.approx(got["priced_seconds"], rel=1e-6)


@needs_jax
def test_unsupported_programs_are_an_exception_and_the_process_lives_on():
    code = """
import json
import numpy as np
import jax, jax.numpy as jnp
x = jax.device_put(np.arange(4.0, dtype=np.float32))
errors = []
try:  # a complex convolution: an op tpumesh does not compute
    c = x.astype(jnp.complex64).reshape(1, 1, 4)
    jax.jit(lambda a: jax.lax.conv(a, a, (1,), "VALID"))(c)
except Exception as e:
    errors.append(f"{type(e).__name__} {str(e).splitlines()[0]}")
try:  # past the emulated v5e's 16 GiB of HBM
    jax.device_put(np.zeros((5, 1 << 30), np.float32), jax.devices()[2])
except Exception as e:
    errors.append(f"{type(e).__name__} {str(e).splitlines()[0]}")
print(json.dumps({"errors": errors, "x": np.asarray(x * 2).tolist()}))
"""
    got = run_code(code)
    callback, hbm = got["errors"]
    assert "RuntimeError UNIMPLEMENTED: jit__lambda" in callback, callback
    assert ".mlir:1:" not in callback and ": stablehlo.convolution: complex convolution is not computed" in callback
    assert hbm.startswith("JaxRuntimeError RESOURCE_EXHAUSTED") or hbm.startswith("XlaRuntimeError RESOURCE_EXHAUSTED"), hbm
    assert "device 2" in hbm, hbm
    assert got["x"] == [0.0, 2.0, 4.0, 6.0]
