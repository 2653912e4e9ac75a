#!/usr/bin/env python3
"""XLA:CPU's compiled cost analysis of a StableHLO module, with whichever jax
the venv running this has (offline tool; never part of the build or tests).

    /opt/venvs/jaxnew/bin/python scripts/stablehlo/xla_compiled_flops.py MODULE.mlir [...]
    /opt/venvs/jax0438/bin/python scripts/stablehlo/xla_compiled_flops.py MODULE.mlir [...]

Prints, per module, the jax version and the "flops" of
`executable.cost_analysis()` after XLA:CPU compiled the module text as it
is (the same figure as `jax.jit(f).lower(...).compile().cost_analysis()`
for the program that module was exported from: for tests/data's modules
under jax 0.4.38 it reproduces their manifest's `flops`). Used to show how
far two XLA generations' compiled counts of one module lie apart
(docs/stablehlo.md, "FLOPs").
"""
import sys

import jax
from jax._src import xla_bridge
from jax._src.lib import xla_client as xc


def compiled_flops(text):
    backend = xla_bridge.get_backend("cpu")
    options = xc.CompileOptions()
    if hasattr(backend, "compile_and_load"):  # current jax
        devices = xc.DeviceList(tuple(backend.devices()[:1]))
        exe = backend.compile_and_load(text, devices, options)
    else:  # jax 0.4.x
        exe = backend.compile(text, options)
    cost = exe.cost_analysis()
    if isinstance(cost, list):
        cost = cost[0]
    return cost.get("flops")


def main(paths):
    if not paths:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    for path in paths:
        with open(path) as f:
            print(f"{path}: jax {jax.__version__}: compiled flops {compiled_flops(f.read()):.6e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
