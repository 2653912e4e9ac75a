"""The program decoder of the PJRT plugin (docs/pjrt.md, "Decoding programs").

PJRT_Client_Compile receives MLIR bytecode of a StableHLO portable artifact
(VHLO, with Shardy's sdy ops and attributes), serialized by the jaxlib of
this process. program_text() decodes it with that same jaxlib's MLIR
bindings and prints the pretty StableHLO text hlo/'s reader reads (what
`tpumesh run` reads): the decoder is the encoder's own library, at its own
version. Called by the plugin's compile (next: through a callback the
plugin's initialize() installs); imports jaxlib only when called.
"""


def program_text(code: bytes) -> str:
    """StableHLO text of a portable artifact's bytes (or of MLIR text, returned as given)."""
    if not code.startswith(b"ML\xefR"):  # MLIR bytecode's magic; a program may also come as text
        return code.decode()
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir.dialects import stablehlo

    with jax_mlir.make_ir_context() as context:
        module = stablehlo.deserialize_portable_artifact(context, code)
        return module.operation.get_asm(enable_debug_info=False)


def current_version() -> str:
    """The StableHLO version this process's jaxlib writes and reads, e.g. "1.17.0"."""
    from jaxlib.mlir.dialects import stablehlo

    return stablehlo.get_current_version()
