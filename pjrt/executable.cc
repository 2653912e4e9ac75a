#include "pjrt/executable.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "hlo/module.h"
#include "hlo/program.h"
#include "hlo/run.h"
#include "pjrt/buffer.h"
#include "pjrt/c_boundary.h"
#include "pjrt/client.h"
#include "pjrt/compile_options.h"
#include "pjrt/program.h"
#include "report/report.h"


namespace {
std::atomic<TpumeshPjrtProgramDecoder> g_decoder{nullptr};

struct Sink {
  bool delivered = false, ok = false;
  std::string text;
};
}  // namespace

extern "C" __attribute__((visibility("default"))) void TpumeshPjrt_SetProgramDecoder(
    TpumeshPjrtProgramDecoder decoder) {
  g_decoder.store(decoder);
}

extern "C" __attribute__((visibility("default"))) void TpumeshPjrt_DeliverText(void* sink, const char* text,
                                                                              size_t size, int ok) {
  if (sink == nullptr) return;
  auto* s = static_cast<Sink*>(sink);
  s->delivered = true;
  s->ok = ok != 0;
  s->text.assign(text != nullptr ? text : "", text != nullptr ? size : 0);
}

namespace tpumesh::pjrt {

StatusOr<PJRT_Buffer_Type> BufferTypeOf(hlo::ElementType t) {
  switch (t) {
    case hlo::ElementType::kPred: return PJRT_Buffer_Type_PRED;
    case hlo::ElementType::kI8: return PJRT_Buffer_Type_S8;
    case hlo::ElementType::kI16: return PJRT_Buffer_Type_S16;
    case hlo::ElementType::kI32: return PJRT_Buffer_Type_S32;
    case hlo::ElementType::kI64: return PJRT_Buffer_Type_S64;
    case hlo::ElementType::kU8: return PJRT_Buffer_Type_U8;
    case hlo::ElementType::kU16: return PJRT_Buffer_Type_U16;
    case hlo::ElementType::kU32: return PJRT_Buffer_Type_U32;
    case hlo::ElementType::kU64: return PJRT_Buffer_Type_U64;
    case hlo::ElementType::kF16: return PJRT_Buffer_Type_F16;
    case hlo::ElementType::kBF16: return PJRT_Buffer_Type_BF16;
    case hlo::ElementType::kF32: return PJRT_Buffer_Type_F32;
    case hlo::ElementType::kF64: return PJRT_Buffer_Type_F64;
    case hlo::ElementType::kC64: return PJRT_Buffer_Type_C64;
    case hlo::ElementType::kC128: return PJRT_Buffer_Type_C128;
  }
  return UnimplementedError("tpumesh: an element type without a PJRT buffer type");
}

StatusOr<mesh::Mesh*> RunMesh(PJRT_Client& client, const hlo::Layout& layout) {
  mesh::MeshSpec user;
  user.chip = client.spec.chip;
  const mesh::MeshSpec spec = hlo::DefaultMeshSpec(layout, user);
  const std::string key = std::to_string(spec.devices) + "|" + spec.axes;
  std::lock_guard<std::mutex> lock(client.run_mutex);
  auto& slot = client.run_meshes[key];
  if (!slot) {
    TPUMESH_ASSIGN_OR_RETURN(slot, mesh::CreateMesh(spec));
  }
  return slot.get();
}

namespace {

using hlo::ElementType;


uint64_t Fnv1a(std::string_view a, std::string_view b) {
  uint64_t h = 1469598103934665603ull;
  for (std::string_view s : {a, std::string_view("\0", 1), b})
    for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

// The program's StableHLO text: MLIR text as given; bytecode ("ML\xefR")
// through the installed decoder.
StatusOr<std::string> ProgramText(std::string_view code) {
  if (code.substr(0, 4) != std::string_view("ML\xef" "R", 4)) return std::string(code);
  const TpumeshPjrtProgramDecoder decode = g_decoder.load();
  if (decode == nullptr)
    return FailedPreconditionError(
        "tpumesh: the program is MLIR bytecode and no decoder is installed (jax_plugins.tpumesh.initialize() "
        "installs the process's jaxlib as the decoder; the plugin cannot compile outside a Python process with jax)");
  Sink sink;
  decode(code.data(), code.size(), &sink);
  if (!sink.delivered) return InternalError("tpumesh: the program decoder returned nothing");
  if (!sink.ok) return InvalidArgumentError("tpumesh: decoding the program: " + sink.text);
  return std::move(sink.text);
}

// The module's name ("module @jit_f" -> "jit_f"), for messages.
std::string ModuleName(std::string_view text) {
  const size_t at = text.find("module @");
  if (at == std::string_view::npos) return "program";
  size_t end = at + 8;
  while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_' ||
                               text[end] == '.' || text[end] == '-'))
    ++end;
  std::string name(text.substr(at + 8, end - at - 8));
  return name.empty() ? "program" : name;
}

// @main's argument (result) i's declared sharding as an xla.OpSharding over
// the program's logical devices 0..N-1: each device's piece (DeclaredPiece)
// placed in the tile grid, the devices holding the same piece as replicas.
StatusOr<std::string> OpShardingOf(const Program& p, bool result, size_t i) {
  const int n = p.layout.devices;
  std::vector<hlo::ArrayPiece> pieces;
  for (int d = 0; d < n; ++d) {
    TPUMESH_ASSIGN_OR_RETURN(hlo::ArrayPiece piece, hlo::DeclaredPiece(p.module, p.layout, result, i, d));
    pieces.push_back(std::move(piece));
  }
  const std::vector<int64_t>& tiles = pieces[0].count;
  const int64_t unreduced = pieces[0].unreduced_count;
  int64_t tile_count = 1;
  for (int64_t t : tiles) tile_count *= t;
  if (tile_count == 1 && unreduced == 1) return SerializeOpSharding({}, 1, 1, {});
  const int64_t replicas = n / tile_count / unreduced;
  // Per tile, its holders by (copy, unreduced position): the tile grid's
  // last two dimensions.
  std::vector<std::vector<int64_t>> holders(static_cast<size_t>(tile_count),
                                            std::vector<int64_t>(static_cast<size_t>(n / tile_count), -1));
  for (int d = 0; d < n; ++d) {
    const hlo::ArrayPiece& piece = pieces[static_cast<size_t>(d)];
    int64_t linear = 0;
    for (size_t k = 0; k < tiles.size(); ++k) linear = linear * tiles[k] + piece.index[k];
    const int64_t slot = piece.replica * unreduced + piece.unreduced;
    auto& h = holders[static_cast<size_t>(linear)];
    if (slot < 0 || slot >= static_cast<int64_t>(h.size()) || h[static_cast<size_t>(slot)] >= 0)
      return UnimplementedError("tpumesh: " + p.name + ": " + (result ? "result " : "argument ") + std::to_string(i) +
                                "'s sharding gives its pieces unequal copies");
    h[static_cast<size_t>(slot)] = d;
  }
  std::vector<int64_t> devices;
  for (const auto& h : holders) devices.insert(devices.end(), h.begin(), h.end());
  return SerializeOpSharding(tiles, replicas, unreduced, devices);
}

StatusOr<std::shared_ptr<Program>> MakeProgram(std::string_view code, std::string_view options_bytes) {
  auto p = std::make_shared<Program>();
  TPUMESH_ASSIGN_OR_RETURN(p->options, ParseCompileOptions(options_bytes));
  TPUMESH_ASSIGN_OR_RETURN(const std::string text, ProgramText(code));
  p->name = ModuleName(text);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(Fnv1a(code, options_bytes)));
  p->fingerprint = hex;
  TPUMESH_ASSIGN_OR_RETURN(p->module, hlo::ParseModule(text, p->name + ".mlir"));
  TPUMESH_RETURN_IF_ERROR(hlo::Verify(p->module));
  TPUMESH_ASSIGN_OR_RETURN(p->layout, hlo::LayoutOf(p->module));
  TPUMESH_RETURN_IF_ERROR(hlo::CompleteResultShardings(p->module, p->layout, p->name));
  const hlo::Func* main = p->module.FindFunc("main");
  for (size_t i = 0; i < main->result_types.size(); ++i) {
    const hlo::Type& t = main->result_types[i];
    TPUMESH_ASSIGN_OR_RETURN(PJRT_Buffer_Type bt, BufferTypeOf(t.element));
    p->output_types.push_back(bt);
    // One device's piece (every device's has the same shape: splits are even).
    std::vector<int64_t> local = t.dims;
    if (p->layout.kind == hlo::Layout::Kind::kGlobal) {
      TPUMESH_ASSIGN_OR_RETURN(const hlo::ArrayPiece piece, hlo::DeclaredPiece(p->module, p->layout, true, i, 0));
      for (size_t k = 0; k < local.size(); ++k) local[k] /= piece.count[k];
    }
    p->output_dims.insert(p->output_dims.end(), local.begin(), local.end());
    p->output_ranks.push_back(t.dims.size());
    static const char kDevice[] = "device";
    p->memory_kinds.push_back(kDevice);
    p->memory_kind_sizes.push_back(sizeof kDevice - 1);
  }
  for (size_t i = 0; i < main->arg_types.size(); ++i) {
    const hlo::Attr* a = i < main->arg_attrs.size() ? &main->arg_attrs[i] : nullptr;
    p->donated.push_back(a != nullptr && (a->Find("tf.aliasing_output") != nullptr || a->Find("jax.buffer_donor") != nullptr));
  }
  if (p->layout.kind == hlo::Layout::Kind::kGlobal) {
    for (size_t i = 0; i < main->arg_types.size(); ++i) {
      TPUMESH_ASSIGN_OR_RETURN(std::string sh, OpShardingOf(*p, false, i));
      p->parameter_shardings.push_back(std::move(sh));
    }
    for (size_t i = 0; i < main->result_types.size(); ++i) {
      TPUMESH_ASSIGN_OR_RETURN(std::string sh, OpShardingOf(*p, true, i));
      p->output_shardings.push_back(std::move(sh));
    }
  } else {  // every device's own (jax 0.4's pmap: replicas, no partitioning)
    p->parameter_shardings.assign(main->arg_types.size(), SerializeOpSharding({}, 1, 1, {}));
    p->output_shardings.assign(main->result_types.size(), SerializeOpSharding({}, 1, 1, {}));
  }
  for (const std::string& sh : p->parameter_shardings) {
    p->parameter_sharding_data.push_back(sh.data());
    p->parameter_sharding_sizes.push_back(sh.size());
  }
  for (const std::string& sh : p->output_shardings) {
    p->output_sharding_data.push_back(sh.data());
    p->output_sharding_sizes.push_back(sh.size());
  }
  return p;
}

