"""tpumesh.stablehlo on the programs JAX exported (tests/data/stablehlo/,
scripts/stablehlo/export_programs.py): the outputs equal JAX's stored ones,
by the rule tests/hlo/programs_test.cc applies (bit for bit for integers,
collectives, threefry and erfinv; otherwise within 1e-5 of the output's
largest magnitude); price and run give `tpumesh simulate --stablehlo` /
`tpumesh run`'s reports."""

import json
import re
import subprocess

import numpy as np
import pytest

from tpumesh import stablehlo

from conftest import without_host_times

PROGRAMS = [
    ("jax-0.4.38", "jit_sharded_batch"),
    ("jax-0.4.38", "pmap_psum"),
    ("jax-0.4.38", "tiny_unet"),
    ("jax-0.4.38", "rng"),
    ("jax-0.4.38", "shard_map_psum_xy"),
    ("jax-current", "pmap_psum"),
    ("jax-current", "jit_sharded_mlp_step"),
]


def manifest(data_dir, generation):
    m = json.loads((data_dir / "stablehlo" / generation / "manifest.json").read_text())
    return {p["name"]: p for p in m["programs"]}


def assert_like_jax(name, kind, got, want):
    assert got.shape == want.shape, name
    exact = want.dtype.kind not in "fV" or kind in ("pmap", "shard_map") or name.startswith("rng") or name == "erfinv"
    if exact and got.dtype == want.dtype:
        assert got.tobytes() == want.tobytes(), f"{name}: not bit for bit JAX's"
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    finite = np.isfinite(w)
    scale = max(np.abs(w[finite]).max(initial=0.0), 1e-30)
    assert np.abs(g[finite] - w[finite]).max(initial=0.0) / scale <= 1e-5, name


@pytest.mark.parametrize("generation,name", PROGRAMS)
def test_outputs_equal_jax(data_dir, generation, name):
    base = data_dir / "stablehlo" / generation / name
    entry = manifest(data_dir, generation)[name]
    inputs = stablehlo.load_inputs(base.with_suffix(".h5"))
    assert len(inputs) == entry["num_inputs"]
    text = base.with_suffix(".mlir").read_text()
    outputs, report = stablehlo.run(text, *inputs, name=f"{name}.mlir", threads_per_device=1)
    want = stablehlo.load_outputs(base.with_suffix(".h5"))
    assert len(outputs) == len(want)
    for k, (g, w) in enumerate(zip(outputs, want)):
        assert_like_jax(f"{generation}/{name} output {k}", entry["kind"], g, w)
    assert report["summary"]["devices"] == entry["devices"]


def test_a_path_runs_as_its_text(data_dir):
    base = data_dir / "stablehlo" / "jax-0.4.38" / "pmap_psum"
    inputs = stablehlo.load_inputs(base.with_suffix(".h5"))
    by_path = stablehlo.run(base.with_suffix(".mlir"), *inputs).outputs
    by_text = stablehlo.run(base.with_suffix(".mlir").read_text(), *inputs).outputs
    for a, b in zip(by_path, by_text):
        assert a.tobytes() == b.tobytes()
    layout = stablehlo.layout(base.with_suffix(".mlir"))
    assert layout["devices"] == 8 and layout["inputs"] == ["tensor<8x4x6xf32>", "tensor<8x4x6xi32>"]


def test_price_and_run_reports_equal_the_cli(tpumesh_bin, data_dir, tmp_path):
    mlir = data_dir / "stablehlo" / "jax-0.4.38" / "jit_sharded_mlp_step.mlir"
    h5 = mlir.with_suffix(".h5")
    subprocess.run([tpumesh_bin, "simulate", "--stablehlo", str(mlir), "--report", str(tmp_path / "p.json")],
                   check=True, capture_output=True)
    got = stablehlo.price(mlir)
    want = json.loads((tmp_path / "p.json").read_text())
    assert without_host_times(got) == without_host_times(want)
    subprocess.run([tpumesh_bin, "run", str(mlir), "--inputs", str(h5), "--outputs", str(tmp_path / "o.h5"),
                    "--report", str(tmp_path / "r.json"), "-q"], check=True, capture_output=True)
    outputs, got = stablehlo.run(mlir, *stablehlo.load_inputs(h5))
    want = json.loads((tmp_path / "r.json").read_text())
    got, want = without_host_times(got), without_host_times(want)
    for r in (got, want):  # HBM peaks depend on when each device freed its values
        r["summary"].pop("hbm_peak_bytes", None)
        for dev in r["devices"]:
            dev.pop("hbm_peak_bytes", None)
    assert got == want
    for k, out in enumerate(outputs):
        assert out.tobytes() == stablehlo.load_outputs(tmp_path / "o.h5")[k].tobytes()


