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


# The decoder callback handed to the plugin (kept alive here: the plugin holds
# only its address).
_decoder = None


def _install_decoder(library_path: str):
    """Gives the plugin its program decoder: this process's jaxlib (_decode.py).

    The plugin's PJRT_Client_Compile calls it with a program's bytes; ctypes
    takes the GIL for the call, so it may come from any thread.
    """
    import ctypes

    from . import _decode

    global _decoder
    lib = ctypes.CDLL(library_path)  # the same object JAX loads: one copy in the process
    deliver = lib.TpumeshPjrt_DeliverText
    deliver.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
    deliver.restype = None
    decoder_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)

    def decode(code, size, sink):
        try:
            text = _decode.program_text(ctypes.string_at(code, size)).encode()
            deliver(sink, text, len(text), 1)
        except BaseException as e:  # noqa: BLE001 - reported to the plugin as the compile's error
            message = f"{type(e).__name__}: {e}".encode(errors="replace")
            deliver(sink, message, len(message), 0)
        return 0

    _decoder = decoder_type(decode)
    lib.TpumeshPjrt_SetProgramDecoder.argtypes = [decoder_type]
    lib.TpumeshPjrt_SetProgramDecoder.restype = None
    lib.TpumeshPjrt_SetProgramDecoder(_decoder)


def initialize():
    from jax._src import xla_bridge

    if not LIBRARY.exists():
        raise RuntimeError(f"tpumesh: the PJRT plugin {LIBRARY} is missing (build the target pjrt_plugin_tpumesh)")
    _install_decoder(str(LIBRARY))
    xla_bridge.register_plugin(PLATFORM, priority=PRIORITY, library_path=str(LIBRARY))
