#!/usr/bin/env python3
"""Times JAX through tpumesh's PJRT plugin (docs/jax-backend.md): what a call costs on this host.

  dispatch  a trivial jitted op (x + 1 on a float32[8]) on a tpumesh device:
            the median host seconds of one call, dispatch to result ready
            (block_until_ready), over --calls calls after a warm-up; the
            same on JAX's own CPU backend beside it. Goal: <= 1 ms.
  mlp       a small MLP (--mlp-dims, default 64-128-128-16, batch 16, tanh
            after each layer: 3 dots, 3 adds, 3 tanhs) run eagerly, op by op
            (each op its own compile-cached program, as jnp runs them), and
            under jax.jit (one program); medians over --mlp-calls forward
            calls, and eager / jit. Goal: eager within 3x of jit.
  unet      the stored tiny UNet program (tests/data/stablehlo/jax-0.4.38/
            tiny_unet.mlir, diffusers' Flax UNet2DConditionModel at a tiny
            config, 307 arguments, 0.48 GFLOP; its inputs from tiny_unet.h5)
            compiled through the plugin and called with its arguments already
            on the device, against `tpumesh run` of the same module and
            inputs (the "host" seconds it prints for the call alone, to the
            millisecond, and the process's wall time), interleaved over
            --unet-rounds rounds; both checked against JAX's stored output.
            Goal: the plugin's call within 1.2x of run's.

Every figure is host time on this machine (nothing here is modelled); the
host's CPU model (lscpu), the jax, jaxlib and numpy versions are printed
first. Not part of the build or the tests.

  PYTHONPATH=build/release/python python bench/pjrt_dispatch.py [--build build/release]
  PYTHONPATH=build/release/python /opt/venvs/jax0438/bin/python bench/pjrt_dispatch.py --only dispatch mlp

The plugin comes from the build's python/ folder on PYTHONPATH (or a `pip
install .`); JAX_PLATFORMS is set to "tpumesh,cpu" when unset. The unet
part compiles a StableHLO text module with jax internals
(jax._src.compiler), which differ between jax 0.4 and the current series:
both are handled.
"""
import argparse
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
TINY_UNET = REPO / "tests" / "data" / "stablehlo" / "jax-0.4.38" / "tiny_unet"


def host_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no lscpu)"
    m = re.search(r"^Model name:\s*(.+)$", out, re.M)
    return m.group(1).strip() if m else "unknown"


def median_seconds(call, n, warmup=3):
    """The median host seconds of call() over n timed calls after `warmup` untimed ones."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def ms(seconds):
    return f"{seconds * 1e3:.3f} ms"


def verdict(ok):
    return "met" if ok else "NOT met"


def bench_dispatch(jax, jnp, np, calls):
    x = np.arange(8, dtype=np.float32)
    f = jax.jit(lambda a: a + 1)
    out = {}
    for platform in ("tpumesh", "cpu"):
        a = jax.device_put(x, jax.devices(platform)[0])
        out[platform] = median_seconds(lambda: f(a).block_until_ready(), calls)
    print(f"dispatch  jit(x + 1), float32[8], median of {calls} calls: tpumesh {ms(out['tpumesh'])} per call "
          f"(JAX's CPU {ms(out['cpu'])}, tpumesh / CPU {out['tpumesh'] / out['cpu']:.1f}x); "
          f"goal <= 1 ms: {verdict(out['tpumesh'] <= 1e-3)}")
    return out


def bench_mlp(jax, jnp, np, dims, batch, calls):
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((i, o), dtype=np.float32) / np.sqrt(i), np.zeros((o,), np.float32))
              for i, o in zip(dims[:-1], dims[1:])]
    x = rng.standard_normal((batch, dims[0]), dtype=np.float32)

    def mlp(params, x):
        for w, b in params:
            x = jnp.tanh(x @ w + b)
        return x

    jitted = jax.jit(mlp)
    out = {}
    for platform in ("tpumesh", "cpu"):
        dev = jax.devices(platform)[0]
        p = jax.device_put(params, dev)
        a = jax.device_put(x, dev)
        eager = median_seconds(lambda: mlp(p, a).block_until_ready(), calls)
        jit = median_seconds(lambda: jitted(p, a).block_until_ready(), calls)
        np.testing.assert_allclose(np.asarray(mlp(p, a)), np.asarray(jitted(p, a)), rtol=1e-5, atol=1e-6)
        out[platform] = (eager, jit)
    eager, jit = out["tpumesh"]
    ops = 3 * (len(dims) - 1)
    shape = "-".join(map(str, dims))
    print(f"mlp       {shape}, batch {batch}, tanh ({ops} ops), median of {calls} forward calls: tpumesh eager "
          f"{ms(eager)} ({ms(eager / ops)} per op), jit {ms(jit)}, eager / jit {eager / jit:.1f}x "
          f"(JAX's CPU: eager {ms(out['cpu'][0])}, jit {ms(out['cpu'][1])}, {out['cpu'][0] / out['cpu'][1]:.1f}x); "
          f"goal eager <= 3x jit: {verdict(eager <= 3 * jit)}")
    return out


def compile_text(jax, text, device):
    """A StableHLO text module compiled by the device's client, as jax.jit compiles (jax 0.4 and current)."""
    from jax._src import compiler, xla_bridge
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import xla_client as xc
    from jaxlib.mlir import ir

    backend = xla_bridge.get_backend(device.platform)
    with jax_mlir.make_ir_context():
        module = ir.Module.parse(text)
        options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
        if hasattr(compiler, "backend_compile_and_load"):  # jax >= 0.6 or so: executable devices named
            return compiler.backend_compile_and_load(backend, module, xc.DeviceList((device,)), options, [])
        return compiler.backend_compile(backend, module, options, [])  # jax 0.4


