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

initialize() first checks the jax of the process against the releases the
plugin supports (JAX_OLDEST to JAX_NEWEST_SERIES, docs/jax-backend.md): any
other jax is refused with one line naming the range, raised as an exception,
which JAX logs ("Jax plugin configuration error") without registering the
platform; the process goes on with JAX's other backends.
"""

import os
import pathlib
import re

PLATFORM = "tpumesh"
# Beside this file as found, not as resolved: in a build tree __init__.py is a
# link to the source, the .so is not.
LIBRARY = pathlib.Path(os.path.abspath(__file__)).with_name("pjrt_plugin_tpumesh.so")
# JAX's own: cpu 0, gpu 200, tpu 300; a plugin 400 by default.
PRIORITY = -100


# The jax releases supported: from JAX_OLDEST (0.4.38, the newest jax with which
# diffusers' Flax pipeline still installs) through the JAX_NEWEST_SERIES
# series (0.10.2 was PyPI's current when this was written). CI runs the
# suite at both ends (python/requirements-test-jax0438.txt and
# python/requirements-test.txt). Older jaxlibs speak an older PJRT C API and
# StableHLO; the decoder and registration use jax internals
# (jax._src.xla_bridge, jax._src.interpreters.mlir) that a later series may
# change: both ends are refused rather than guessed at.
JAX_OLDEST = (0, 4, 38)
JAX_NEWEST_SERIES = (0, 10)
JAX_TESTED = ("0.4.38", "0.10.2")
SUPPORTED_JAX = "jax 0.4.38 to 0.10.x"


def check_jax_version(version: str) -> None:
    """Raises RuntimeError, one line naming the supported range, unless `version` (jax's) is in it.

    Only the release's leading numbers count: "0.10.3.dev20260101" is of the
    0.10 series, "0.4.38rc1" is 0.4.38.
    """
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    release = tuple(int(g) for g in m.groups()) if m else None
    if release is None or not (JAX_OLDEST <= release and release[:2] <= JAX_NEWEST_SERIES):
        raise RuntimeError(f"tpumesh: jax {version} is not supported: the tpumesh PJRT plugin supports "
                           f"{SUPPORTED_JAX} (tested: {' and '.join(JAX_TESTED)}); platform 'tpumesh' not registered")


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
    from jax import version as jax_version

    check_jax_version(jax_version.__version__)
    from jax._src import xla_bridge

    if not LIBRARY.exists():
        raise RuntimeError(f"tpumesh: the PJRT plugin {LIBRARY} is missing (build the target pjrt_plugin_tpumesh)")
    _install_decoder(str(LIBRARY))
    _enable_donation()
    xla_bridge.register_plugin(PLATFORM, priority=PRIORITY, library_path=str(LIBRARY))


def _enable_donation():
    """Lets JAX donate buffers to tpumesh, as to cpu, cuda, rocm and tpu.

    JAX lowers donation (tf.aliasing_output, jax.buffer_donor) only for the
    platforms in its list `mlir._platforms_with_donation`; the plugin consumes
    donated arguments as XLA does (pjrt/executable.cc). Where the list is not
    found, donation stays off: JAX warns that the donated buffers were not
    usable, and nothing else changes.
    """
    try:
        from jax._src.interpreters import mlir
    except ImportError:
        return
    platforms = getattr(mlir, "_platforms_with_donation", None)
    if isinstance(platforms, list) and PLATFORM not in platforms:
        platforms.append(PLATFORM)
