// PJRT_LoadedExecutable_Execute: arguments out of their buffers (each
// device's piece put in place), the run on the emulated mesh, results cut
// into new buffers on the executable's devices, donated arguments consumed,
// and the chip's view of the run for the report folder and the profiler
// (pjrt/executable.h says what is run; docs/pjrt.md "Compile and execute").
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "base/status.h"
#include "hlo/elementwise.h"
#include "hlo/interpreter.h"
#include "hlo/program.h"
#include "hlo/run.h"
#include "io/atomic_file.h"
#include "pjrt/buffer.h"
#include "pjrt/c_boundary.h"
#include "pjrt/client.h"
#include "pjrt/profiler.h"
#include "pjrt/program.h"
#include "report/report.h"

namespace tpumesh::pjrt {
namespace {

// Copies the block of `local` dims at element `offset` between a row-major
// array of `global` dims and a dense one of the block's own.
void CopyBlock(char* global, const std::vector<int64_t>& gdims, char* local, const std::vector<int64_t>& ldims,
               const std::vector<int64_t>& offset, int64_t element_bytes, bool into_global) {
  const size_t rank = gdims.size();
  if (rank == 0) {
    if (into_global) std::memcpy(global, local, static_cast<size_t>(element_bytes));
    else std::memcpy(local, global, static_cast<size_t>(element_bytes));
    return;
  }
  for (int64_t d : ldims)
    if (d == 0) return;
  const int64_t row = ldims[rank - 1] * element_bytes;
  std::vector<int64_t> gstride(rank, element_bytes);
  for (size_t k = rank - 1; k-- > 0;) gstride[k] = gstride[k + 1] * gdims[k + 1];
  std::vector<int64_t> at(rank, 0);  // the block's index, last dimension 0
  for (int64_t l = 0;; l += row) {
    int64_t g = 0;
    for (size_t k = 0; k < rank; ++k) g += (offset[k] + at[k]) * gstride[k];
    if (into_global) std::memcpy(global + g, local + l, static_cast<size_t>(row));
    else std::memcpy(local + l, global + g, static_cast<size_t>(row));
    size_t k = rank - 1;
    while (k-- > 0) {  // the odometer over all but the last dimension
      if (++at[k] < ldims[k]) break;
      at[k] = 0;
    }
    if (k == static_cast<size_t>(-1)) return;
  }
}

std::string Describe(const PJRT_Buffer& b) {
  std::string s = "PJRT type " + std::to_string(static_cast<int>(b.type)) + " [";
  for (size_t k = 0; k < b.dims.size(); ++k) s += (k ? "," : "") + std::to_string(b.dims[k]);
  return s + "]";
}

// Argument i of the run, whole: one device's buffer; jax 0.4's pmap: every
// device's slice stacked; a global-view program: every device's piece
// under the argument's declared sharding put in its place.
StatusOr<hlo::Tensor> Argument(const Program& p, PJRT_Buffer* const* const* lists, size_t n, size_t i) {
  const hlo::Type& want = p.layout.inputs[i];
  TPUMESH_ASSIGN_OR_RETURN(const PJRT_Buffer_Type want_type, BufferTypeOf(want.element));
  const bool stacked = p.layout.kind == hlo::Layout::Kind::kReplicas;
  const std::string where = "tpumesh: " + p.name + ": argument " + std::to_string(i);
  const int64_t eb = hlo::ElementTypeBytes(want.element);
  hlo::Tensor t;
  t.type = want;
  t.data = mesh::Array::Host(mesh::DType::kU8, {want.size_bytes()});
  char* dst = static_cast<char*>(t.data.mutable_raw());
  // kReplicas: @main's own argument is one device's slice.
  const std::vector<int64_t>& slice = p.module.FindFunc("main")->arg_types[i].dims;
  std::vector<bool> filled;  // global layouts: the pieces written, by linear piece index
  // Unreduced pieces (partial values): the sum of a tile's first copy's
  // partials, accumulated here by linear piece index before it is placed.
  std::vector<std::vector<char>> partial_sums;
  for (size_t d = 0; d < n; ++d) {
    const PJRT_Buffer* b = lists[d][i];
    if (b == nullptr || b->deleted) return InvalidArgumentError(where + " on device " + std::to_string(d) + " is a deleted buffer");
    std::vector<int64_t> local = slice, offset(want.dims.size(), 0);
    int64_t linear = 0;
    hlo::ArrayPiece piece;
    if (!stacked) {
      TPUMESH_ASSIGN_OR_RETURN(piece, hlo::DeclaredPiece(p.module, p.layout, false, i, static_cast<int>(d)));
      int64_t pieces = 1;
      for (size_t k = 0; k < local.size(); ++k) {
        local[k] = want.dims[k] / piece.count[k];
        offset[k] = piece.index[k] * local[k];
        linear = linear * piece.count[k] + piece.index[k];
        pieces *= piece.count[k];
      }
      filled.resize(static_cast<size_t>(pieces), false);
    }
    if (b->type != want_type || b->dims != local) {
      std::string expect = "[";
      for (size_t k = 0; k < local.size(); ++k) expect += (k ? "," : "") + std::to_string(local[k]);
      return InvalidArgumentError(where + " is given as " + Describe(*b) + " on device " + std::to_string(d) +
                                  "; the program takes " + want.ToString() +
                                  (stacked ? ", one slice per device: " : ", as pieces of ") + expect + "] there");
    }
    if (stacked) {
      const size_t per = static_cast<size_t>(want.size_bytes()) / n;
      if (per > 0) std::memcpy(dst + d * per, b->bytes.data(), per);
    } else if (piece.unreduced_count > 1) {
      if (piece.replica != 0) continue;  // the first copy's partials make the value
      partial_sums.resize(filled.size());
      auto& sum = partial_sums[static_cast<size_t>(linear)];
      if (sum.empty()) {
        sum = b->bytes;
      } else {
        int64_t count = 1;
        for (int64_t k : local) count *= k;
        TPUMESH_RETURN_IF_ERROR(hlo::AddElements(want.element, sum.data(), b->bytes.data(), count, sum.data()));
      }
    } else if (!filled[static_cast<size_t>(linear)]) {  // a replicated piece: its first copy
      filled[static_cast<size_t>(linear)] = true;
      CopyBlock(dst, want.dims, const_cast<char*>(b->bytes.data()), local, offset, eb, /*into_global=*/true);
    }
  }
  // Each unreduced tile's sum in its place.
  for (size_t d = 0; d < n && !partial_sums.empty(); ++d) {
    TPUMESH_ASSIGN_OR_RETURN(const hlo::ArrayPiece piece,
                             hlo::DeclaredPiece(p.module, p.layout, false, i, static_cast<int>(d)));
    if (piece.replica != 0 || piece.unreduced != 0) continue;
    std::vector<int64_t> local(want.dims.size()), offset(want.dims.size());
    int64_t linear = 0;
    for (size_t k = 0; k < local.size(); ++k) {
      local[k] = want.dims[k] / piece.count[k];
      offset[k] = piece.index[k] * local[k];
      linear = linear * piece.count[k] + piece.index[k];
    }
    CopyBlock(dst, want.dims, partial_sums[static_cast<size_t>(linear)].data(), local, offset, eb, /*into_global=*/true);
  }
  return t;
}

// The execution's chip view, when asked for: with TPUMESH_PJRT_REPORT_DIR
// set, the report (per device and op type, modelled seconds) and the trace
// (one event per op per device) are written as
// <dir>/<program>.<n>.report.json and .trace.json, n counting the client's
// executions from 1, skipping names already taken; while a jax.profiler.trace session runs, the report is
// returned for the profiler (pjrt/profiler.h). Null when neither asks.
StatusOr<std::shared_ptr<const report::RunReport>> ReportRun(const PJRT_LoadedExecutable& exe,
                                                              const hlo::ProgramRun& run, const mesh::Mesh& mesh,
                                                              hlo::XlaGeneration generation) {
  const char* dir = std::getenv("TPUMESH_PJRT_REPORT_DIR");
  const bool to_dir = dir != nullptr && *dir != '\0';
  const bool to_profiler = ProfilingActive();
  if (!to_dir && !to_profiler) return std::shared_ptr<const report::RunReport>();
  const Program& p = *exe.program;
  hlo::RunOptions o;
  o.program = p.name;
  o.keep_ops = true;
  auto r = std::make_shared<const report::RunReport>(hlo::ReportOf(run, p.layout, mesh, o, generation));
  if (to_dir) {
    // The next n whose two files are both absent: an earlier process's
    // files in the folder are never overwritten; the pair is written all or
    // none.
    std::string base;
    std::error_code ec;
    do {
      base = std::string(dir) + "/" + p.name + "." + std::to_string(++exe.client->executions);
    } while (std::filesystem::exists(base + ".report.json", ec) || std::filesystem::exists(base + ".trace.json", ec));
    TPUMESH_RETURN_IF_ERROR(WriteFilesAtomic({{base + ".report.json", report::ReportJson(*r)},
                                              {base + ".trace.json", report::TraceJson(*r)}})
                                .WithContext("TPUMESH_PJRT_REPORT_DIR"));
  }
  return to_profiler ? r : std::shared_ptr<const report::RunReport>();
}

Status Execute(PJRT_LoadedExecutable& exe, PJRT_LoadedExecutable_Execute_Args& args) {
  const int64_t host_start_ns = WallNanos();
  const Program& p = *exe.program;
  if (exe.deleted) return FailedPreconditionError("tpumesh: " + p.name + " was deleted");
  std::vector<PJRT_Device*> devices = exe.devices;
  if (args.execute_device != nullptr) {
    if (p.layout.devices != 1)
      return UnimplementedError("tpumesh: " + p.name + " runs on " + std::to_string(p.layout.devices) +
                                " devices; launching it on one device at a time is not implemented");
    devices = {args.execute_device};
  }
  const size_t n = devices.size();
  if (args.num_devices != n)
    return InvalidArgumentError("tpumesh: " + p.name + " runs on " + std::to_string(n) + " device(s), given " +
                                std::to_string(args.num_devices) + " argument lists");
  if (args.num_args != p.layout.inputs.size())
    return InvalidArgumentError("tpumesh: " + p.name + " takes " + std::to_string(p.layout.inputs.size()) +
                                " arguments, given " + std::to_string(args.num_args));
  std::vector<hlo::Tensor> inputs;
  for (size_t i = 0; i < args.num_args; ++i) {
    TPUMESH_ASSIGN_OR_RETURN(hlo::Tensor t, Argument(p, args.argument_lists, n, i));
    inputs.push_back(std::move(t));
  }
  TPUMESH_ASSIGN_OR_RETURN(mesh::Mesh * mesh, RunMesh(*exe.client, p.layout));
  // One execution at a time per client: the emulated devices' clocks and
  // HBM accounting are the mesh's, and JAX may call from several threads.
  std::lock_guard<std::mutex> one_at_a_time(exe.client->execute_mutex);
  hlo::Options o;
  o.generation = hlo::DetectGeneration(p.module);
  std::vector<mesh::OpRecord> unused;
  o.ops = &unused;  // per device, set by RunProgram
  TPUMESH_ASSIGN_OR_RETURN(hlo::ProgramRun run, hlo::RunProgram(p.module, p.layout, *mesh, std::move(inputs), o));
  TPUMESH_ASSIGN_OR_RETURN(std::shared_ptr<const report::RunReport> report, ReportRun(exe, run, *mesh, o.generation));
  // Results: device d's slice (pmap) or the whole value, on device d.
  const bool stacked = p.layout.kind == hlo::Layout::Kind::kReplicas;
  std::vector<std::vector<std::unique_ptr<PJRT_Buffer>>> made(n);
  size_t dim_at = 0;
  for (size_t i = 0; i < run.outputs.size(); ++i) {
    const size_t rank = p.output_ranks[i];
    std::vector<int64_t> dims(p.output_dims.begin() + static_cast<std::ptrdiff_t>(dim_at),
                              p.output_dims.begin() + static_cast<std::ptrdiff_t>(dim_at + rank));
    dim_at += rank;
    const hlo::Tensor& out = run.outputs[i];
    const int64_t eb = hlo::ElementTypeBytes(out.type.element);
    int64_t per = eb;
    for (int64_t k : dims) per *= k;
    for (size_t d = 0; d < n; ++d) {
      TPUMESH_ASSIGN_OR_RETURN(auto b, NewBuffer(devices[d], p.output_types[i], dims, per,
                                                 "result " + std::to_string(i) + " of " + p.name));
      char* global = const_cast<char*>(static_cast<const char*>(out.data.raw()));
      if (stacked) {
        if (per > 0) std::memcpy(b->bytes.data(), global + per * static_cast<int64_t>(d), static_cast<size_t>(per));
      } else {
        TPUMESH_ASSIGN_OR_RETURN(const hlo::ArrayPiece piece,
                                 hlo::DeclaredPiece(p.module, p.layout, true, i, static_cast<int>(d)));
        std::vector<int64_t> offset(dims.size());
        for (size_t k = 0; k < dims.size(); ++k) offset[k] = piece.index[k] * dims[k];
        // Device d's piece of its own view: its own value where replicas
        // differ. An unreduced result's value is the sum over its partial
        // holders: the first holds it all, the others zeros.
        char* view = i < run.device_views.size() && d < run.device_views[i].size()
                         ? const_cast<char*>(static_cast<const char*>(run.device_views[i][d].raw()))
                         : global;
        if (piece.unreduced != 0) {
          std::fill(b->bytes.begin(), b->bytes.end(), 0);
        } else {
          CopyBlock(view, out.type.dims, b->bytes.data(), dims, offset, eb, /*into_global=*/false);
        }
      }
      made[d].push_back(std::move(b));
    }
  }
  // Donated arguments are consumed (their HBM freed, is_deleted true), but
  // those the call lists as not donatable.
  std::vector<bool> consume = p.donated;
  const PJRT_ExecuteOptions* eo = args.options;
  if (eo != nullptr && eo->struct_size >= offsetof(PJRT_ExecuteOptions, num_non_donatable_input_indices) + sizeof(size_t))
    for (size_t k = 0; k < eo->num_non_donatable_input_indices; ++k) {
      const int64_t at = eo->non_donatable_input_indices[k];
      if (at >= 0 && static_cast<size_t>(at) < consume.size()) consume[static_cast<size_t>(at)] = false;
    }
  for (size_t d = 0; d < n; ++d)
    for (size_t i = 0; i < consume.size() && i < args.num_args; ++i)
      if (consume[i]) DeleteBuffer(*args.argument_lists[d][i]);
  for (size_t d = 0; d < n; ++d) {
    for (size_t i = 0; i < made[d].size(); ++i) args.output_lists[d][i] = made[d][i].release();
    if (args.device_complete_events != nullptr) args.device_complete_events[d] = ReadyEvent();
  }
  if (report) {  // the profiler's, after the results are made: the host's wall time is the whole call's
    std::vector<int64_t> ids;
    for (PJRT_Device* d : devices) ids.push_back(d->description.id);
    RecordExecution({p.name, host_start_ns, WallNanos(), std::move(ids), std::move(report)});
  }
  return OkStatus();
}

}  // namespace

PJRT_Error* LoadedExecutableExecute(PJRT_LoadedExecutable_Execute_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_LoadedExecutable_Execute");
  return ToError(Execute(*args->executable, *args));
}

}  // namespace tpumesh::pjrt