// The devices a program runs on: the compile options' assignment, else the
// first ones of the client.
StatusOr<std::vector<PJRT_Device*>> DevicesOf(const Program& p, PJRT_Client& client) {
  const int n = p.layout.devices;
  const auto& da = p.options.devices;
  std::vector<PJRT_Device*> devices;
  if (!da.empty()) {
    for (const auto& replica : da)
      for (int64_t id : replica) {
        if (id < 0 || id >= static_cast<int64_t>(client.device_handles.size()))
          return InvalidArgumentError("tpumesh: the device assignment names device " + std::to_string(id) +
                                      "; the client has " + std::to_string(client.device_handles.size()));
        devices.push_back(client.device_handles[static_cast<size_t>(id)]);
      }
  } else {
    for (int d = 0; d < n && d < static_cast<int>(client.device_handles.size()); ++d)
      devices.push_back(client.device_handles[static_cast<size_t>(d)]);
  }
  if (static_cast<int>(devices.size()) != n)
    return InvalidArgumentError("tpumesh: " + p.name + " runs on " + std::to_string(n) + " device(s) (" +
                                p.layout.Describe() + ") but is compiled for " + std::to_string(devices.size()));
  return devices;
}


PJRT_Error* ClientCompile(PJRT_Client_Compile_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Client_Compile");
  if (args->program == nullptr) return ToError(InvalidArgumentError("tpumesh: PJRT_Client_Compile: no program"));
  const PJRT_Program& program = *args->program;
  const std::string_view format(program.format, program.format_size);
  if (format != "mlir")
    return ToError(UnimplementedError("tpumesh: programs in format '" + std::string(format) +
                                      "' are not compiled (StableHLO as MLIR only)"));
  const std::string_view code(program.code, program.code_size);
  const std::string_view options(args->compile_options, args->compile_options_size);
  PJRT_Client& client = *args->client;
  const std::string key = std::to_string(Fnv1a(code, options)) + ":" + std::to_string(code.size());
  std::shared_ptr<Program> p;
  {
    std::lock_guard<std::mutex> lock(client.run_mutex);
    if (auto it = client.compiled.find(key); it != client.compiled.end()) p = it->second;
  }
  if (!p) {
    auto made = MakeProgram(code, options);
    if (!made.ok()) return ToError(made.status());
    p = *std::move(made);
    p->chip = client.spec.chip;
    std::lock_guard<std::mutex> lock(client.run_mutex);
    client.compiled[key] = p;
  }
  auto devices = DevicesOf(*p, client);
  if (!devices.ok()) return ToError(devices.status());
  auto loaded = std::make_unique<PJRT_LoadedExecutable>();
  loaded->client = &client;
  loaded->program = std::move(p);
  loaded->devices = *std::move(devices);
  args->executable = loaded.release();
  return nullptr;
}

