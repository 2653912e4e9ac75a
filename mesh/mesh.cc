#include "mesh/mesh.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <thread>

#include "base/printable.h"
#include "mesh/collectives.h"

namespace tpumesh::mesh {

StatusOr<std::vector<MeshAxis>> ParseMeshAxes(std::string_view text) {
  std::vector<MeshAxis> axes;
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("mesh axes " + Quoted(text) + ": " + why +
                                " (expected e.g. data=8 or x=2,y=4)");
  };
  if (text.empty()) return bad("empty");
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string_view part = text.substr(pos, comma == text.npos ? text.npos : comma - pos);
    std::string name = "data";
    std::string_view num = part;
    const bool named = part.find('=') != part.npos;
    if (named) {
      const size_t eq = part.find('=');
      name = std::string(part.substr(0, eq));
      num = part.substr(eq + 1);
    }
    int size = 0;
    auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), size);
    const bool number = !num.empty() && ec == std::errc() && ptr == num.data() + num.size();
    if (!named && !number) return bad("'" + std::string(part) + "' is neither NAME=SIZE nor a size");
    if (name.empty()) return bad("an axis has no name");
    // A name goes into reports, traces and JSON as it is: UTF-8 text
    // without control characters or spaces, as a JAX axis name is written.
    if (Printable(name) != name || name.find(' ') != std::string::npos)
      return bad("axis name " + Quoted(name) + " is not printable UTF-8 text without spaces");
    if (!number || size < 1) return bad("axis '" + name + "' needs a whole size >= 1, got '" + std::string(num) + "'");
    for (const auto& a : axes)
      if (a.name == name) return bad("axis '" + name + "' appears twice");
    axes.push_back({name, size});
    if (comma == text.npos) break;
    pos = comma + 1;
  }
  return axes;
}

std::string MeshAxesToString(const std::vector<MeshAxis>& axes) {
  std::string s;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (i) s += ",";
    s += axes[i].name + "=" + std::to_string(axes[i].size);
  }
  return s;
}

Shape DistributedArray::stacked_shape() const {
  Shape s = shards.empty() ? Shape{} : shards[0].shape();
  s.insert(s.begin(), static_cast<int64_t>(shards.size()));
  return s;
}

StatusOr<Array> DistributedArray::Gather() const {
  if (shards.empty()) return InvalidArgumentError("Gather of an empty DistributedArray");
  const Array& first = shards[0];
  Array out = Array::Host(first.dtype(), stacked_shape());
  const int64_t bytes = first.size_bytes();
  for (size_t i = 0; i < shards.size(); ++i) {
    if (shards[i].dtype() != first.dtype() || shards[i].shape() != first.shape()) {
      return InvalidArgumentError("Gather: shard " + std::to_string(i) + " is " +
                                  shards[i].ToString() + " but shard 0 is " + first.ToString());
    }
    if (bytes) std::memcpy(static_cast<std::byte*>(out.mutable_raw()) + i * bytes, shards[i].raw(), bytes);
  }
  return out;
}

StatusOr<int> ParseChipAxis(std::string_view name) {
  if (name == "x") return 0;
  if (name == "y") return 1;
  if (name == "z") return 2;
  return InvalidArgumentError("chip axis '" + std::string(name) + "': expected x, y or z");
}

