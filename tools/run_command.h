// `tpumesh run` and `simulate --stablehlo`: a StableHLO module (hlo/) on the
// emulated mesh, computed or only priced, with the reports every command
// writes. One flow for both (RunStableHlo), told apart by dry_run: the
// command's files, checks and messages around hlo/run.h RunModule (verify,
// lay out, make the mesh, run, price), which the Python module's
// tpumesh.stablehlo calls too (python/).
#ifndef TPUMESH_TOOLS_RUN_COMMAND_H_
#define TPUMESH_TOOLS_RUN_COMMAND_H_

#include <cstdint>
#include <string>

#include "base/status.h"
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

}  // namespace tpumesh::tools

#endif  // TPUMESH_TOOLS_RUN_COMMAND_H_