// ---- Executable

PJRT_Error* ExecutableDestroy(PJRT_Executable_Destroy_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Executable_Destroy");
  delete args->executable;
  return nullptr;
}

PJRT_Error* ExecutableName(PJRT_Executable_Name_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Executable_Name");
  const std::string& name = args->executable->program->name;
  args->executable_name = name.data();
  args->executable_name_size = name.size();
  return nullptr;
}

PJRT_Error* ExecutableNumReplicas(PJRT_Executable_NumReplicas_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Executable_NumReplicas");
  const Program& p = *args->executable->program;
  args->num_replicas = p.layout.kind == hlo::Layout::Kind::kReplicas ? p.layout.devices : 1;
  return nullptr;
}

PJRT_Error* ExecutableNumPartitions(PJRT_Executable_NumPartitions_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Executable_NumPartitions");
  const Program& p = *args->executable->program;
  args->num_partitions = p.layout.kind == hlo::Layout::Kind::kReplicas ? 1 : p.layout.devices;
  return nullptr;
}

PJRT_Error* ExecutableNumOutputs(PJRT_Executable_NumOutputs_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Executable_NumOutputs");
  args->num_outputs = args->executable->program->output_types.size();
  return nullptr;
}

PJRT_Error* ExecutableSizeOfGeneratedCode(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Executable_SizeOfGeneratedCodeInBytes");
  args->size_in_bytes = 0;  // interpreted: no generated code
  return nullptr;
}