Mesh::Mesh(const ChipSpec& chip, Topology topology, std::vector<MeshAxis> axes, int threads,
           int host_cores, int fastest_chip_axis, Cluster* cluster)
    : chip_(chip),
      topology_(std::move(topology)),
      axes_(std::move(axes)),
      host_cores_(host_cores),
      fastest_chip_axis_(fastest_chip_axis),
      cluster_(cluster) {
  const int n = topology_.num_devices();
  num_local_ = n / cluster_->size();
  first_local_ = cluster_->rank() * num_local_;
  devices_.resize(n);
  for (int d = first_local_; d < first_local_ + num_local_; ++d) {
    devices_[d] = std::make_unique<Device>(d, chip_, topology_.Coords(d), threads);
  }
  // Positions: cores of a chip, then chips along the fastest axis, then the
  // other axes in x, y, z order.
  std::vector<int> order = {fastest_chip_axis};
  for (int a = 0; a < 3; ++a)
    if (a != fastest_chip_axis) order.push_back(a);
  std::vector<int> dims = topology_.chip_dims();
  dims.resize(3, 1);
  const int cores = topology_.devices_per_chip();
  std::array<int, 3> c{};
  for (c[order[2]] = 0; c[order[2]] < dims[order[2]]; ++c[order[2]])
    for (c[order[1]] = 0; c[order[1]] < dims[order[1]]; ++c[order[1]])
      for (c[order[0]] = 0; c[order[0]] < dims[order[0]]; ++c[order[0]])
        for (int k = 0; k < cores; ++k) device_at_.push_back(topology_.ChipAt(c) * cores + k);
  position_of_.resize(device_at_.size());
  for (size_t p = 0; p < device_at_.size(); ++p) position_of_[device_at_[p]] = static_cast<int>(p);
}

Mesh::~Mesh() = default;

StatusOr<std::unique_ptr<Mesh>> Mesh::Create(const ChipSpec& chip,
                                             const std::vector<int>& chip_dims,
                                             std::vector<MeshAxis> axes, MeshOptions options) {
  TPUMESH_RETURN_IF_ERROR(chip.Validate());
  TPUMESH_ASSIGN_OR_RETURN(Topology topo, Topology::Create(chip, chip_dims));
  if (axes.empty()) axes.push_back({"data", topo.num_devices()});
  int64_t product = 1;
  std::set<std::string> names;
  for (const auto& a : axes) {
    if (a.name.empty()) return InvalidArgumentError("mesh axis with an empty name");
    if (!names.insert(a.name).second)
      return InvalidArgumentError("mesh axis '" + a.name + "' appears twice");
    if (a.size < 1) return InvalidArgumentError("mesh axis '" + a.name + "' must have size >= 1");
    product *= a.size;
  }
  if (product != topo.num_devices()) {
    return InvalidArgumentError("mesh axes " + MeshAxesToString(axes) + " hold " +
                                std::to_string(product) + " devices but topology " +
                                topo.DimsString() + " of " + chip.name + " has " +
                                std::to_string(topo.num_devices()));
  }
  Cluster* cluster = options.cluster != nullptr ? options.cluster : &LocalCluster();
  const int ranks = cluster->size();
  if (topo.num_devices() % ranks != 0) {
    return InvalidArgumentError("a mesh of " + std::to_string(topo.num_devices()) + " devices cannot be split over " +
                                std::to_string(ranks) + " ranks: the rank count must divide the device count");
  }
  const int local = topo.num_devices() / ranks;
  // All cores of the host, shared by the ranks on it.
  const int host = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int cores = options.host_cores > 0 ? options.host_cores : std::max(1, host / cluster->ranks_on_host());
  int threads = options.threads_per_device > 0 ? options.threads_per_device : std::max(1, cores / local);
  if (options.fastest_chip_axis < 0 || options.fastest_chip_axis >= static_cast<int>(topo.chip_dims().size()))
    return InvalidArgumentError("chip axis " + std::string(1, "xyz"[std::clamp(options.fastest_chip_axis, 0, 2)]) +
                                " is not an axis of topology " + topo.DimsString());
  std::unique_ptr<Mesh> mesh(
      new Mesh(chip, std::move(topo), std::move(axes), threads, cores, options.fastest_chip_axis, cluster));
  mesh->overlap_collectives_ = options.overlap_collectives;
  return mesh;
}

StatusOr<int> Mesh::AxisPosition(std::string_view name) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].name == name) return static_cast<int>(i);
  return InvalidArgumentError("unknown mesh axis '" + std::string(name) + "' (mesh axes: " +
                              MeshAxesToString(axes_) + ")");
}

std::vector<int> Mesh::AxisIndices(int device) const {
  std::vector<int> idx(axes_.size());
  int p = position_of_[device];
  for (int a = static_cast<int>(axes_.size()) - 1; a >= 0; --a) {
    idx[a] = p % axes_[a].size;
    p /= axes_[a].size;
  }
  return idx;
}

