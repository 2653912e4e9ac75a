// Topology: how the chips of a slice are wired. Chips sit on a 1-3 axis grid
// (e.g. a v5e-8 is 2x4); an axis has wraparound links only when the chip's
// rule says so (v5e: axes of 16, i.e. full-pod axes; a 2x4 slice has none).
// Each chip holds ChipSpec::devices_per_chip devices (v2: 2 cores; TPU7x: 2
// chiplets), on ChipSpec::chiplets_per_chip chiplets.
//
// Contract: device ids are assigned chip by chip with the first axis fastest
// (x, then y, then z), then core within chip — the order jax.devices() shows
// on a TPU slice. Hop counts are along shortest paths, using wraparound links
// where the axis has them; two cores of one chip are 0 hops apart. A chip's
// devices fill its chiplets in order: core_on_chip c is on chiplet
// c / (devices_per_chip / chiplets_per_chip).
#ifndef TPUMESH_MESH_TOPOLOGY_H_
#define TPUMESH_MESH_TOPOLOGY_H_

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "mesh/chip_spec.h"

namespace tpumesh::mesh {

struct DeviceCoords {
  std::array<int, 3> chip = {0, 0, 0};  // (x, y, z); unused axes are 0
  int core_on_chip = 0;
};

class Topology {
 public:
  // chip_dims: chips per axis, 1 to 3 axes, each >= 1.
  static StatusOr<Topology> Create(const ChipSpec& chip, std::vector<int> chip_dims);
  // Chips per axis for `devices` devices: the chip's default slice when it
  // has that many, else the squarest 2-D grid (1-D for a prime count).
  static StatusOr<std::vector<int>> DimsForDevices(const ChipSpec& chip, int devices);
  // "2x4" -> {2, 4}; "4x4x8" -> {4, 4, 8}.
  static StatusOr<std::vector<int>> ParseDims(std::string_view text);

  const std::vector<int>& chip_dims() const { return dims_; }
  bool wraps(int axis) const { return wraps_[axis]; }
  int num_chips() const { return num_chips_; }
  int devices_per_chip() const { return devices_per_chip_; }
  int chiplets_per_chip() const { return chiplets_per_chip_; }
  int num_devices() const { return num_chips_ * devices_per_chip_; }

  int ChipOfDevice(int device) const { return device / devices_per_chip_; }
  // The chiplet a device is on, numbered across the slice (chip * chiplets
  // per chip + chiplet on the chip).
  int ChipletOfDevice(int device) const {
    return device / (devices_per_chip_ / chiplets_per_chip_);
  }
  DeviceCoords Coords(int device) const;
  std::array<int, 3> ChipCoords(int chip) const;
  int ChipAt(const std::array<int, 3>& coords) const;

  // Shortest number of ICI hops between the chips of two devices.
  int Hops(int device_a, int device_b) const;
  int ChipHops(int chip_a, int chip_b) const;
  // Devices on chips one hop away, ascending, then the other cores of the
  // same chip.
  std::vector<int> Neighbours(int device) const;

  std::string DimsString() const;  // "2x4"

 private:
  std::vector<int> dims_;
  std::vector<bool> wraps_;
  int num_chips_ = 0;
  int devices_per_chip_ = 1;
  int chiplets_per_chip_ = 1;
};

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_TOPOLOGY_H_
