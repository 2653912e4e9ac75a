#include "mesh/interconnect.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

namespace tpumesh::mesh {

std::string_view CollectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kPsum: return "psum";
    case CollectiveKind::kPmean: return "pmean";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kPsumScatter: return "psum_scatter";
    case CollectiveKind::kPpermute: return "ppermute";
    case CollectiveKind::kAllToAll: return "all_to_all";
  }
  return "?";
}

GroupLayout AnalyzeGroup(const Topology& topology, std::span<const int> devices) {
  GroupLayout g;
  g.devices = static_cast<int>(devices.size());
  std::set<int> chips, chiplets;
  for (int d : devices) {
    chips.insert(topology.ChipOfDevice(d));
    chiplets.insert(topology.ChipletOfDevice(d));
  }
  g.chips = static_cast<int>(chips.size());
  g.cores_per_chip = std::max(1, g.devices / std::max(1, g.chips));
  g.chiplets_per_chip = std::max(1, static_cast<int>(chiplets.size()) / std::max(1, g.chips));
  g.cores_per_chiplet = std::max(1, g.cores_per_chip / g.chiplets_per_chip);
  if (g.chips <= 1) {
    g.ring = false;
    g.hops_per_step = 0;
    g.algorithm = g.chiplets_per_chip > 1 ? "chiplet link" : "on-chip";
    return g;
  }
  // Bounding box of the group's chips.
  const int rank = static_cast<int>(topology.chip_dims().size());
  std::array<int, 3> lo = {1 << 30, 1 << 30, 1 << 30}, hi = {-1, -1, -1};
  for (int c : chips) {
    auto xyz = topology.ChipCoords(c);
    for (int a = 0; a < rank; ++a) {
      lo[a] = std::min(lo[a], xyz[a]);
      hi[a] = std::max(hi[a], xyz[a]);
    }
  }
  int64_t box = 1;
  int active = 0;
  bool wrap_cycle = false;
  for (int a = 0; a < rank; ++a) {
    const int extent = hi[a] - lo[a] + 1;
    box *= extent;
    if (extent > 1) {
      ++active;
      // A full axis with wraparound links is itself a cycle.
      if (topology.wraps(a) && extent == topology.chip_dims()[a]) wrap_cycle = true;
    }
  }
  if (box == g.chips) {
    g.hops_per_step = 1;
    if (g.chips == 2) {
      g.ring = false;  // one link between two chips: a line of two
    } else if (active == 1) {
      g.ring = wrap_cycle;
    } else {
      g.ring = wrap_cycle || (g.chips % 2 == 0);
    }
  } else {
    // A strided or scattered group: logically adjacent chips are several hops
    // apart; price it as a line whose steps cross the longest such gap.
    std::vector<int> order(chips.begin(), chips.end());
    int worst = 1;
    for (size_t i = 0; i + 1 < order.size(); ++i)
      worst = std::max(worst, topology.ChipHops(order[i], order[i + 1]));
    g.ring = false;
    g.hops_per_step = worst;
  }
  g.algorithm = g.ring ? "bidirectional ring" : "bidirectional line";
  return g;
}

namespace {

// All-gather of S bytes contributed per chip over n chips.
double AllGatherSeconds(const GroupLayout& g, double s, double bw, double lat) {
  const int n = g.chips;
  const double hop = g.hops_per_step * lat;
  if (g.ring) return (n - 1) * s / (2 * bw) + std::ceil((n - 1) / 2.0) * hop;
  return (n - 1) * s / bw + (n - 1) * hop;
}

double AllToAllSeconds(const GroupLayout& g, double s, double bw, double lat) {
  const int n = g.chips;
  const double hop = g.hops_per_step * lat;
  if (g.ring) return n * s / (8 * bw) + std::ceil(n / 2.0) * hop;
  return n * s / (4 * bw) + (n - 1) * hop;
}

}  // namespace

CollectiveCost ModelCollective(const ChipSpec& chip, const Topology& topology,
                               CollectiveKind kind, std::span<const int> group,
                               int64_t bytes, std::span<const std::pair<int, int>> pairs) {
  CollectiveCost cost;
  cost.layout = AnalyzeGroup(topology, group);
  const GroupLayout& g = cost.layout;
  const int n = g.devices;
  if (n <= 1 && kind != CollectiveKind::kPpermute) return cost;
  const double bw = chip.ici_link_bandwidth;
  const double lat = chip.ici_hop_latency_s;
  const double hbm = chip.hbm_bandwidth_per_chiplet();  // shared by the chiplet's cores
  const double d2d = chip.chiplet_link_bandwidth;
  const double b = static_cast<double>(bytes);
  const int c = g.cores_per_chip;
  const int k = g.cores_per_chiplet;
  // Time for the cores of one chiplet to combine their parts through HBM.
  const double on_chiplet = k > 1 ? (k - 1) * b / hbm : 0.0;
  // The chiplets of one chip: a line of q over the chiplet link, no latency.
  GroupLayout chiplet_line;
  chiplet_line.chips = g.chiplets_per_chip;
  chiplet_line.hops_per_step = 0;
  const bool chiplets = g.chiplets_per_chip > 1 && d2d > 0;
  const double q = g.chiplets_per_chip;

  switch (kind) {
    case CollectiveKind::kAllGather: {
      cost.bytes_sent_per_device = bytes * (n - 1);
      cost.seconds = on_chiplet + (chiplets ? AllGatherSeconds(chiplet_line, b * k, d2d, 0) : 0) +
                     (g.chips > 1 ? AllGatherSeconds(g, b * c, bw, lat) : 0);
      break;
    }
    case CollectiveKind::kPsumScatter: {
      cost.bytes_sent_per_device = bytes * (n - 1) / n;
      cost.seconds = on_chiplet + (chiplets ? AllGatherSeconds(chiplet_line, b / q, d2d, 0) : 0) +
                     (g.chips > 1 ? AllGatherSeconds(g, b / g.chips, bw, lat) : 0);
      break;
    }
    case CollectiveKind::kPsum:
    case CollectiveKind::kPmean: {
      cost.bytes_sent_per_device = 2 * bytes * (n - 1) / n;
      cost.seconds = 2 * on_chiplet + (chiplets ? 2 * AllGatherSeconds(chiplet_line, b / q, d2d, 0) : 0) +
                     (g.chips > 1 ? 2 * AllGatherSeconds(g, b / g.chips, bw, lat) : 0);
      break;
    }
    case CollectiveKind::kAllToAll: {
      cost.bytes_sent_per_device = bytes * (n - 1) / n;
      cost.seconds = on_chiplet + (chiplets ? AllToAllSeconds(chiplet_line, b * k, d2d, 0) : 0) +
                     (g.chips > 1 ? AllToAllSeconds(g, b * c, bw, lat) : 0);
      break;
    }
    case CollectiveKind::kPpermute: {
      double worst = 0;
      for (const auto& [src, dst] : pairs) {
        if (src == dst) continue;
        const int hops = topology.Hops(src, dst);
        double t = b / bw + hops * lat;
        if (hops == 0)
          t = topology.ChipletOfDevice(src) == topology.ChipletOfDevice(dst) || d2d <= 0 ? b / hbm : b / d2d;
        worst = std::max(worst, t);
      }
      cost.bytes_sent_per_device = bytes;
      cost.seconds = worst;
      break;
    }
  }
  return cost;
}

}  // namespace tpumesh::mesh