PJRT_Error* ExecutableFingerprint(PJRT_Executable_Fingerprint_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Executable_Fingerprint");
  const std::string& f = args->executable->program->fingerprint;
  args->executable_fingerprint = f.data();
  args->executable_fingerprint_size = f.size();
  return nullptr;
}

PJRT_Error* LoadedExecutableFingerprint(PJRT_LoadedExecutable_Fingerprint_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_LoadedExecutable_Fingerprint");
  const std::string& f = args->executable->program->fingerprint;
  args->executable_fingerprint = f.data();
  args->executable_fingerprint_size = f.size();
  return nullptr;
}

PJRT_NamedValue FloatValue(const std::string& name, double v) {
  PJRT_NamedValue n{};
  n.struct_size = kPjrtStructSize<PJRT_NamedValue>;
  n.name = name.data();
  n.name_size = name.size();
  n.type = PJRT_NamedValue_kFloat;
  n.float_value = static_cast<float>(v);
  n.value_size = 1;
  return n;
}

// XLA's keys (per device, as XLA's cost analysis of one partition), and
// ours: the modelled seconds of the chip.
void PriceProgram(Program& p, const std::string& chip) {
  hlo::RunOptions o;
  o.program = p.name;
  o.mesh.chip = chip;
  o.dry_run = true;
  auto r = hlo::RunModule(p.module, o, {});
  if (!r.ok()) {
    p.cost_status = r.status();
    return;
  }
  const report::RunReport& rep = r->report;
  // Device 0's arguments and results: its slice (pmap) or its piece; the
  // interpreter's devices hold the global values, so its temporaries are
  // the peak beyond the global arguments and results.
  int64_t global = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const bool result = pass == 1;
    const auto& types = result ? p.layout.outputs : p.layout.inputs;
    for (size_t i = 0; i < types.size(); ++i) {
      int64_t bytes = types[i].size_bytes();
      global += bytes;
      if (p.layout.kind == hlo::Layout::Kind::kReplicas) {
        bytes /= p.layout.devices;
      } else if (auto piece = hlo::DeclaredPiece(p.module, p.layout, result, i, 0); piece.ok()) {
        for (int64_t c : piece->count) bytes /= c;
      }
      (result ? p.output_bytes : p.argument_bytes) += bytes;
    }
  }
  p.peak_bytes = r->run.hbm_peak_bytes.empty() ? 0 : r->run.hbm_peak_bytes[0];
  p.temp_bytes = std::max<int64_t>(0, p.peak_bytes - global);
  const mesh::OpTypeTotals t = rep.logs.empty() ? mesh::OpTypeTotals{} : rep.logs[0].total();
  const std::pair<const char*, double> values[] = {
      {"flops", t.flops},
      {"transcendentals", t.transcendentals},
      {"bytes accessed", t.bytes},
      {"tpumesh_modelled_seconds", rep.modelled_seconds()},
      {"tpumesh_mxu_seconds", t.mxu_seconds},
      {"tpumesh_hbm_seconds", t.hbm_seconds},
      {"tpumesh_ici_seconds", t.ici_seconds},
  };
  p.cost_names.reserve(std::size(values));  // the values point into these strings
  for (const auto& [name, v] : values) {
    p.cost_names.emplace_back(name);
    p.cost.push_back(FloatValue(p.cost_names.back(), v));
  }
}

