#include "hlo/program.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>

#include "base/printable.h"
#include "hlo/partition.h"
#include "hlo/sharding.h"
#include "hlo/elementwise.h"
#include "mesh/collectives.h"

namespace tpumesh::hlo {
namespace {

int64_t IntModuleAttr(const Module& m, std::string_view key, int64_t fallback) {
  const Attr* a = m.FindAttr(key);
  return a && a->kind == Attr::Kind::kInt ? a->i : fallback;
}

// The local type a device sees of a kReplicas global type and back.
Type WithDevices(Type t, int n) {
  if (t.dims.empty()) t.dims.push_back(n);
  else t.dims[0] *= n;
  return t;
}

}  // namespace

std::string Layout::Describe() const {
  const std::string mesh = axes.empty() ? "data=" + std::to_string(devices) : mesh::MeshAxesToString(axes);
  if (kind == Kind::kReplicas) return "pmap over " + std::to_string(devices) + " replicas (mesh " + mesh + ")";
  return "global arrays on " + std::to_string(devices) + " device(s) (mesh " + mesh + ")";
}

StatusOr<Layout> LayoutOf(const Module& m) {
  const Func* main = m.FindFunc("main");
  if (!main) return InvalidArgumentError(m.file + ": no @main function");
  Layout l;
  const int64_t replicas = IntModuleAttr(m, "mhlo.num_replicas", 1);
  const int64_t partitions = IntModuleAttr(m, "mhlo.num_partitions", 1);
  if (replicas < 1 || partitions < 1 || replicas > mesh::kMaxDevices || partitions > mesh::kMaxDevices ||
      (replicas > 1 && partitions > 1))
    return InvalidArgumentError(m.file + ": mhlo.num_replicas " + std::to_string(replicas) + " x mhlo.num_partitions " +
                                std::to_string(partitions) + " is not supported (one of them 1, at most " +
                                std::to_string(mesh::kMaxDevices) + ")");
  // Each sdy.mesh axis as written (an int past int's range would wrap).
  for (const Op& op : m.ops) {
    const Attr* mesh = op.name == "sdy.mesh" ? op.Find("mesh") : nullptr;
    const Attr* list = mesh ? mesh->Find("list") : nullptr;
    if (!list) continue;
    for (const Attr& a : list->list)
      for (const auto& [name, size] : a.dict)
        if (size.i < 1 || size.i > mesh::kMaxDevices)
          return InvalidArgumentError(m.file + ": sdy.mesh @" + op.callee + " axis " + Quoted(name) + " has " +
                                      std::to_string(size.i) + " devices (an axis holds 1 to " +
                                      std::to_string(mesh::kMaxDevices) + ")");
  }
  l.axes = SdyMeshAxes(m);
  if (replicas > 1) {
    l.kind = Layout::Kind::kReplicas;
    l.devices = static_cast<int>(replicas);
    for (const Type& t : main->arg_types) l.inputs.push_back(WithDevices(t, l.devices));
    for (const Type& t : main->result_types) l.outputs.push_back(WithDevices(t, l.devices));
  } else {
    l.devices = static_cast<int>(partitions);
    l.inputs = main->arg_types;
    l.outputs = main->result_types;
  }
  if (!l.axes.empty()) {
    int64_t n = 1;
    for (const auto& a : l.axes) n *= a.size;
    if (n != l.devices)
      return InvalidArgumentError(m.file + ": sdy.mesh " + mesh::MeshAxesToString(l.axes) + " has " + std::to_string(n) +
                                  " devices but the module runs on " + std::to_string(l.devices));
  }
  return l;
}

StatusOr<ArrayPiece> DeclaredPiece(const Module& m, const Layout& layout, bool result, size_t i, int device) {
  if (layout.kind != Layout::Kind::kGlobal) return InvalidArgumentError(m.file + ": a pmap's arguments are not sharded");
  const Func* main = m.FindFunc("main");
  const auto& types = result ? main->result_types : main->arg_types;
  const auto& attrs = result ? main->result_attrs : main->arg_attrs;
  if (i >= types.size()) return InvalidArgumentError(m.file + ": @main has no " + (result ? "result " : "argument ") + std::to_string(i));
  const Type& t = types[i];
  ArrayPiece piece;
  piece.index.assign(t.dims.size(), 0);
  piece.count.assign(t.dims.size(), 1);
  if (i >= attrs.size() || layout.devices == 1) return piece;
  StatusOr<Sharding> sharding = Sharding{};
  if (const Attr* sh = attrs[i].Find("mhlo.sharding"); sh && sh->kind == Attr::Kind::kString) {
    sharding = MhloSharding(sh->s, layout.devices);
  } else if (const Attr* sh = attrs[i].Find("sdy.sharding")) {
    sharding = SdySharding(*sh, m, layout.axes.empty() ? std::vector<mesh::MeshAxis>{{"data", layout.devices}} : layout.axes);
  } else {
    return piece;
  }
  const std::string what = m.file + ": @main's " + (result ? "result " : "argument ") + std::to_string(i);
  if (!sharding.ok()) return sharding.status().WithContext(what);
  const size_t at = static_cast<size_t>(device);
  if (at < sharding->replica.size()) piece.replica = sharding->replica[at];
  if (at < sharding->unreduced.size()) {
    piece.unreduced = sharding->unreduced[at];
    piece.unreduced_count = sharding->unreduced_count;
  }
  if (sharding->tiles.empty()) return piece;  // replicated
  TPUMESH_ASSIGN_OR_RETURN(std::vector<Piece> pieces, sharding->ShardOf(device, t.dims));
  for (size_t k = 0; k < pieces.size() && k < t.dims.size(); ++k) {
    piece.index[k] = pieces[k].index;
    piece.count[k] = pieces[k].count;
  }
  return piece;
}

mesh::MeshSpec DefaultMeshSpec(const Layout& layout, mesh::MeshSpec user) {
  if (user.axes.empty() && !layout.axes.empty()) user.axes = mesh::MeshAxesToString(layout.axes);
  if (user.devices == 0 && user.axes.empty() && user.topology.empty()) user.devices = layout.devices;
  return user;
}

StatusOr<Tensor> InputFromRaw(const pipeline::H5Raw& raw, const Layout& layout, size_t i, const std::string& where) {
  const Type& want = layout.inputs[i];
  if (raw.dims != want.dims) {
    Type got = want;
    got.dims = raw.dims;
    return InvalidArgumentError(where + " has shape " + got.ToString().substr(6) + " but @main's argument " +
                                std::to_string(i) + " is " + want.ToString());
  }
  // The dataset's element type as StableHLO's.
  ElementType el;
  const std::string& dt = raw.dtype;
  if (dt == "bfloat16" && raw.width == 2) el = ElementType::kBF16;
  else if (dt == "float16" && raw.width == 2) el = ElementType::kF16;
  else if (dt == "bool" && raw.width == 1) el = ElementType::kPred;
  else if (raw.cls == 'c') el = raw.width == 16 ? ElementType::kC128 : ElementType::kC64;
  else if (raw.cls == 'f') el = raw.width == 8 ? ElementType::kF64 : (raw.width == 2 ? ElementType::kF16 : ElementType::kF32);
  else if (raw.cls == 'i') el = raw.width == 1 ? ElementType::kI8 : raw.width == 2 ? ElementType::kI16 : raw.width == 4 ? ElementType::kI32 : ElementType::kI64;
  else el = raw.width == 1 ? ElementType::kU8 : raw.width == 2 ? ElementType::kU16 : raw.width == 4 ? ElementType::kU32 : ElementType::kU64;
  const bool ok = el == want.element || (IsFloat(el) && IsFloat(want.element)) ||
                  (IsComplex(el) && IsComplex(want.element)) ||
                  (!IsFloat(el) && !IsFloat(want.element) && !IsComplex(el) && !IsComplex(want.element) &&
                   el != ElementType::kPred && want.element != ElementType::kPred);
  if (!ok)
    return InvalidArgumentError(where + " holds " + std::string(ElementTypeName(el)) + " but @main's argument " +
                                std::to_string(i) + " is " + want.ToString() +
                                " (bf16 is stored as uint16 with dtype=\"bfloat16\", i1 as uint8 with dtype=\"bool\")");
  Type have = want;
  have.element = el;
  TPUMESH_ASSIGN_OR_RETURN(Tensor src, NewTensor(have, nullptr));
  std::memcpy(src.data.mutable_raw(), raw.data.data(), std::min<size_t>(raw.data.size(), static_cast<size_t>(have.size_bytes())));
  if (el == ElementType::kPred) {  // an i1 is one byte, 0 or 1 (any other byte is no boolean XLA makes)
    const uint8_t* b = static_cast<const uint8_t*>(src.data.raw());
    for (int64_t k = 0; k < have.size_bytes(); ++k)
      if (b[k] > 1)
        return InvalidArgumentError(where + " holds " + std::to_string(b[k]) + " at element " + std::to_string(k) +
                                    ": an i1 (bool) input must be 0 or 1");
  }
  if (el == want.element) return src;
  // convert (floats rounded to the argument's type; integers wrap as XLA's convert)
  TPUMESH_ASSIGN_OR_RETURN(Tensor dst, NewTensor(want, nullptr));
  TPUMESH_RETURN_IF_ERROR(
      ConvertElements(src.type.element, src.data.raw(), want.element, 0, dst.num_elements(), dst.data.mutable_raw()));
  return dst;
}

StatusOr<std::vector<Tensor>> ReadInputs(const std::string& file, const Layout& layout) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < layout.inputs.size(); ++i) {
    const std::string name = "input_" + std::to_string(i);
    TPUMESH_ASSIGN_OR_RETURN(pipeline::H5Raw raw, pipeline::H5ReadRaw(file, name));
    TPUMESH_ASSIGN_OR_RETURN(Tensor t, InputFromRaw(raw, layout, i, Printable(file) + ": dataset '" + name + "'"));
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<Tensor> RandomInputs(const Layout& layout, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<Tensor> out;
  for (const Type& t : layout.inputs) {
    Tensor x = NewTensor(t, nullptr).value();
    const int64_t n = t.num_elements();
    uint8_t* p = static_cast<uint8_t*>(x.data.mutable_raw());
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t r = gen();
      const float u = static_cast<float>(static_cast<double>(r >> 11) * 0x1.0p-53 * 2.0 - 1.0);
      switch (t.element) {
        case ElementType::kF32: std::memcpy(p + i * 4, &u, 4); break;
        case ElementType::kF64: { const double d = u; std::memcpy(p + i * 8, &d, 8); break; }
        case ElementType::kC64: {  // (u, u'): the imaginary part from the low bits
          const float c[2] = {u, static_cast<float>(static_cast<double>(r & 0x7ff) / 1024.0 - 1.0)};
          std::memcpy(p + i * 8, c, 8);
          break;
        }
        case ElementType::kC128: {
          const double c[2] = {u, static_cast<double>(r & 0x7ff) / 1024.0 - 1.0};
          std::memcpy(p + i * 16, c, 16);
          break;
        }
        case ElementType::kBF16: { const kernels::bf16 h = kernels::F32ToBf16(u); std::memcpy(p + i * 2, &h, 2); break; }
        case ElementType::kF16: { const uint16_t h = FloatToHalf(u); std::memcpy(p + i * 2, &h, 2); break; }
        case ElementType::kPred: p[i] = r & 1; break;
        case ElementType::kU32: { const uint32_t v = static_cast<uint32_t>(r); std::memcpy(p + i * 4, &v, 4); break; }
        case ElementType::kU64: std::memcpy(p + i * 8, &r, 8); break;
        default: {  // small non-negative integers
          const int64_t v = static_cast<int64_t>(r % 4);
          std::memcpy(p + i * ElementTypeBytes(t.element), &v, static_cast<size_t>(ElementTypeBytes(t.element)));
        }
      }
    }
    out.push_back(std::move(x));
  }
  return out;
}

