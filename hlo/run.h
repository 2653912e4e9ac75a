// A read StableHLO module run (or priced) on the emulated mesh with its
// report: the one flow under `tpumesh run`, `simulate --stablehlo`
// (tools/run_command.h) and the Python module's tpumesh.stablehlo
// (python/). Files are neither read nor written here: the caller gives the
// arguments and writes what it wants of the result.
//
// Contract: RunModule verifies the module (hlo::Verify), lays it out
// (LayoutOf), makes the mesh DefaultMeshSpec(layout, options.mesh) gives,
// whose device count must be the layout's (InvalidArgument naming
// options.program otherwise), asks `inputs` for @main's arguments (not in a
// dry run), runs (RunProgram) and prices every device's records into a
// report::RunReport (mode "run", or "simulate" in a dry run; info: program,
// layout, matmul_arithmetic, xla_math). `on_op` is the interpreter's
// progress callback and `cancel`, when given, stops the run with Cancelled
// (hlo::Options::on_op, ::cancel).
#ifndef TPUMESH_HLO_RUN_H_
#define TPUMESH_HLO_RUN_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "hlo/module.h"
#include "hlo/program.h"
#include "mesh/mesh.h"
#include "report/report.h"

namespace tpumesh::hlo {

struct RunOptions {
  std::string program;          // names the module in messages and in the report
  mesh::MeshSpec mesh;          // what the user asked of the mesh (DefaultMeshSpec fills the rest)
  // simulate: priced, no outputs; without `compute` a dry run (no
  // arguments: Options::dry_run, at most kMaxDryRunOps ops), with it
  // computed for real on the given arguments, so loops whose trip counts
  // depend on the data make their real trips (simulate --inputs).
  bool dry_run = false;
  bool compute = false;
  int64_t max_ops = int64_t{1} << 32;  // ops executed at most when computed (Options::max_executed_ops)
  std::function<void(const std::string&)> warn;  // one line per warning (a loop priced by a guess); empty: none
  bool mxu_precision = false;   // f32 dot_general and convolution as the MXU computes them
  std::string xla_generation = "auto";  // auto | 0.4 | current (DetectGeneration for auto)
  bool keep_ops = false;        // every op kept in the report, for a trace
};

struct RunResult {
  Layout layout;
  ProgramRun run;
  report::RunReport report;
};

using InputsFn = std::function<StatusOr<std::vector<Tensor>>(const Layout&)>;

// The report of a run made outside RunModule (the PJRT plugin's
// executions): `o` gives the mode, program name, arithmetic and keep_ops.
report::RunReport ReportOf(const ProgramRun& run, const Layout& layout, const mesh::Mesh& mesh, const RunOptions& o,
                           XlaGeneration generation);

StatusOr<RunResult> RunModule(const Module& m, const RunOptions& options, const InputsFn& inputs,
                              std::function<void(int64_t)> on_op = {}, const std::atomic<bool>* cancel = nullptr);

// The results whose sharding @main leaves to the compiler get the one the
// partitioner's propagation gives them in a dry run (written onto @main as
// their sdy.sharding), as XLA's propagation picks the layout JAX then reads
// from the executable: jit(lambda x: x * 2) of an array split P("x", "y")
// returns it split P("x", "y"), not whole on every device.
// Programs without an sdy mesh, or whose results are all declared, are
// left as they are; so is one whose dry run fails (its execution says why).
Status CompleteResultShardings(Module& m, const Layout& layout, const std::string& name);

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_RUN_H_