int Mesh::DeviceAt(std::span<const int> indices) const {
  int p = 0;
  for (size_t a = 0; a < axes_.size(); ++a) p = p * axes_[a].size + indices[a];
  return device_at_[p];
}

StatusOr<std::vector<int>> Mesh::Group(int device, std::span<const std::string> axis_names) const {
  if (axis_names.empty()) return InvalidArgumentError("a collective needs at least one axis name");
  std::vector<int> pos;
  for (const auto& name : axis_names) {
    TPUMESH_ASSIGN_OR_RETURN(int p, AxisPosition(name));
    if (std::find(pos.begin(), pos.end(), p) != pos.end())
      return InvalidArgumentError("axis '" + name + "' named twice in one collective");
    pos.push_back(p);
  }
  const std::vector<int> base = AxisIndices(device);
  int64_t n = 1;
  for (int p : pos) n *= axes_[p].size;
  std::vector<int> group;
  group.reserve(n);
  for (int64_t k = 0; k < n; ++k) {
    // Unravel k row-major over the named axes in the order given.
    std::vector<int> idx = base;
    int64_t rest = k;
    for (int i = static_cast<int>(pos.size()) - 1; i >= 0; --i) {
      idx[pos[i]] = static_cast<int>(rest % axes_[pos[i]].size);
      rest /= axes_[pos[i]].size;
    }
    group.push_back(DeviceAt(idx));
  }
  return group;
}

StatusOr<DistributedArray> Mesh::Replicate(const Array& x) {
  DistributedArray out;
  out.replicated = true;
  out.shards.resize(devices_.size());
  for (auto& d : devices_) {
    if (d == nullptr) continue;  // another rank's
    TPUMESH_ASSIGN_OR_RETURN(out.shards[d->id()], x.ShareTo(*d, "replicated"));
  }
  return out;
}

StatusOr<DistributedArray> Mesh::Shard(const Array& x) {
  const int n = num_devices();
  if (x.rank() == 0) return InvalidArgumentError("cannot shard a scalar " + x.ToString());
  if (x.dim(0) % n != 0) {
    return InvalidArgumentError("cannot shard " + x.ToString() + " over " + std::to_string(n) +
                                " devices: leading dimension " + std::to_string(x.dim(0)) +
                                " is not divisible by " + std::to_string(n));
  }
  const int64_t per = x.dim(0) / n;
  DistributedArray out;
  out.shards.resize(n);
  for (int d = first_local_; d < first_local_ + num_local_; ++d) {
    TPUMESH_ASSIGN_OR_RETURN(out.shards[d], x.SliceLeading(d * per, (d + 1) * per, devices_[d].get()));
  }
  return out;
}

StatusOr<DistributedArray> Mesh::Shard(const Array& x, std::span<const std::string> axes) {
  std::vector<int> pos;
  int n = 1;
  for (const std::string& name : axes) {
    TPUMESH_ASSIGN_OR_RETURN(int p, AxisPosition(name));
    pos.push_back(p);
    n *= axes_[p].size;
  }
  if (x.rank() == 0) return InvalidArgumentError("cannot shard a scalar " + x.ToString());
  if (x.dim(0) % n != 0)
    return InvalidArgumentError("cannot shard " + x.ToString() + " over " + std::to_string(n) +
                                " devices: leading dimension " + std::to_string(x.dim(0)) +
                                " is not divisible by " + std::to_string(n));
  const int64_t per = x.dim(0) / n;
  DistributedArray out;
  out.shards.resize(num_devices());
  for (int d = first_local_; d < first_local_ + num_local_; ++d) {
    const std::vector<int> idx = AxisIndices(d);
    int64_t slice = 0;
    for (int p : pos) slice = slice * axes_[p].size + idx[p];
    TPUMESH_ASSIGN_OR_RETURN(out.shards[d], x.SliceLeading(slice * per, (slice + 1) * per, devices_[d].get()));
  }
  return out;
}