PJRT_Error* ExecutableGetCostAnalysis(PJRT_Executable_GetCostAnalysis_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Executable_GetCostAnalysis");
  Program& p = *args->executable->program;
  std::call_once(p.cost_once, [&] { PriceProgram(p, p.chip); });
  if (!p.cost_status.ok()) return ToError(p.cost_status);
  args->properties = p.cost.data();
  args->num_properties = p.cost.size();
  return nullptr;
}

PJRT_Error* ExecutableGetCompiledMemoryStats(PJRT_Executable_GetCompiledMemoryStats_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Executable_GetCompiledMemoryStats");
  Program& p = *args->executable->program;
  std::call_once(p.cost_once, [&] { PriceProgram(p, p.chip); });
  if (!p.cost_status.ok()) return ToError(p.cost_status);
  args->generated_code_size_in_bytes = 0;  // interpreted: no code
  args->argument_size_in_bytes = p.argument_bytes;
  args->output_size_in_bytes = p.output_bytes;
  args->alias_size_in_bytes = 0;
  args->temp_size_in_bytes = p.temp_bytes;
  auto fits = [&](size_t end) { return args->struct_size >= end; };
  using A = PJRT_Executable_GetCompiledMemoryStats_Args;
  if (fits(offsetof(A, host_temp_size_in_bytes) + 8)) {
    args->host_generated_code_size_in_bytes = 0;
    args->host_argument_size_in_bytes = 0;
    args->host_output_size_in_bytes = 0;
    args->host_alias_size_in_bytes = 0;
    args->host_temp_size_in_bytes = 0;
  }
  if (fits(offsetof(A, peak_memory_in_bytes) + 8)) args->peak_memory_in_bytes = p.peak_bytes;
  return nullptr;
}

