// `tpumesh run` and `simulate --stablehlo`: a StableHLO module (hlo/) on the
// emulated mesh, computed or only priced, with the reports every command
// writes. One flow for both (RunStableHlo), told apart by dry_run; its core
// (RunStableHloModule: verify, lay out, make the mesh, run, price) is also
// what the Python module's tpumesh.stablehlo calls (python/).
#ifndef TPUMESH_TOOLS_RUN_COMMAND_H_
#define TPUMESH_TOOLS_RUN_COMMAND_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "hlo/program.h"
#include "pipeline/report.h"
#include "tools/device_flags.h"

namespace tpumesh::tools {

struct StableHloRun {
  std::string program;  // the .mlir file
  std::string inputs;   // HDF5 input_0 ...; empty: random inputs from `seed`
  std::string outputs;  // HDF5 output_0 ... (run only)
  uint64_t seed = 0;
  bool mxu_precision = false;
  // simulate --stablehlo: priced, no outputs. Without `inputs` a dry run
  // (hlo::Options::dry_run); with them computed for real, so loops whose
  // trip counts depend on the data make their real trips.
  bool dry_run = false;
  std::string xla_generation = "auto";  // auto | 0.4 | current
  bool list_ops = false;                 // print the op table and stop
  bool quiet = false;                    // no progress on stderr
  int64_t max_ops = int64_t{1} << 32;    // run: ops executed at most (hlo::Options::max_executed_ops)
  DeviceFlags dev;
};
Status RunStableHlo(const StableHloRun& o);

// The run of a read module: verified, laid out, on the mesh the device
// flags and the module give (their device counts must agree), computed (or
// priced when o.dry_run) and priced into a report. `inputs` gives @main's
// arguments for the layout (not called in a dry run); `on_op` is the
// interpreter's progress callback (hlo::Options::on_op). o.program names the
// module in messages and in the report; the files of `o` are not read or
// written here.
struct StableHloResult {
  hlo::Layout layout;
  hlo::ProgramRun run;
  pipeline::RunReport report;
};
using StableHloInputsFn = std::function<StatusOr<std::vector<hlo::Tensor>>(const hlo::Layout&)>;
// `cancel`, when given, stops the run with Cancelled (hlo::Options::cancel).
StatusOr<StableHloResult> RunStableHloModule(const hlo::Module& m, const StableHloRun& o,
                                             const StableHloInputsFn& inputs,
                                             std::function<void(int64_t)> on_op = {},
                                             const std::atomic<bool>* cancel = nullptr);

}  // namespace tpumesh::tools

#endif  // TPUMESH_TOOLS_RUN_COMMAND_H_