def bench_unet(jax, np, tpumesh_bin, rounds):
    import tpumesh

    text = TINY_UNET.with_suffix(".mlir").read_text()
    h5 = TINY_UNET.with_suffix(".h5")
    inputs = tpumesh.stablehlo.load_inputs(h5)
    want = tpumesh.stablehlo.load_outputs(h5)[0]
    scale = np.abs(want).max()
    dev = jax.devices("tpumesh")[0]

    t0 = time.perf_counter()
    exe = compile_text(jax, text, dev)
    compile_s = time.perf_counter() - t0
    args = [jax.device_put(a, dev) for a in inputs]

    def call():
        result = exe.execute_sharded(args).disassemble_into_single_device_arrays()[0][0]
        result.block_until_ready()
        return result

    got = np.asarray(call())
    assert np.abs(got - want).max() / scale <= 1e-5, "the plugin's tiny UNet output is not JAX's"
    call()  # warm-up

    # Interleaved, a plugin call then a `tpumesh run` process per round, so that the host's load drifts
    # over both alike.
    plugins, hosts, walls = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            t0 = time.perf_counter()
            call()
            plugins.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            r = subprocess.run([tpumesh_bin, "run", str(TINY_UNET.with_suffix(".mlir")), "--inputs", str(h5),
                                "--outputs", f"{tmp}/out.h5", "-q"], capture_output=True, text=True, check=True)
            walls.append(time.perf_counter() - t0)
            m = re.search(r"; host ([0-9.]+) s", r.stdout)
            assert m, r.stdout
            hosts.append(float(m.group(1)))
        cli_out = tpumesh.stablehlo.load_outputs(f"{tmp}/out.h5")[0]
    assert np.abs(cli_out - want).max() / scale <= 1e-5, "tpumesh run's tiny UNet output is not JAX's"
    plugin = statistics.median(plugins)
    host, wall = statistics.median(hosts), statistics.median(walls)
    print(f"unet      tiny_unet.mlir (307 args, 0.48 GFLOP), compile {compile_s:.3f} s; medians of {rounds} rounds: "
          f"a call through the plugin {ms(plugin)}, `tpumesh run`'s call {ms(host)} (its process {wall:.3f} s "
          f"wall): plugin / run {plugin / host:.2f}x; goal <= 1.2x: {verdict(plugin <= 1.2 * host)}")
    return {"plugin": plugin, "run_host": host, "run_wall": wall, "compile": compile_s}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(REPO / "build" / "release"), help="the build (its tools/tpumesh)")
    ap.add_argument("--only", nargs="+", choices=["dispatch", "mlp", "unet"], default=["dispatch", "mlp", "unet"])
    ap.add_argument("--calls", type=int, default=2000, help="timed calls of the trivial op (default 2000)")
    ap.add_argument("--mlp-calls", type=int, default=300, help="timed MLP forward calls, each way (default 300)")
    ap.add_argument("--mlp-dims", default="64,128,128,16", help="the MLP's widths, input first")
    ap.add_argument("--mlp-batch", type=int, default=16)
    ap.add_argument("--unet-rounds", type=int, default=9,
                    help="rounds of one UNet call through the plugin and one `tpumesh run` (default 9)")
    args = ap.parse_args()

    os.environ.setdefault("JAX_PLATFORMS", "tpumesh,cpu")
    import numpy as np
    import jax
    import jax.numpy as jnp
    import jaxlib

    print(f"host: {host_model()}, {os.cpu_count()} CPUs; jax {jax.__version__}, jaxlib {jaxlib.__version__}, "
          f"numpy {np.__version__}, python {sys.version.split()[0]}")
    print(f"tpumesh devices: {len(jax.devices('tpumesh'))} x {jax.devices('tpumesh')[0].device_kind}")
    if "dispatch" in args.only:
        bench_dispatch(jax, jnp, np, args.calls)
    if "mlp" in args.only:
        dims = [int(d) for d in args.mlp_dims.split(",")]
        bench_mlp(jax, jnp, np, dims, args.mlp_batch, args.mlp_calls)
    if "unet" in args.only:
        tpumesh_bin = str(pathlib.Path(args.build) / "tools" / "tpumesh")
        if not os.path.exists(tpumesh_bin):
            sys.exit(f"pjrt_dispatch: no {tpumesh_bin} (build the target tpumesh, or pass --build)")
        bench_unet(jax, np, tpumesh_bin, args.unet_rounds)


if __name__ == "__main__":
    main()
