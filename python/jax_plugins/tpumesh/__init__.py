"""tpumesh as a JAX PJRT plugin (docs/pjrt.md): emulated TPU devices behind jax.devices().

JAX imports every module of the namespace package `jax_plugins` (and every
entry point of the group "jax_plugins") at backend setup and calls its
initialize(). This one registers the shared object beside it,
pjrt_plugin_tpumesh.so, under the platform name "tpumesh":

    JAX_PLATFORMS=tpumesh python -c "import jax; print(jax.devices())"

The chip, device count and topology come from TPUMESH_PJRT_CHIP,
TPUMESH_PJRT_DEVICES and TPUMESH_PJRT_TOPOLOGY (default: a v5e 2x4 slice,
8 devices). The priority is below JAX's CPU backend: without JAX_PLATFORMS,
jax's default devices stay the CPU's and ours are jax.devices("tpumesh").
"""

import os
import pathlib

PLATFORM = "tpumesh"
# Beside this file as found, not as resolved: in a build tree __init__.py is a
# link to the source, the .so is not.
LIBRARY = pathlib.Path(os.path.abspath(__file__)).with_name("pjrt_plugin_tpumesh.so")
# JAX's own: cpu 0, gpu 200, tpu 300; a plugin 400 by default.
PRIORITY = -100


def initialize():
    from jax._src import xla_bridge

    if not LIBRARY.exists():
        raise RuntimeError(f"tpumesh: the PJRT plugin {LIBRARY} is missing (build the target pjrt_plugin_tpumesh)")
    xla_bridge.register_plugin(PLATFORM, priority=PRIORITY, library_path=str(LIBRARY))