def test_errors(data_dir, tmp_path):
    base = data_dir / "stablehlo" / "jax-0.4.38" / "pmap_psum"
    inputs = stablehlo.load_inputs(base.with_suffix(".h5"))
    with pytest.raises(ValueError, match=re.escape("input 0 has shape <4x6xf32> but @main's argument 0 is tensor<8x4x6xf32>")):
        stablehlo.run(base.with_suffix(".mlir"), inputs[0][0], inputs[1])
    with pytest.raises(ValueError, match="takes 2 argument"):
        stablehlo.run(base.with_suffix(".mlir"), inputs[0])
    with pytest.raises(ValueError, match="runs on 8 device"):
        stablehlo.run(base.with_suffix(".mlir"), *inputs, devices=4)
    with pytest.raises(ValueError, match="<stablehlo>:2:20: expected"):
        stablehlo.run("module {\n  func.func @main( {", np.zeros(1))
    with pytest.raises(FileNotFoundError):
        stablehlo.run(str(tmp_path / "missing.mlir"))
    bad = tmp_path / "unary_einsum.mlir"
    bad.write_text('module @m {\n  func.func public @main(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {\n'
                   '    %0 = stablehlo.unary_einsum %arg0, config = "ab->ba" : tensor<2x2xf32>\n'
                   '    return %0 : tensor<2x2xf32>\n  }\n}\n')
    with pytest.raises(NotImplementedError, match="unary_einsum"):
        stablehlo.run(bad, np.eye(2, dtype=np.float32))


def test_trace_goes_through_the_output_guard(data_dir, tmp_path):
    """A trace is written whole through the commands' output guard: never into a FIFO."""
    import os
    program = data_dir / "stablehlo" / "jax-0.4.38" / "dot.mlir"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises((ValueError, OSError), match="not a regular file"):
        stablehlo.price(str(program), trace=str(fifo))
    trace = tmp_path / "trace.json"
    stablehlo.price(str(program), trace=str(trace))
    assert json.loads(trace.read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "trace.json"]


LONG_LOOP = """
func.func public @main(%arg0: tensor<i32>) -> tensor<i32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<i32>
   cond {
    %lim = stablehlo.constant dense<2000000000> : tensor<i32>
    %1 = stablehlo.compare  LT, %iterArg, %lim,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %1 = stablehlo.add %iterArg, %one : tensor<i32>
    %2 = stablehlo.add %iterArg_0, %one : tensor<i32>
    stablehlo.return %1, %2 : tensor<i32>, tensor<i32>
  }
  return %0#1 : tensor<i32>
}
"""


def test_ctrl_c_interrupts_a_run_between_ops():
    # A loop of 2e9 trips: Ctrl-C stops it at the next op, and a run after it works.
    import signal
    import threading
    import time
    timer = threading.Timer(0.3, lambda: signal.raise_signal(signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        stablehlo.run(LONG_LOOP, np.int32(5), devices=1)
    timer.join()
    assert time.monotonic() - start < 30
    short = LONG_LOOP.replace("2000000000", "3")
    assert int(stablehlo.run(short, np.int32(5), devices=1).outputs[0]) == 8


def test_cross_replica_sum_is_a_psum_over_its_groups():
    """XLA's old bodiless all-reduce (jax 0.4's eager pmap writes it): a sum over each replica group."""
    program = """
module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<2xi32>) -> tensor<2xi32> {
    %0 = "stablehlo.cross-replica-sum"(%x) <{replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>}> : (tensor<2xi32>) -> tensor<2xi32>
    return %0 : tensor<2xi32>
  }
}
"""
    out = stablehlo.run(program, np.arange(1, 9, dtype=np.int32), devices=4).outputs[0]
    # replica d holds [2d + 1, 2d + 2]; groups {0, 1} and {2, 3}
    assert out.tolist() == [4, 6, 4, 6, 12, 14, 12, 14]
