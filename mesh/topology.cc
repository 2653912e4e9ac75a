#include "mesh/topology.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string>

namespace tpumesh::mesh {

StatusOr<std::vector<int>> Topology::ParseDims(std::string_view text) {
  std::vector<int> dims;
  size_t pos = 0;
  while (true) {
    size_t x = text.find('x', pos);
    std::string_view part = text.substr(pos, x == std::string_view::npos ? text.npos : x - pos);
    int v = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || v < 1) {
      return InvalidArgumentError("topology '" + std::string(text) +
                                  "': expected chips per axis like 2x4 or 4x4x4, each >= 1");
    }
    dims.push_back(v);
    if (x == std::string_view::npos) break;
    pos = x + 1;
  }
  if (dims.size() > 3) {
    return InvalidArgumentError("topology '" + std::string(text) + "': at most 3 axes");
  }
  return dims;
}

StatusOr<std::vector<int>> Topology::DimsForDevices(const ChipSpec& chip, int devices) {
  if (devices < 1 || devices % chip.devices_per_chip != 0)
    return InvalidArgumentError(std::to_string(devices) + " devices: a " + chip.name + " chip holds " +
                                std::to_string(chip.devices_per_chip) + " devices, so the count must be a positive multiple of it");
  const int chips = devices / chip.devices_per_chip;
  int def = 1;
  for (int d : chip.default_topology) def *= d;
  if (def == chips) return chip.default_topology;
  int a = 1;
  for (int f = 1; f * f <= chips; ++f)
    if (chips % f == 0) a = f;
  if (a == 1) return std::vector<int>{chips};
  return std::vector<int>{a, chips / a};
}

StatusOr<Topology> Topology::Create(const ChipSpec& chip, std::vector<int> chip_dims) {
  if (chip_dims.empty() || chip_dims.size() > 3) {
    return InvalidArgumentError("topology must have 1 to 3 axes, got " +
                                std::to_string(chip_dims.size()));
  }
  if (chip.devices_per_chip < 1 || chip.chiplets_per_chip < 1 || chip.devices_per_chip % chip.chiplets_per_chip != 0)
    return InvalidArgumentError("chip " + chip.name + ": chiplets_per_chip must divide devices_per_chip");
  Topology t;
  int64_t chips = 1;
  for (int d : chip_dims) {
    if (d < 1) return InvalidArgumentError("topology axes must be >= 1");
    chips *= d;
    if (chips > 65536) return InvalidArgumentError("topology larger than 65536 chips");
    t.wraps_.push_back(chip.torus_wrap_size > 0 && d >= chip.torus_wrap_size &&
                       d % chip.torus_wrap_size == 0);
  }
  t.dims_ = std::move(chip_dims);
  t.num_chips_ = static_cast<int>(chips);
  t.devices_per_chip_ = chip.devices_per_chip;
  t.chiplets_per_chip_ = chip.chiplets_per_chip;
  return t;
}

std::array<int, 3> Topology::ChipCoords(int chip) const {
  std::array<int, 3> c = {0, 0, 0};
  for (size_t a = 0; a < dims_.size(); ++a) {
    c[a] = chip % dims_[a];
    chip /= dims_[a];
  }
  return c;
}

int Topology::ChipAt(const std::array<int, 3>& coords) const {
  int chip = 0;
  for (int a = static_cast<int>(dims_.size()) - 1; a >= 0; --a) {
    chip = chip * dims_[a] + coords[a];
  }
  return chip;
}

DeviceCoords Topology::Coords(int device) const {
  DeviceCoords d;
  d.chip = ChipCoords(ChipOfDevice(device));
  d.core_on_chip = device % devices_per_chip_;
  return d;
}

int Topology::ChipHops(int chip_a, int chip_b) const {
  const auto a = ChipCoords(chip_a);
  const auto b = ChipCoords(chip_b);
  int hops = 0;
  for (size_t i = 0; i < dims_.size(); ++i) {
    int d = std::abs(a[i] - b[i]);
    if (wraps_[i]) d = std::min(d, dims_[i] - d);
    hops += d;
  }
  return hops;
}

int Topology::Hops(int device_a, int device_b) const {
  return ChipHops(ChipOfDevice(device_a), ChipOfDevice(device_b));
}

std::vector<int> Topology::Neighbours(int device) const {
  const int chip = ChipOfDevice(device);
  std::vector<int> chips;
  const auto c = ChipCoords(chip);
  for (size_t a = 0; a < dims_.size(); ++a) {
    for (int step : {-1, 1}) {
      auto n = c;
      n[a] += step;
      if (n[a] < 0 || n[a] >= dims_[a]) {
        if (!wraps_[a]) continue;
        n[a] = (n[a] + dims_[a]) % dims_[a];
      }
      const int other = ChipAt(n);
      if (other != chip) chips.push_back(other);
    }
  }
  std::sort(chips.begin(), chips.end());
  chips.erase(std::unique(chips.begin(), chips.end()), chips.end());
  std::vector<int> out;
  for (int ch : chips)
    for (int k = 0; k < devices_per_chip_; ++k) out.push_back(ch * devices_per_chip_ + k);
  for (int k = 0; k < devices_per_chip_; ++k) {
    const int d = chip * devices_per_chip_ + k;
    if (d != device) out.push_back(d);
  }
  return out;
}

std::string Topology::DimsString() const {
  std::string s;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += "x";
    s += std::to_string(dims_[i]);
  }
  return s;
}

}  // namespace tpumesh::mesh
