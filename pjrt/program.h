// The plugin's compiled programs as pjrt/executable.cc (compile and the
// executables' queries) and pjrt/execute.cc (PJRT_LoadedExecutable_Execute)
// share them: a Program (what every executable made from the same bytes and
// options holds), the opaque PJRT_Executable and PJRT_LoadedExecutable, and
// the mesh an execution runs on. pjrt/'s internal header.
#ifndef TPUMESH_PJRT_PROGRAM_H_
#define TPUMESH_PJRT_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "hlo/module.h"
#include "hlo/program.h"
#include "mesh/mesh.h"
#include "pjrt/client.h"
#include "pjrt/compile_options.h"
#include "pjrt/pjrt_c_api.h"

namespace tpumesh::pjrt {

// A compiled program: what every executable made from the same bytes and
// options shares.
struct Program {
  std::string name;         // the module's name, e.g. "jit_f"
  std::string fingerprint;  // hex of the bytes' and options' hash
  hlo::Module module;
  hlo::Layout layout;
  CompileOptions options;
  std::string chip;  // the client's, for pricing
  std::vector<PJRT_Buffer_Type> output_types;  // per device (kReplicas: one slice)
  std::vector<int64_t> output_dims;            // concatenated
  std::vector<size_t> output_ranks;
  std::vector<const char*> memory_kinds;
  std::vector<size_t> memory_kind_sizes;
  // Each parameter's and output's sharding as a serialized xla.OpSharding
  // (the Shardings extension), and the pointers and sizes handed out.
  std::vector<std::string> parameter_shardings, output_shardings;
  std::vector<const char*> parameter_sharding_data, output_sharding_data;
  std::vector<size_t> parameter_sharding_sizes, output_sharding_sizes;
  // The priced figures (cost_analysis), from a dry run made once when first asked.
  std::once_flag cost_once;
  Status cost_status;
  std::vector<std::string> cost_names;
  std::vector<PJRT_NamedValue> cost;
  // memory_analysis: one device's arguments, outputs and the most HBM the
  // dry run held at once beyond its arguments and outputs.
  int64_t argument_bytes = 0, output_bytes = 0, temp_bytes = 0, peak_bytes = 0;
  // @main's arguments JAX donated (tf.aliasing_output or jax.buffer_donor):
  // consumed by an execution, as XLA consumes them.
  std::vector<bool> donated;
};

}  // namespace tpumesh::pjrt

struct PJRT_Executable {
  std::shared_ptr<tpumesh::pjrt::Program> program;
};

struct PJRT_LoadedExecutable {
  PJRT_Client* client = nullptr;
  std::shared_ptr<tpumesh::pjrt::Program> program;
  std::vector<PJRT_Device*> devices;  // replica-major: [r * partitions + p]
  bool deleted = false;
};

namespace tpumesh::pjrt {

// The PJRT buffer type of an element type (UNIMPLEMENTED for none).
StatusOr<PJRT_Buffer_Type> BufferTypeOf(hlo::ElementType t);

// The emulated mesh a program of `layout` runs on: the client's chip, the
// program's device count and axes; made once per shape and kept.
StatusOr<mesh::Mesh*> RunMesh(PJRT_Client& client, const hlo::Layout& layout);

// PJRT_LoadedExecutable_Execute (pjrt/execute.cc).
PJRT_Error* LoadedExecutableExecute(PJRT_LoadedExecutable_Execute_Args* args);

}  // namespace tpumesh::pjrt

#endif  // TPUMESH_PJRT_PROGRAM_H_