StatusOr<std::vector<DistributedArray>> Mesh::Pmap(const PmapFn& fn,
                                                   std::span<const DistributedArray> args) {
  const int n = num_devices();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].num_shards() != n) {
      return InvalidArgumentError("pmap argument " + std::to_string(i) + " has " +
                                  std::to_string(args[i].num_shards()) + " shards for " +
                                  std::to_string(n) + " devices");
    }
    for (int d = first_local_; d < first_local_ + num_local_; ++d) {
      if (args[i].shards[d].device() != devices_[d].get()) {
        return InvalidArgumentError("pmap argument " + std::to_string(i) + ": shard " +
                                    std::to_string(d) + " is " + args[i].shards[d].ToString() +
                                    ", not on device " + std::to_string(d));
      }
    }
  }

  HostCores cores(std::min(host_cores_, num_local_));
  CollectiveHub hub(*this, cores, pmaps_++);
  std::vector<StatusOr<std::vector<Array>>> results(n, InternalError("not run"));
  const int begin = first_local_, end = first_local_ + num_local_;
  auto run_device = [&](int d) {
    std::vector<Array> my_args;
    my_args.reserve(args.size());
    for (const auto& a : args) my_args.push_back(a.shards[d]);
    DeviceContext ctx(*this, d, &hub);
    cores.Acquire();
    devices_[d]->arena().execute([&] {
      try {
        results[d] = fn(ctx, my_args);
      } catch (const std::exception& e) {
        results[d] = InternalError(std::string("exception: ") + e.what());
      } catch (...) {
        results[d] = InternalError("unknown exception");
      }
    });
    cores.Release();
    hub.Finish(d, ctx.collectives_entered(), results[d].status());
  };
  if (num_local_ == 1 && cluster_->size() == 1) {
    // One device and no other rank: on this thread (a thread per call is
    // most of a small program's time: the PJRT plugin's eager ops).
    run_device(begin);
  } else {
    std::vector<std::jthread> threads;
    threads.reserve(num_local_);
    for (int d = begin; d < end; ++d) threads.emplace_back(run_device, d);
    // With other ranks, this thread carries the collectives' rounds to them
    // until every device of every rank has returned.
    if (cluster_->size() > 1) hub.Serve();
  }  // joins

  // Report the root cause: a device's own error before errors it caused in
  // others.
  int first_secondary = -1;
  for (int d = begin; d < end; ++d) {
    if (results[d].ok()) continue;
    if (hub.IsSecondary(d)) {
      if (first_secondary < 0) first_secondary = d;
      continue;
    }
    return results[d].status().WithContext("pmap: device " + std::to_string(d));
  }
  if (first_secondary >= 0)
    return results[first_secondary].status().WithContext("pmap: device " + std::to_string(first_secondary));

  // Outputs are compared with this rank's first device's (device 0 in one
  // process); another rank's shards stay empty.
  const std::vector<Array>& ref = *results[begin];
  const std::string ref_name = "device " + std::to_string(begin);
  std::vector<DistributedArray> outs(ref.size());
  for (auto& o : outs) o.shards.resize(n);
  for (int d = begin; d < end; ++d) {
    const std::vector<Array>& r = *results[d];
    if (r.size() != ref.size()) {
      return InvalidArgumentError("pmap: device " + std::to_string(d) + " returned " +
                                  std::to_string(r.size()) + " outputs but " + ref_name + " returned " +
                                  std::to_string(ref.size()));
    }
    for (size_t i = 0; i < r.size(); ++i) {
      if (r[i].dtype() != ref[i].dtype() || r[i].shape() != ref[i].shape()) {
        return InvalidArgumentError("pmap: output " + std::to_string(i) + " is " + r[i].ToString() +
                                    " on device " + std::to_string(d) + " but " +
                                    ref[i].ToString() + " on " + ref_name);
      }
      Array a = r[i];
      if (a.device() != devices_[d].get()) {
        TPUMESH_ASSIGN_OR_RETURN(a, r[i].CopyTo(devices_[d].get(), "pmap output"));
      }
      outs[i].shards[d] = std::move(a);
    }
  }
  return outs;
}

