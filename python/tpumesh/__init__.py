"""tpumesh from Python: a TPU-v5e-like mesh emulated on the CPU.

The names follow JAX's, numpy arrays go in and out, reports are dicts:

    import tpumesh
    print(tpumesh.devices())                       # as `tpumesh devices` prints them
    key = tpumesh.random.key(0)
    keys = tpumesh.random.split(key, 8)            # jax.random.split's bits
    out = tpumesh.Pipeline.default().generate("a red circle on a blue background", steps=20, seed=0)
    out.images                                     # uint8 [8, 32, 32, 3], one per device
    out.report["summary"]["modelled_seconds"]      # the emulated chip's time
    tpumesh.simulate(arch="sd15", mesh="data=2,model=4")["summary"]
    tpumesh.eval(None, "vae_decoder", {"latents": z}, mesh="data=2")["sample"]
    outs, report = tpumesh.stablehlo.run(open("f.mlir").read(), x, w)
    outs, report = tpumesh.jax.run(f, x, w)        # lowers f with your jax

Long calls release the GIL and stop cleanly on Ctrl-C (KeyboardInterrupt).
Errors are ValueError (a bad argument), OSError (a file) or RuntimeError,
with the library's one-line message. docs/python.md is the guide.
"""

from tpumesh import _tpumesh
from tpumesh._config import config
from tpumesh._devices import Device, DeviceList, device_count, devices
from tpumesh._pipeline import GenerateResult, Pipeline, simulate, sweep_mesh
from tpumesh._eval import EvalResult, eval  # noqa: A001 (the CLI's name, as jax has jax.eval_shape)
from tpumesh import io, random, stablehlo
from tpumesh import jax  # imports jax itself only when used

__all__ = [
    "Device", "DeviceList", "EvalResult", "GenerateResult", "Pipeline", "config", "device_count", "devices", "io", "jax",
    "random", "simulate", "stablehlo", "sweep_mesh",
]
