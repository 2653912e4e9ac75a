"""tpumesh.jax: a JAX function on the emulated mesh, lowered by your own jax.

    outputs, report = tpumesh.jax.run(f, *args, mesh=None)
    report = tpumesh.jax.price(f, *args, chip="v5e", mesh=None)

f is a plain function (jitted here), a jax.jit / jax.pmap function, or a
shard_map inside a jit; args are what you would call it with (price also
takes jax.ShapeDtypeStruct). f is lowered with jax (`f.lower(*args)`), its
StableHLO text runs on tpumesh.stablehlo, and the outputs come back in f's
output structure as numpy arrays. jax is an optional import: without it
these raise ImportError, and tpumesh.stablehlo still takes the text jax
printed elsewhere.
"""

import importlib

import numpy as np

from tpumesh import stablehlo

__all__ = ["lower", "price", "run"]


def _import_jax():
    try:
        return importlib.import_module("jax")
    except ImportError as e:
        raise ImportError(
            "tpumesh.jax lowers functions with jax, which is not importable here (pip install jax); "
            "tpumesh.stablehlo.run takes the StableHLO text jax printed elsewhere") from e


def _lowered_text(lowered):
    """The module's text with locations (JAX's name scopes name the report's layers)."""
    try:
        return lowered.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True)
    except Exception:  # an older or newer jax without this spelling
        return lowered.as_text()


def lower(f, *args):
    """(StableHLO text, @main's input arrays or None, output tree, name) of f on args."""
    jax = _import_jax()
    if not callable(f):
        raise TypeError(f"f must be a function (plain, jax.jit or jax.pmap), not {type(f).__name__} {f!r:.60}")
    lowerable = f if hasattr(f, "lower") else jax.jit(f)
    lowered = lowerable.lower(*args)
    leaves = jax.tree_util.tree_leaves(args)
    # jit drops arguments the function does not use (keep_unused=False).
    kept = getattr(getattr(lowered, "_lowering", None), "compile_args", {}).get("kept_var_idx")
    if kept is not None and len(kept) != len(leaves):
        leaves = [leaves[i] for i in sorted(kept)]
    name = getattr(f, "__name__", None) or getattr(getattr(f, "__wrapped__", None), "__name__", "f")
    return _lowered_text(lowered), leaves, lowered.out_tree, f"{name}.mlir"


def run(f, *args, mesh=None, devices=None, chip="v5e", mxu_precision=False, trace=None):
    """Runs f(*args) on the emulated mesh: (outputs in f's structure, report dict)."""
    jax = _import_jax()
    text, leaves, out_tree, name = lower(f, *args)
    inputs = [np.asarray(x) for x in leaves]
    outs, report = stablehlo.run(text, *inputs, mesh=mesh, devices=devices, chip=chip,
                                 mxu_precision=mxu_precision, trace=trace, name=name)
    return stablehlo.RunResult(jax.tree_util.tree_unflatten(out_tree, outs), report)


def price(f, *args, chip="v5e", mesh=None, devices=None, trace=None):
    """Prices f(*args) on the chip without computing it: the report dict."""
    text, _, _, name = lower(f, *args)
    return stablehlo.price(text, mesh=mesh, devices=devices, chip=chip, trace=trace, name=name)