// On the wire, from each rank to root: the header's length in bytes, the
// header (per shard: device, dtype, rank, dims, as int64), then the shards'
// bytes in the same order (native byte order: one build on one
// architecture, docs/cluster.md).
StatusOr<DistributedArray> Mesh::GatherToRank(const DistributedArray& x, int root, std::span<const int> devices) {
  if (cluster_->size() == 1) return x;
  std::vector<int> listed(devices.begin(), devices.end());
  if (listed.empty())
    for (int d = 0; d < num_devices(); ++d) listed.push_back(d);
  if (x.num_shards() != num_devices())
    return InvalidArgumentError("GatherToRank: " + std::to_string(x.num_shards()) + " shards for " +
                                std::to_string(num_devices()) + " devices");
  // This rank's listed shards: a header per shard, then the shards' bytes
  // as parts of the message (not copied first).
  std::vector<int64_t> head;
  std::vector<std::span<const std::byte>> data;
  for (const int d : listed) {
    if (d < 0 || d >= num_devices()) return InvalidArgumentError("GatherToRank: no device " + std::to_string(d));
    if (!is_local(d) || rank_of(d) == root) continue;
    const Array& a = x.shards[d];
    head.insert(head.end(), {d, static_cast<int64_t>(a.dtype()), a.rank()});
    head.insert(head.end(), a.shape().begin(), a.shape().end());
    if (a.size_bytes() > 0) data.emplace_back(static_cast<const std::byte*>(a.raw()), static_cast<size_t>(a.size_bytes()));
  }
  const int64_t head_bytes = static_cast<int64_t>(head.size() * sizeof(int64_t));
  std::vector<Outgoing> to(cluster_->size());
  if (cluster_->rank() != root) {
    to[root].parts.emplace_back(reinterpret_cast<const std::byte*>(&head_bytes), sizeof head_bytes);
    to[root].parts.emplace_back(reinterpret_cast<const std::byte*>(head.data()), static_cast<size_t>(head_bytes));
    for (const auto& p : data) to[root].parts.push_back(p);
  }
  TPUMESH_ASSIGN_OR_RETURN(std::vector<Bytes> from, cluster_->Exchange(to));
  DistributedArray out = x;
  if (cluster_->rank() != root) return out;
  for (int r = 0; r < cluster_->size(); ++r) {
    if (r == root) continue;
    const Bytes& b = from[r];
    auto bad = [&] { return InternalError("GatherToRank: a malformed message from rank " + std::to_string(r)); };
    int64_t hb = 0;
    if (b.size() < sizeof hb) return bad();
    std::memcpy(&hb, b.data(), sizeof hb);
    if (hb < 0 || hb % 8 != 0 || static_cast<int64_t>(b.size()) < 8 + hb) return bad();
    std::vector<int64_t> h(static_cast<size_t>(hb / 8));
    if (hb) std::memcpy(h.data(), b.data() + 8, static_cast<size_t>(hb));
    size_t off = static_cast<size_t>(8 + hb);
    for (size_t i = 0; i < h.size();) {
      if (i + 3 > h.size()) return bad();
      const int64_t d = h[i], dtype = h[i + 1], rank = h[i + 2];
      if (d < 0 || d >= num_devices() || rank_of(static_cast<int>(d)) != r || dtype < 0 ||
          dtype > static_cast<int64_t>(DType::kU8) || rank < 0 || i + 3 + rank > h.size())
        return bad();
      Shape shape(h.begin() + static_cast<int64_t>(i) + 3, h.begin() + static_cast<int64_t>(i) + 3 + rank);
      i += 3 + static_cast<size_t>(rank);
      Array a = Array::Host(static_cast<DType>(dtype), shape);
      const size_t n = static_cast<size_t>(a.size_bytes());
      if (b.size() < off + n) return bad();
      if (n) std::memcpy(a.mutable_raw(), b.data() + off, n);
      off += n;
      out.shards[d] = std::move(a);
    }
  }
  return out;
}