PJRT_Error* ExecutableOutputElementTypes(PJRT_Executable_OutputElementTypes_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Executable_OutputElementTypes");
  Program& p = *args->executable->program;
  args->output_types = p.output_types.data();
  args->num_output_types = p.output_types.size();
  return nullptr;
}

PJRT_Error* ExecutableOutputDimensions(PJRT_Executable_OutputDimensions_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Executable_OutputDimensions");
  const Program& p = *args->executable->program;
  args->num_outputs = p.output_ranks.size();
  args->dims = p.output_dims.data();
  args->dim_sizes = p.output_ranks.data();
  return nullptr;
}

PJRT_Error* ExecutableOutputMemoryKinds(PJRT_Executable_OutputMemoryKinds_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Executable_OutputMemoryKinds");
  const Program& p = *args->executable->program;
  args->num_outputs = p.memory_kinds.size();
  args->memory_kinds = p.memory_kinds.data();
  args->memory_kind_sizes = p.memory_kind_sizes.data();
  return nullptr;
}

// ---- LoadedExecutable

PJRT_Error* LoadedExecutableDestroy(PJRT_LoadedExecutable_Destroy_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_LoadedExecutable_Destroy");
  delete args->executable;
  return nullptr;
}

PJRT_Error* LoadedExecutableGetExecutable(PJRT_LoadedExecutable_GetExecutable_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_LoadedExecutable_GetExecutable");
  args->executable = new PJRT_Executable{args->loaded_executable->program};
  return nullptr;
}

PJRT_Error* LoadedExecutableAddressableDevices(PJRT_LoadedExecutable_AddressableDevices_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_LoadedExecutable_AddressableDevices");
  args->addressable_devices = args->executable->devices.data();
  args->num_addressable_devices = args->executable->devices.size();
  return nullptr;
}

PJRT_Error* LoadedExecutableDelete(PJRT_LoadedExecutable_Delete_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_LoadedExecutable_Delete");
  args->executable->deleted = true;
  return nullptr;
}

PJRT_Error* LoadedExecutableIsDeleted(PJRT_LoadedExecutable_IsDeleted_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_LoadedExecutable_IsDeleted");
  args->is_deleted = args->executable->deleted;
  return nullptr;
}

PJRT_Error* ParameterShardings(PJRT_Shardings_PJRT_Executable_ParameterShardings_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Shardings_PJRT_Executable_ParameterShardings");
  const Program& p = *args->executable->program;
  args->num_parameters = p.parameter_shardings.size();
  args->shardings = p.parameter_sharding_data.data();
  args->sharding_sizes = p.parameter_sharding_sizes.data();
  return nullptr;
}

PJRT_Error* OutputShardings(PJRT_Shardings_PJRT_Executable_OutputShardings_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Shardings_PJRT_Executable_OutputShardings");
  const Program& p = *args->executable->program;
  args->num_outputs = p.output_shardings.size();
  args->shardings = p.output_sharding_data.data();
  args->sharding_sizes = p.output_sharding_sizes.data();
  return nullptr;
}

