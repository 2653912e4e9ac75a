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


@needs_jax
def test_what_is_not_implemented_is_an_exception_naming_it():
    # Compile is the next step: until then a jitted op raises our line, and the process and its buffers live on.
    code = """
import numpy as np
import jax
x = jax.device_put(np.arange(4.0, dtype=np.float32))
try:
    jax.jit(lambda a: a * 2)(x)
except Exception as e:
    print(type(e).__name__, str(e).splitlines()[0])
print(np.asarray(x).tolist())
"""
    env = dict(os.environ, JAX_PLATFORMS="tpumesh")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-2] == "JaxRuntimeError UNIMPLEMENTED: tpumesh: PJRT_Client_Compile is not implemented"
    assert lines[-1] == "[0.0, 1.0, 2.0, 3.0]"
