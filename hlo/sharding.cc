#include "hlo/sharding.h"

#include <algorithm>
#include <cctype>
#include <numeric>

#include "base/printable.h"

namespace tpumesh::hlo {

StatusOr<std::vector<Piece>> Sharding::ShardOf(int device, const std::vector<int64_t>& dims) const {
  std::vector<Piece> out(dims.size());
  if (tiles.empty()) return out;  // replicated
  if (device < 0 || device >= static_cast<int>(device_tiles.size()))
    return InvalidArgumentError("device " + std::to_string(device) + " is not in the sharding");
  if (tiles.size() < dims.size()) return InvalidArgumentError("the sharding has fewer dimensions than the array");
  for (size_t k = 0; k < dims.size(); ++k) {
    out[k].count = tiles[k];
    out[k].index = device_tiles[static_cast<size_t>(device)][k];
    if (tiles[k] > 0 && dims[k] % tiles[k])
      return InvalidArgumentError("dimension " + std::to_string(k) + " of size " + std::to_string(dims[k]) +
                                  " does not split evenly into " + std::to_string(tiles[k]));
  }
  return out;
}

std::vector<mesh::MeshAxis> SdyMeshAxes(const Module& m, const std::string& name) {
  std::vector<mesh::MeshAxis> axes;
  for (const Op& op : m.ops) {
    if (op.name != "sdy.mesh" || (!name.empty() && op.callee != name)) continue;
    const Attr* mesh = op.Find("mesh");
    const Attr* list = mesh ? mesh->Find("list") : nullptr;
    if (!list || (name.empty() && list->list.empty())) continue;  // the first mesh with axes
    for (const Attr& a : list->list)
      for (const auto& [n, size] : a.dict) axes.push_back({n, static_cast<int>(size.i)});
    break;
  }
  return axes;
}

namespace {

// The Shardy sharding `s` (its dims, and its unreduced axes) over `axes`.
StatusOr<Sharding> TiledOver(const Attr& s, const std::vector<mesh::MeshAxis>& axes) {
  const Attr* dims = s.Find("dims");
  int64_t n = 1;
  for (const auto& a : axes) n *= a.size;
  Sharding out;
  out.tiles.assign(dims->list.size(), 1);
  out.device_tiles.assign(static_cast<size_t>(n), std::vector<int64_t>(dims->list.size(), 0));
  std::vector<int64_t> strides(axes.size(), 1);
  for (int k = static_cast<int>(axes.size()) - 2; k >= 0; --k) strides[k] = strides[k + 1] * axes[k + 1].size;
  std::vector<bool> used(axes.size(), false);
  for (size_t d = 0; d < dims->list.size(); ++d) {
    for (const Attr& axis : dims->list[d].list) {
      if (axis.kind != Attr::Kind::kString) continue;  // "?" (open): not split
      const auto it = std::find_if(axes.begin(), axes.end(), [&](const mesh::MeshAxis& a) { return a.name == axis.s; });
      if (it == axes.end()) return InvalidArgumentError("sharding names unknown axis " + Quoted(axis.s));
      const size_t ai = static_cast<size_t>(it - axes.begin());
      for (int64_t dev = 0; dev < n; ++dev) {
        const int64_t idx = (dev / strides[ai]) % it->size;
        auto& t = out.device_tiles[static_cast<size_t>(dev)][d];
        t = t * it->size + idx;  // major to minor in the order listed
      }
      out.tiles[d] *= it->size;
      used[ai] = true;
    }
  }
  std::vector<bool> unreduced(axes.size(), false);
  if (const Attr* u = s.Find("unreduced")) {
    for (const Attr& axis : u->list) {
      if (axis.kind != Attr::Kind::kString) continue;
      const auto it = std::find_if(axes.begin(), axes.end(), [&](const mesh::MeshAxis& a) { return a.name == axis.s; });
      if (it == axes.end()) return InvalidArgumentError("sharding's unreduced names unknown axis " + Quoted(axis.s));
      const size_t ai = static_cast<size_t>(it - axes.begin());
      if (used[ai]) return InvalidArgumentError("axis " + Quoted(axis.s) + " both splits a dimension and is unreduced");
      unreduced[ai] = true;
      out.unreduced_count *= it->size;
    }
  }
  out.replica.assign(static_cast<size_t>(n), 0);
  if (std::find(unreduced.begin(), unreduced.end(), true) != unreduced.end())
    out.unreduced.assign(static_cast<size_t>(n), 0);
  for (int64_t dev = 0; dev < n; ++dev)
    for (size_t ai = 0; ai < axes.size(); ++ai) {
      if (used[ai]) continue;
      auto& at = unreduced[ai] ? out.unreduced[static_cast<size_t>(dev)] : out.replica[static_cast<size_t>(dev)];
      at = at * axes[ai].size + (dev / strides[ai]) % axes[ai].size;
    }
  return out;
}

}  // namespace

StatusOr<Sharding> SdySharding(const Attr& s, const Module& m, const std::vector<mesh::MeshAxis>& axes) {
  const Attr* mesh = s.Find("mesh");
  const Attr* dims = s.Find("dims");
  if (!mesh || !dims) return InvalidArgumentError("a sharding without a mesh and dimensions");
  const auto mesh_axes = SdyMeshAxes(m, mesh->s);
  // A mesh without axes (JAX's @empty_mesh for a replicated scalar argument
  // of a sharded jit) names no axis: replicated on whatever the run's mesh.
  if (mesh_axes.empty()) {
    for (const Attr& d : dims->list)
      for (const Attr& axis : d.list)
        if (axis.kind == Attr::Kind::kString)
          return InvalidArgumentError("sharding names axis " + Quoted(axis.s) + " of sdy mesh @" + mesh->s +
                                      ", which has none");
    return Sharding{};
  }
  // Another mesh over the same devices (a program may declare several: JAX
  // names each abstract mesh it meets) tiles by its own axes: device id =
  // row-major position over them, as on the run's mesh.
  int64_t run_devices = 1, mesh_devices = 1;
  for (const auto& a : axes) run_devices *= a.size;
  for (const auto& a : mesh_axes) mesh_devices *= a.size;
  if (mesh_devices != run_devices)
    return InvalidArgumentError("sdy mesh @" + mesh->s + " is " + mesh::MeshAxesToString(mesh_axes) + " (" +
                                std::to_string(mesh_devices) + " devices) but the run's mesh is " +
                                mesh::MeshAxesToString(axes) + " (" + std::to_string(run_devices) +
                                " devices; give --mesh " + mesh::MeshAxesToString(mesh_axes) + ")");
  return TiledOver(s, mesh_axes);
}

StatusOr<Sharding> MhloSharding(const std::string& text, int num_devices) {
  Sharding out;
  std::string t = text;
  t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }), t.end());
  if (t == "{replicated}" || t == "{manual}" || t.empty()) return out;
  if (t.rfind("{devices=[", 0) != 0)
    return InvalidArgumentError("unsupported sharding " + Quoted(text) + " (supported: {replicated}, {devices=[...]...})");
  size_t p = std::string("{devices=[").size();
  auto read_int = [&](int64_t* v) {
    size_t q = p;
    while (q < t.size() && std::isdigit(static_cast<unsigned char>(t[q]))) ++q;
    if (q == p || q - p > 9) return false;
    *v = std::stoll(t.substr(p, q - p));
    p = q;
    return true;
  };
  std::vector<int64_t> tile;
  while (true) {
    int64_t v;
    if (!read_int(&v) || v < 1) return InvalidArgumentError("bad sharding " + Quoted(text));
    tile.push_back(v);
    if (p < t.size() && t[p] == ',') { ++p; continue; }
    if (p < t.size() && t[p] == ']') { ++p; break; }
    return InvalidArgumentError("bad sharding " + Quoted(text));
  }
  int64_t total = 1;
  for (int64_t v : tile) total *= v;
  if (total != num_devices)
    return InvalidArgumentError("sharding " + Quoted(text) + " covers " + std::to_string(total) + " devices, the mesh has " +
                                std::to_string(num_devices));
  std::vector<int64_t> devices;
  if (t.compare(p, 2, "<=") == 0) {  // iota: <=[dims] optionally T(perm)
    p += 2;
    if (p >= t.size() || t[p] != '[') return InvalidArgumentError("bad sharding " + Quoted(text));
    ++p;
    std::vector<int64_t> rd;
    while (true) {
      int64_t v;
      if (!read_int(&v) || v < 1) return InvalidArgumentError("bad sharding " + Quoted(text));
      rd.push_back(v);
      if (p < t.size() && t[p] == ',') { ++p; continue; }
      if (p < t.size() && t[p] == ']') { ++p; break; }
      return InvalidArgumentError("bad sharding " + Quoted(text));
    }
    std::vector<int64_t> perm(rd.size());
    std::iota(perm.begin(), perm.end(), 0);
    if (t.compare(p, 2, "T(") == 0) {
      p += 2;
      for (size_t k = 0; k < perm.size(); ++k) {
        if (!read_int(&perm[k]) || perm[k] >= static_cast<int64_t>(rd.size()))
          return InvalidArgumentError("bad sharding " + Quoted(text));
        if (p < t.size() && (t[p] == ',' || t[p] == ')')) ++p;
      }
    }
    int64_t rtotal = 1;
    for (int64_t v : rd) rtotal *= v;
    if (rtotal != total) return InvalidArgumentError("bad sharding " + Quoted(text));
    // devices = iota(rd).transpose(perm).flatten()
    std::vector<int64_t> td(rd.size()), rs(rd.size(), 1);
    for (int k = static_cast<int>(rd.size()) - 2; k >= 0; --k) rs[k] = rs[k + 1] * rd[k + 1];
    for (size_t k = 0; k < rd.size(); ++k) td[k] = rd[static_cast<size_t>(perm[k])];
    std::vector<int64_t> idx(td.size(), 0);
    for (int64_t i = 0; i < total; ++i) {
      int64_t v = 0;
      for (size_t k = 0; k < td.size(); ++k) v += idx[k] * rs[static_cast<size_t>(perm[k])];
      devices.push_back(v);
      for (int k = static_cast<int>(td.size()) - 1; k >= 0; --k) {
        if (++idx[k] < td[k]) break;
        idx[k] = 0;
      }
    }
  } else {
    for (int64_t i = 0; i < total; ++i) {
      int64_t v;
      if (!read_int(&v)) return InvalidArgumentError("bad sharding " + Quoted(text));
      devices.push_back(v);
      if (p < t.size() && t[p] == ',') ++p;
    }
  }
  const bool replicate_last = t.find("last_tile_dim_replicate") != std::string::npos ||
                              t.find("last_tile_dims=") != std::string::npos;
  std::vector<int64_t> data_tiles = tile;
  if (replicate_last) data_tiles.pop_back();
  out.tiles = data_tiles;
  out.device_tiles.assign(static_cast<size_t>(num_devices), std::vector<int64_t>(data_tiles.size(), 0));
  out.replica.assign(static_cast<size_t>(num_devices), 0);
  std::vector<int64_t> ts(tile.size(), 1);
  for (int k = static_cast<int>(tile.size()) - 2; k >= 0; --k) ts[k] = ts[k + 1] * tile[k + 1];
  for (int64_t pos = 0; pos < total; ++pos) {
    const int64_t dev = devices[static_cast<size_t>(pos)];
    if (dev < 0 || dev >= num_devices) return InvalidArgumentError("sharding names a device outside the mesh");
    for (size_t k = 0; k < data_tiles.size(); ++k) out.device_tiles[static_cast<size_t>(dev)][k] = (pos / ts[k]) % tile[k];
    if (replicate_last) out.replica[static_cast<size_t>(dev)] = (pos / ts.back()) % tile.back();
  }
  return out;
}

}  // namespace tpumesh::hlo