StatusOr<std::unique_ptr<Mesh>> CreateMesh(const MeshSpec& spec) {
  TPUMESH_ASSIGN_OR_RETURN(ChipSpec chip, LoadChipSpec(spec.chip));
  if (!spec.dataflow.empty()) {
    auto d = kernels::ParseDataflow(spec.dataflow);
    if (!d.ok()) return d.status().WithContext("--dataflow");
    chip.dataflow = *d;
  }
  if (!spec.attention.empty()) {
    auto a = ParseAttentionKernel(spec.attention);
    if (!a.ok()) return a.status().WithContext("--attention");
    chip.attention = *a;
  }
  if (spec.vmem_mib != -1) {
    // Below 1 KiB a size rounds to no bytes: it would mean "not modelled".
    if (!(spec.vmem_mib == 0 || (spec.vmem_mib >= 1.0 / 1024 && spec.vmem_mib <= 1 << 20))) {
      char value[32];
      std::snprintf(value, sizeof(value), "%g", spec.vmem_mib);
      return InvalidArgumentError(std::string("--vmem-mib ") + value +
                                  ": must be 0 (none modelled) or 1/1024 (1 KiB) to 1048576 (1 TiB)");
    }
    chip.vmem_bytes = static_cast<int64_t>(std::llround(spec.vmem_mib * (1 << 20)));
  }
  std::vector<MeshAxis> axes;
  int64_t product = 0;
  if (!spec.axes.empty()) {
    auto parsed = ParseMeshAxes(spec.axes);
    if (!parsed.ok()) return parsed.status().WithContext("--mesh");
    axes = std::move(parsed).value();
    product = 1;
    for (const MeshAxis& a : axes) {
      product *= a.size;
      if (product > kMaxDevices)
        return InvalidArgumentError("--mesh " + spec.axes + ": more than " + std::to_string(kMaxDevices) +
                                    " devices (at most " + std::to_string(kMaxDevices) + " are emulated)");
    }
  }
  if (spec.devices < 0) return InvalidArgumentError("--devices must be >= 1, got " + std::to_string(spec.devices));
  // The device count: --devices, else the topology's, else the mesh's, else 8.
  std::vector<int> dims;
  int devices = spec.devices;
  std::string from = "--devices is";
  if (!spec.topology.empty()) {
    auto parsed = Topology::ParseDims(spec.topology);
    if (!parsed.ok()) return parsed.status().WithContext("--topology");
    dims = std::move(parsed).value();
    int64_t on = std::max(1, chip.devices_per_chip);
    for (int d : dims) {
      on *= d;
      if (on > kMaxDevices)
        return InvalidArgumentError("--topology " + spec.topology + ": more than " + std::to_string(kMaxDevices) +
                                    " devices (at most " + std::to_string(kMaxDevices) + " are emulated)");
    }
    if (devices > 0 && devices != on)
      return InvalidArgumentError("--topology " + spec.topology + " holds " + std::to_string(on) +
                                  " devices but --devices is " + std::to_string(devices));
    devices = static_cast<int>(on);
    from = "--topology " + spec.topology + " holds";
  }
  if (devices == 0) devices = product > 0 ? static_cast<int>(product) : 8;
  // model=M alone: the rest of the devices on data, as generate and
  // simulate read it (--mesh model=4 --topology 2x4 is data=2,model=4).
  if (axes.size() == 1 && axes[0].name == "model" && product < devices && devices % product == 0) {
    axes.insert(axes.begin(), MeshAxis{"data", static_cast<int>(devices / product)});
    product = devices;
  }
  if (devices > kMaxDevices)
    return InvalidArgumentError("--devices " + std::to_string(devices) + ": at most " + std::to_string(kMaxDevices) +
                                " emulated devices");
  if (product > 0 && product != devices)
    return InvalidArgumentError("--mesh " + spec.axes + " holds " + std::to_string(product) + " devices but " + from +
                                " " + std::to_string(devices));
  if (dims.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(dims, Topology::DimsForDevices(chip, devices));
  }
  MeshOptions o;
  o.threads_per_device = spec.threads_per_device;
  o.cluster = spec.cluster;
  auto axis = ParseChipAxis(spec.model_axis_along);
  if (!axis.ok()) return axis.status().WithContext("--model-axis-along");
  o.fastest_chip_axis = *axis;
  if (spec.overlap != "on" && spec.overlap != "off")
    return InvalidArgumentError("--overlap " + spec.overlap + ": must be on or off");
  o.overlap_collectives = spec.overlap == "on";
  auto m = Mesh::Create(chip, dims, axes, o);
  if (!m.ok() && !spec.topology.empty()) return m.status().WithContext("--topology " + spec.topology);
  return m;
}

