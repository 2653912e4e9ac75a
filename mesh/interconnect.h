// The interconnect (ICI) cost model: pure functions from (collective, group
// of devices, bytes, ChipSpec, Topology) to a modelled time. Nothing here
// moves data or touches a device; collectives.cc calls it to advance the
// simulated clocks, and `simulate` can call it without any device.
//
// Model (docs/mesh.md derives it): the devices of a group are reduced to the
// chips they sit on. When those chips form a full box of the slice that has a
// unit-hop Hamiltonian cycle (an axis with wraparound, or a 2-D box with an
// even chip count), the collective runs as a bidirectional ring; otherwise as
// a bidirectional line, whose end chips receive everything over one link
// ("axes without wraparound pay the longer path"). With B the one-way link
// bandwidth, L the per-hop latency, n chips and S bytes contributed per chip:
//   all_gather     ring: (n-1) S / (2B) + ceil((n-1)/2) L   line: (n-1) S / B + (n-1) L
//   psum_scatter   all_gather of the scattered chunks (S = F/n for input F)
//   psum / pmean   psum_scatter + all_gather
//   all_to_all     ring: n S / (8B) + ceil(n/2) L           line: n S / (4B) + (n-1) L
//   ppermute       max over pairs of S / B + hops L
// Inside a chip, before and after the chips' stage: devices of one chiplet
// (v2's two cores) exchange through its HBM, (k-1) S / H for k of them at
// the chiplet's HBM bandwidth H (2x for psum); the q chiplets of a chip
// (TPU7x) form a line over the chiplet link of bandwidth D, priced with the
// line formulas above at D with no hop latency (each chiplet contributing
// k S). One chiplet per chip (every preset but TPU7x): no chiplet stage.
#ifndef TPUMESH_MESH_INTERCONNECT_H_
#define TPUMESH_MESH_INTERCONNECT_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mesh/chip_spec.h"
#include "mesh/topology.h"

namespace tpumesh::mesh {

enum class CollectiveKind { kPsum, kPmean, kAllGather, kPsumScatter, kPpermute, kAllToAll };
std::string_view CollectiveName(CollectiveKind kind);  // "psum", "all_gather", ...

// How a group of devices is laid out on the ICI.
struct GroupLayout {
  int devices = 1;
  int chips = 1;
  int cores_per_chip = 1;  // group devices per chip
  int chiplets_per_chip = 1;   // group chiplets per chip
  int cores_per_chiplet = 1;   // group devices per chiplet
  bool ring = false;       // a unit-hop cycle through the group's chips exists
  int hops_per_step = 1;   // physical hops between logically adjacent chips
  // "bidirectional ring", "bidirectional line", "on-chip" (one chiplet),
  // "chiplet link" (one chip, several chiplets).
  std::string algorithm;
};
GroupLayout AnalyzeGroup(const Topology& topology, std::span<const int> devices);

struct CollectiveCost {
  double seconds = 0;               // modelled time on the emulated chip
  int64_t bytes_sent_per_device = 0;  // modelled ICI/HBM traffic each device sends
  GroupLayout layout;
};

// bytes: the per-device INPUT size of the collective (for ppermute, the
// buffer each source sends). pairs: ppermute's (source, destination) device
// ids; ignored otherwise.
CollectiveCost ModelCollective(const ChipSpec& chip, const Topology& topology,
                               CollectiveKind kind, std::span<const int> group,
                               int64_t bytes,
                               std::span<const std::pair<int, int>> pairs = {});

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_INTERCONNECT_H_
