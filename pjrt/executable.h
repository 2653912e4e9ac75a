// Programs of the plugin: PJRT_Client_Compile, the executables it makes and
// PJRT_LoadedExecutable_Execute (docs/pjrt.md, "Compile and execute").
//
// Compile: the program's bytes (MLIR bytecode of a StableHLO portable
// artifact, or MLIR text) become StableHLO text through the decoder the
// Python package installs (TpumeshPjrt_SetProgramDecoder: the process's
// own jaxlib, docs/pjrt.md "Decoding programs"), then hlo/'s reader,
// verifier and layout, exactly as `tpumesh run` reads a file. Compiled
// programs are cached by their bytes and compile options (eager mode
// compiles the same tiny programs again and again).
//
// Execute: arguments are copied out of their buffers, the program runs on
// an emulated mesh of the chip with the program's device count
// (hlo::RunProgram: every op computed on the devices' task arenas and
// priced), and results are copied into new buffers on the executable's
// devices, counted against their HBM. Layouts: one device (jit, eager ops);
// pmap in jax 0.4 (num_replicas = N: device d's arguments and results are
// slice d); a global-view program on N devices (sharded jit, shard_map,
// jax >= 0.8's pmap), each device's buffers its pieces under the declared
// (or, for results left to the compiler, propagated) shardings. Donated
// arguments are consumed. Every error is our one line ("jit_f.mlir:3:10:
// stablehlo.foo: ..."), returned as a PJRT_Error. pjrt/executable.cc holds
// compile and the executables' queries, pjrt/execute.cc the execution.
// While a jax.profiler.trace session runs, each execution's report (per
// op, modelled) and host wall time go to it (pjrt/profiler.h).
#ifndef TPUMESH_PJRT_EXECUTABLE_H_
#define TPUMESH_PJRT_EXECUTABLE_H_

#include <cstddef>

#include "pjrt/pjrt_c_api.h"

namespace tpumesh::pjrt {

// Sets the Client_Compile, Executable_* and LoadedExecutable_* slots.
void FillExecutableSlots(PJRT_Api& api);
// The Shardings extension (pjrt/pjrt_c_api.h), for PJRT_Api::extension_start.
PJRT_Extension_Base* ShardingsExtension();

}  // namespace tpumesh::pjrt

extern "C" {
// The decoder: called with a program's bytes and a sink, it calls
// TpumeshPjrt_DeliverText(sink, text, size, ok) once (ok = 0: `text` is the
// error message) and returns 0. Installed by jax_plugins.tpumesh.initialize()
// through ctypes; null uninstalls.
typedef int (*TpumeshPjrtProgramDecoder)(const char* code, size_t code_size, void* sink);
void TpumeshPjrt_SetProgramDecoder(TpumeshPjrtProgramDecoder decoder);
void TpumeshPjrt_DeliverText(void* sink, const char* text, size_t size, int ok);
}

#endif  // TPUMESH_PJRT_EXECUTABLE_H_