StatusOr<std::unique_ptr<Mesh>> CreateDataModelMesh(const MeshSpec& spec) {
  if (spec.devices > kMaxDevices)
    return InvalidArgumentError("--devices " + std::to_string(spec.devices) + ": at most " +
                                std::to_string(kMaxDevices) + " emulated devices");
  MeshSpec s = spec;
  // The device count, as CreateMesh takes it: --devices, else the
  // topology's (so --topology 4x4 alone is 16 devices, and model=4 on it
  // leaves data the rest), else what the axes give. Only used to fill in
  // the data axis: CreateMesh gets the flags as given, so its messages name
  // only flags the user gave.
  int devices = s.devices;
  std::string from = "--devices is " + std::to_string(devices);
  if (devices == 0 && !s.topology.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(ChipSpec chip, LoadChipSpec(s.chip));
    auto dims = Topology::ParseDims(s.topology);
    if (!dims.ok()) return dims.status().WithContext("--topology");
    int64_t on = std::max(1, chip.devices_per_chip);
    for (const int d : *dims) {
      on *= d;
      if (on > kMaxDevices)
        return InvalidArgumentError("--topology " + s.topology + ": more than " + std::to_string(kMaxDevices) +
                                    " devices (at most " + std::to_string(kMaxDevices) + " are emulated)");
    }
    devices = static_cast<int>(on);
    from = "--topology " + s.topology + " holds " + std::to_string(devices);
  }
  if (!s.axes.empty()) {
    auto parsed = ParseMeshAxes(s.axes);
    if (!parsed.ok()) return parsed.status().WithContext("--mesh");
    int data = 0, fsdp = 1, model = 1;
    for (const MeshAxis& a : *parsed) {
      if (a.name == "data") data = a.size;
      else if (a.name == "fsdp") fsdp = a.size;
      else if (a.name == "model") model = a.size;
      else
        return InvalidArgumentError("--mesh " + spec.axes + ": axis '" + a.name +
                                    "' is not one of data, fsdp, model (the axes a model runs over)");
    }
    const int64_t shared = int64_t{fsdp} * model;  // the devices of one data index
    if (shared > kMaxDevices || int64_t{data} * shared > kMaxDevices)
      return InvalidArgumentError("--mesh " + spec.axes + ": more than " + std::to_string(kMaxDevices) +
                                  " devices (at most " + std::to_string(kMaxDevices) + " are emulated)");
    if (data == 0) {  // model=M and/or fsdp=F alone: the rest of the devices on data
      if (devices == 0) devices = static_cast<int>(shared);
      if (devices % shared != 0)
        return InvalidArgumentError("--mesh " + spec.axes + ": " +
                                    (fsdp > 1 ? "fsdp x model = " + std::to_string(shared)
                                              : "model=" + std::to_string(model)) +
                                    " does not divide the " + std::to_string(devices) + " devices (" + from + ")");
      data = static_cast<int>(devices / shared);
    }
    if (devices > 0 && data * shared != devices)
      return InvalidArgumentError("--mesh " + spec.axes + " holds " + std::to_string(data * shared) +
                                  " devices but " + from);
    s.axes = "data=" + std::to_string(data) + (fsdp > 1 ? ",fsdp=" + std::to_string(fsdp) : std::string()) +
             ",model=" + std::to_string(model);
  } else {
    s.axes = "data=" + std::to_string(devices > 0 ? devices : 8) + ",model=1";
  }
  return CreateMesh(s);
}

void Mesh::ResetClocks() {
  for (auto& d : devices_)
    if (d != nullptr) d->SetClock(0);
}

double Mesh::MaxClockSeconds() const {
  double m = 0;
  for (const auto& d : devices_)
    if (d != nullptr) m = std::max(m, d->clock_seconds());
  return m;
}

}  // namespace tpumesh::mesh
