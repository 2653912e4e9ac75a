"""tpumesh.stablehlo: a StableHLO module on the emulated mesh (`tpumesh run`
and `tpumesh simulate --stablehlo`), numpy arrays in and out.

    outputs, report = tpumesh.stablehlo.run(text_or_path, *inputs, mesh=None)
    report = tpumesh.stablehlo.price(text_or_path, mesh=None)

The module is the MLIR text JAX prints (jax.jit(f).lower(*args).as_text(),
pmap and shard_map included), given as text or as a path. Inputs are
@main's arguments in order (a pmap module's carry the leading device axis);
floats are accepted for any float argument and rounded, integers for any
integer one, as `run --inputs` accepts datasets. The devices are the
module's (mhlo.num_replicas / num_partitions on its sdy.mesh) unless mesh=
/ devices= say otherwise (the counts must agree). Outputs are numpy arrays
(bf16 as ml_dtypes' bfloat16 when installed, else float32); the report is
the `--report` JSON as a dict. docs/stablehlo.md has the layouts and ops.
"""

import collections
import json
import os


from tpumesh import _check, _tpumesh
from tpumesh._mesh import _check_readable, mesh_spec
from tpumesh.io import _check_hdf5, from_tagged, read_dataset, to_tagged

__all__ = ["RunResult", "layout", "load_inputs", "load_outputs", "price", "run"]

RunResult = collections.namedtuple("RunResult", ["outputs", "report"])


def _program(program, name):
    """(text or path, is_path, name for messages)."""
    if isinstance(program, os.PathLike):
        return _check_readable(program), True, name or os.fspath(program)
    name = _check.optional_string("name", name)
    if not isinstance(program, str):
        raise TypeError(f"program must be MLIR text or a path, not {_check._what(program)}")
    head = program.lstrip()[:200]
    if "\n" in program or head.startswith(("module", "func.func", "#loc", '"builtin.module"', "//")):
        return program, False, name or "<stablehlo>"
    return _check_readable(program), True, name or program


def _spec(mesh, devices, chip, topology, threads_per_device, model_axis_along="x"):
    return mesh_spec(chip, devices, mesh, topology, model_axis_along, threads_per_device)


def _trace(trace, text, is_path, spec):
    """The trace path checked by the commands' output guard before the run: never the module it runs."""
    if trace is None:
        return None, []
    trace = _check.path("trace", trace)
    inputs = [("program", text if is_path else ""), ("chip", spec.chip if os.path.exists(spec.chip) else "")]
    _tpumesh.check_output(trace, inputs)
    return trace, inputs


def _xla_generation(value):
    return _check.string("xla_generation", value, ("auto", "0.4", "current"))


def run(program, *inputs, mesh=None, devices=None, chip="v5e", topology=None, threads_per_device=0,
        mxu_precision=False, xla_generation="auto", trace=None, name=None):
    """Runs @main on the mesh: every op computed on the host and priced on the chip.

    Returns RunResult(outputs, report): a list of numpy arrays in @main's
    result order and the report dict. mxu_precision=True computes f32
    dot_general / convolution as a TPU's MXU would for their
    precision_config; xla_generation "0.4" / "current" / "auto" picks whose
    XLA math to match bit for bit; trace="t.json" writes the Chrome trace.
    """
    xla_generation = _xla_generation(xla_generation)
    text, is_path, name = _program(program, name)
    spec = _spec(mesh, devices, chip, topology, threads_per_device)
    trace, files = _trace(trace, text, is_path, spec)
    tagged = [to_tagged(x) for x in inputs]
    outs, report_json, trace_json = _tpumesh.stablehlo_run(
        text, is_path, name, tagged, spec, False, _check.flag("mxu_precision", mxu_precision), xla_generation,
        trace is not None)
    if trace is not None:
        _tpumesh.write_file(trace, trace_json.encode(), files)
    return RunResult([from_tagged(a, tag) for a, tag in outs], json.loads(report_json))


def price(program, *, mesh=None, devices=None, chip="v5e", topology=None, xla_generation="auto", trace=None,
          name=None):
    """Prices @main on the chip without computing it or taking inputs: the report dict."""
    xla_generation = _xla_generation(xla_generation)
    text, is_path, name = _program(program, name)
    spec = _spec(mesh, devices, chip, topology, 0)
    trace, files = _trace(trace, text, is_path, spec)
    _, report_json, trace_json = _tpumesh.stablehlo_run(text, is_path, name, [], spec, True, False, xla_generation,
                                                        trace is not None)
    if trace is not None:
        _tpumesh.write_file(trace, trace_json.encode(), files)
    return json.loads(report_json)


def layout(program, name=None):
    """{"layout": "pmap over 8 replicas", "devices": 8, "inputs": [MLIR types], "outputs": [...]}."""
    text, is_path, name = _program(program, name)
    describe, devices, ins, outs = _tpumesh.stablehlo_layout(text, is_path, name)
    return {"layout": describe, "devices": devices, "inputs": ins, "outputs": outs}


def _load(path, prefix):
    path = _check_hdf5(_check_readable(path))
    out = []
    while _tpumesh.h5_has_dataset(path, f"{prefix}_{len(out)}"):
        out.append(read_dataset(path, f"{prefix}_{len(out)}"))
    return out


def load_inputs(path):
    """input_0, input_1, ... of an HDF5 file (`tpumesh run --inputs`), in order."""
    return _load(path, "input")


def load_outputs(path):
    """output_0, output_1, ... of an HDF5 file (`tpumesh run --outputs`), in order."""
    return _load(path, "output")