std::vector<std::pair<std::string, pipeline::H5Raw>> OutputDatasets(const std::vector<Tensor>& outputs) {
  std::vector<std::pair<std::string, pipeline::H5Raw>> out;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    pipeline::H5Raw r;
    r.dims = t.type.dims;
    const ElementType e = t.type.element;
    r.width = ElementTypeBytes(e);
    // f16 as an IEEE half dataset (what h5py reads as np.float16); bf16,
    // which HDF5 has no type for, as its bits with dtype="bfloat16";
    // complex as h5py's compound {r, i}.
    if (e == ElementType::kF32 || e == ElementType::kF64 || e == ElementType::kF16) r.cls = 'f';
    else if (IsComplex(e)) r.cls = 'c';
    else if (e == ElementType::kBF16) { r.cls = 'u'; r.dtype = "bfloat16"; }
    else if (e == ElementType::kPred) { r.cls = 'u'; r.dtype = "bool"; }
    else r.cls = IsUnsigned(e) ? 'u' : 'i';
    const uint8_t* p = static_cast<const uint8_t*>(t.data.raw());
    r.data.assign(p, p + t.type.size_bytes());
    out.emplace_back("output_" + std::to_string(i), std::move(r));
  }
  return out;
}

namespace {

// The sdy sharding over `axes` (device id = row-major position) whose device
// groups are `split`'s as device 0 holds it, or a kUnit Attr when the groups
// are not those of mesh axes (each dimension's pieces along one or more
// axes, major first, each axis used once).
Attr SdyShardingOfSplit(const Split& split, const std::vector<mesh::MeshAxis>& axes, const std::string& mesh_name) {
  const size_t na = axes.size();
  std::vector<int64_t> stride(na, 1);
  for (int a = static_cast<int>(na) - 2; a >= 0; --a) stride[a] = stride[a + 1] * axes[a + 1].size;
  auto coord = [&](int64_t d, size_t a) { return (d / stride[a]) % axes[a].size; };
  Attr dims;
  dims.kind = Attr::Kind::kList;
  std::vector<bool> used(na, false);
  for (const DimSplit& ds : split.dims) {
    Attr& dim = dims.list.emplace_back();
    dim.kind = Attr::Kind::kList;
    if (!ds.split()) continue;
    const std::vector<int>& g = *ds.group;
    // The axes along which the group moves, major (slowest to change) first.
    std::vector<std::pair<int64_t, size_t>> moving;  // (first piece where it changes, axis)
    for (size_t a = 0; a < na; ++a)
      for (size_t i = 1; i < g.size(); ++i)
        if (coord(g[i], a) != coord(g[0], a)) {
          moving.push_back({static_cast<int64_t>(i), a});
          break;
        }
    std::sort(moving.begin(), moving.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    int64_t ways = 1;
    for (const auto& [first, a] : moving) {
      if (used[a]) return Attr{};
      used[a] = true;
      ways *= axes[a].size;
    }
    if (ways != ds.ways || static_cast<int64_t>(g.size()) != ways) return Attr{};
    for (int64_t i = 0; i < ways; ++i) {  // piece i is the mixed-radix step from piece 0
      int64_t rest = i, device = g[0];
      for (auto it = moving.rbegin(); it != moving.rend(); ++it) {
        device += (rest % axes[it->second].size) * stride[it->second];
        rest /= axes[it->second].size;
      }
      if (device != g[static_cast<size_t>(i)]) return Attr{};
    }
    for (const auto& [first, a] : moving) {
      Attr name;
      name.kind = Attr::Kind::kString;
      name.s = axes[a].name;
      dim.list.push_back(std::move(name));
    }
  }
  Attr mesh;
  mesh.kind = Attr::Kind::kSymbol;
  mesh.s = mesh_name;
  Attr out;
  out.kind = Attr::Kind::kDict;
  out.s = "sdy";
  out.dict.emplace_back("mesh", std::move(mesh));
  out.dict.emplace_back("dims", std::move(dims));
  return out;
}

// ProgramRun::inferred_result_shardings of a dry run's results.
std::vector<Attr> InferredResultShardings(const Module& m, const Func& main, const std::vector<mesh::MeshAxis>& axes,
                                          const std::vector<Tensor>& results) {
  std::vector<Attr> out(results.size());
  std::string mesh_name;
  for (const Op& op : m.ops) {
    if (op.name != "sdy.mesh") continue;
    const Attr* mesh = op.Find("mesh");
    const Attr* list = mesh ? mesh->Find("list") : nullptr;
    if (list && !list->list.empty()) {
      mesh_name = op.callee;
      break;
    }
  }
  const std::vector<mesh::MeshAxis> program_axes = SdyMeshAxes(m);
  const bool same_mesh = std::equal(program_axes.begin(), program_axes.end(), axes.begin(), axes.end(),
                                    [](const mesh::MeshAxis& a, const mesh::MeshAxis& b) {
                                      return a.name == b.name && a.size == b.size;
                                    });
  if (mesh_name.empty() || !same_mesh) return out;
  for (size_t i = 0; i < results.size(); ++i) {
    const bool declared = i < main.result_attrs.size() &&
                          (main.result_attrs[i].Find("sdy.sharding") || main.result_attrs[i].Find("mhlo.sharding"));
    if (declared || results[i].split.replicated()) continue;
    out[i] = SdyShardingOfSplit(results[i].split, axes, mesh_name);
  }
  return out;
}

}  // namespace

StatusOr<ProgramRun> RunProgram(const Module& m, const Layout& layout, mesh::Mesh& mesh, std::vector<Tensor> inputs,
                                const Options& options) {
  if (mesh.num_devices() != layout.devices)
    return InvalidArgumentError(m.file + ": the module runs on " + std::to_string(layout.devices) +
                                " device(s) (" + layout.Describe() + ") but the mesh has " +
                                std::to_string(mesh.num_devices()));
  if (inputs.size() != layout.inputs.size())
    return InvalidArgumentError(m.file + ": @main takes " + std::to_string(layout.inputs.size()) + " arguments, got " +
                                std::to_string(inputs.size()));
  const Func* main = m.FindFunc("main");
  ProgramRun run;
  const int n = mesh.num_devices();
  run.records.assign(options.dry_run ? 1 : static_cast<size_t>(n), {});
  run.record_of_device.assign(static_cast<size_t>(n), 0);
  for (int d = 0; d < n; ++d) run.record_of_device[static_cast<size_t>(d)] = options.dry_run ? 0 : d;
  for (int d = 0; d < n; ++d) mesh.device(d).ResetHbmPeak();
  const auto t0 = std::chrono::steady_clock::now();
  if (options.dry_run) {
    // Device 0 stands for all: the program is the same on every device.
    DeviceSite site;
    site.device = &mesh.device(0);
    site.num_devices = n;
    site.axes = mesh.axes();
    site.topology = &mesh.topology();
    std::vector<Tensor> args;
    for (size_t i = 0; i < inputs.size(); ++i) {
      TPUMESH_ASSIGN_OR_RETURN(Tensor t, NewTensor(main->arg_types[i], site.device, true, "argument"));
      t.known = false;
      args.push_back(std::move(t));
    }
    Options o = options;
    o.ops = &run.records[0];
    TPUMESH_ASSIGN_OR_RETURN(std::vector<Tensor> results, RunFunction(m, "main", std::move(args), site, o));
    run.inferred_result_shardings = InferredResultShardings(m, *main, site.axes, results);
  } else {
    // Every argument as device arrays: kReplicas slices the leading axis,
    // kGlobal replicates.
    std::vector<mesh::DistributedArray> dist;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      if (layout.kind == Layout::Kind::kReplicas) {
        TPUMESH_ASSIGN_OR_RETURN(mesh::Array v, t.data.View(mesh::DType::kU8, {n, t.type.size_bytes() / n}));
        TPUMESH_ASSIGN_OR_RETURN(mesh::DistributedArray a, mesh.Shard(v));
        dist.push_back(std::move(a));
      } else {
        TPUMESH_ASSIGN_OR_RETURN(mesh::DistributedArray a, mesh.Replicate(t.data));
        dist.push_back(std::move(a));
      }
    }
    std::vector<std::vector<mesh::OpRecord>>* records = &run.records;
    // A plain jit program's error as the op gave it, without the pmap's
    // "pmap: device 0:" (the only device).
    Status alone_failed;
    auto body = [&](mesh::DeviceContext& ctx, std::span<const mesh::Array> args) -> StatusOr<std::vector<mesh::Array>> {
      DeviceSite site;
      site.device = &ctx.device();
      site.collectives = &ctx;
      site.device_id = ctx.device_id();
      site.num_devices = n;
      site.axes = mesh.axes();
      site.topology = &mesh.topology();
      std::vector<Tensor> targs;
      for (size_t i = 0; i < args.size(); ++i) {
        Tensor t;
        t.type = main->arg_types[i];
        TPUMESH_ASSIGN_OR_RETURN(t.data, args[i].View(mesh::DType::kU8, {t.type.size_bytes()}));
        targs.push_back(std::move(t));
      }
      Options o = options;
      o.ops = &(*records)[static_cast<size_t>(ctx.device_id())];
      auto ran = RunFunction(m, "main", std::move(targs), site, o);
      if (!ran.ok() && n == 1) alone_failed = ran.status();
      TPUMESH_ASSIGN_OR_RETURN(std::vector<Tensor> res, std::move(ran));
      std::vector<mesh::Array> arrays;
      for (Tensor& r : res) arrays.push_back(std::move(r.data));
      return arrays;
    };
    auto pmapped = mesh.Pmap(body, dist);
    if (!pmapped.ok() && !alone_failed.ok()) return alone_failed;
    TPUMESH_ASSIGN_OR_RETURN(std::vector<mesh::DistributedArray> outs, std::move(pmapped));
    for (size_t i = 0; i < outs.size(); ++i) {
      TPUMESH_ASSIGN_OR_RETURN(Tensor t, NewTensor(layout.outputs[i], nullptr));
      const int64_t per = main->result_types[i].size_bytes();
      uint8_t* dst = static_cast<uint8_t*>(t.data.mutable_raw());
      if (layout.kind == Layout::Kind::kReplicas) {
        for (int d = 0; d < n; ++d) std::memcpy(dst + d * per, outs[i].shards[static_cast<size_t>(d)].raw(), static_cast<size_t>(per));
      } else {
        std::memcpy(dst, outs[i].shards[0].raw(), static_cast<size_t>(per));
        const auto& shards = outs[i].shards;
        std::vector<mesh::Array> views;
        for (size_t d = 1; d < shards.size() && views.empty(); ++d)
          if (std::memcmp(shards[d].raw(), dst, static_cast<size_t>(per)) != 0)
            for (const mesh::Array& s : shards) {
              views.push_back(mesh::Array::Host(mesh::DType::kU8, {per}));
              std::memcpy(views.back().mutable_raw(), s.raw(), static_cast<size_t>(per));
            }
        run.device_views.push_back(std::move(views));
      }
      run.outputs.push_back(std::move(t));
    }
  }
  run.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int d = 0; d < n; ++d) run.hbm_peak_bytes.push_back(mesh.device(d).hbm_peak());
  return run;
}

}  // namespace tpumesh::hlo