PJRT_Error* LoadedExecutableGetDeviceAssignment(PJRT_LoadedExecutable_GetDeviceAssignment_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_LoadedExecutable_GetDeviceAssignment");
  const PJRT_LoadedExecutable& exe = *args->executable;
  const Program& p = *exe.program;
  const bool replicas = p.layout.kind == hlo::Layout::Kind::kReplicas;
  const size_t n = exe.devices.size();
  std::vector<std::vector<int64_t>> ids(replicas ? n : 1, std::vector<int64_t>(replicas ? 1 : n));
  for (size_t k = 0; k < n; ++k) {
    const int64_t id = exe.devices[k]->description.id;
    if (replicas) ids[k][0] = id;
    else ids[0][k] = id;
  }
  auto* bytes = new std::string(SerializeDeviceAssignment(ids));
  args->serialized_bytes = bytes->data();
  args->serialized_bytes_size = bytes->size();
  args->serialized_device_assignment = reinterpret_cast<PJRT_DeviceAssignmentSerialized*>(bytes);
  args->serialized_device_assignment_deleter = [](PJRT_DeviceAssignmentSerialized* da) {
    delete reinterpret_cast<std::string*>(da);
  };
  return nullptr;
}


}  // namespace

PJRT_Extension_Base* ShardingsExtension() {
  static PJRT_Shardings_Extension extension = [] {
    PJRT_Shardings_Extension e{};
    e.base.struct_size = kPjrtStructSize<PJRT_Shardings_Extension>;
    e.base.type = PJRT_Extension_Type_Shardings;
    e.base.next = nullptr;
    e.PJRT_Shardings_PJRT_Executable_ParameterShardings = ParameterShardings;
    e.PJRT_Shardings_PJRT_Executable_OutputShardings = OutputShardings;
    return e;
  }();
  return &extension.base;
}

void FillExecutableSlots(PJRT_Api& api) {
  api.PJRT_Client_Compile = ClientCompile;
  api.PJRT_Executable_Destroy = ExecutableDestroy;
  api.PJRT_Executable_Name = ExecutableName;
  api.PJRT_Executable_NumReplicas = ExecutableNumReplicas;
  api.PJRT_Executable_NumPartitions = ExecutableNumPartitions;
  api.PJRT_Executable_NumOutputs = ExecutableNumOutputs;
  api.PJRT_Executable_SizeOfGeneratedCodeInBytes = ExecutableSizeOfGeneratedCode;
  api.PJRT_Executable_Fingerprint = ExecutableFingerprint;
  api.PJRT_Executable_GetCostAnalysis = ExecutableGetCostAnalysis;
  api.PJRT_Executable_GetCompiledMemoryStats = ExecutableGetCompiledMemoryStats;
  api.PJRT_Executable_OutputElementTypes = ExecutableOutputElementTypes;
  api.PJRT_Executable_OutputDimensions = ExecutableOutputDimensions;
  api.PJRT_Executable_OutputMemoryKinds = ExecutableOutputMemoryKinds;
  api.PJRT_LoadedExecutable_Destroy = LoadedExecutableDestroy;
  api.PJRT_LoadedExecutable_GetExecutable = LoadedExecutableGetExecutable;
  api.PJRT_LoadedExecutable_AddressableDevices = LoadedExecutableAddressableDevices;
  api.PJRT_LoadedExecutable_Delete = LoadedExecutableDelete;
  api.PJRT_LoadedExecutable_IsDeleted = LoadedExecutableIsDeleted;
  api.PJRT_LoadedExecutable_Execute = LoadedExecutableExecute;
  api.PJRT_LoadedExecutable_Fingerprint = LoadedExecutableFingerprint;
  api.PJRT_LoadedExecutable_GetDeviceAssignment = LoadedExecutableGetDeviceAssignment;
}

}  // namespace tpumesh::pjrt
