// The ICI cost model against hand calculations (formulas: interconnect.h).
#include "mesh/interconnect.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace tpumesh::mesh {
namespace {

constexpr double kB = 50e9;   // v5e one-way link bandwidth (chip_spec.cc)
constexpr double kL = 1e-6;   // per-hop latency
constexpr int64_t kS = 1 << 20;

std::vector<int> Iota(int n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

Topology Topo(const ChipSpec& c, std::vector<int> dims) { return *Topology::Create(c, dims); }

TEST(InterconnectTest, V5e2x4IsARingWithoutWraparound) {
  ChipSpec c = V5eChip();
  ASSERT_DOUBLE_EQ(c.ici_link_bandwidth, kB);
  ASSERT_DOUBLE_EQ(c.ici_hop_latency_s, kL);
  Topology t = Topo(c, {2, 4});
  auto g = AnalyzeGroup(t, Iota(8));
  EXPECT_TRUE(g.ring);  // a 2x4 grid has a unit-hop Hamiltonian cycle
  EXPECT_EQ(g.chips, 8);
  auto ag = ModelCollective(c, t, CollectiveKind::kAllGather, Iota(8), kS);
  EXPECT_DOUBLE_EQ(ag.seconds, 7.0 * kS / (2 * kB) + 4 * kL);
  EXPECT_EQ(ag.bytes_sent_per_device, 7 * kS);
  auto ps = ModelCollective(c, t, CollectiveKind::kPsum, Iota(8), kS);
  EXPECT_DOUBLE_EQ(ps.seconds, 2 * (7.0 * (kS / 8.0) / (2 * kB) + 4 * kL));
  auto rs = ModelCollective(c, t, CollectiveKind::kPsumScatter, Iota(8), kS);
  EXPECT_DOUBLE_EQ(rs.seconds, ps.seconds / 2);
  auto a2a = ModelCollective(c, t, CollectiveKind::kAllToAll, Iota(8), kS);
  EXPECT_DOUBLE_EQ(a2a.seconds, 8.0 * kS / (8 * kB) + 4 * kL);
}

TEST(InterconnectTest, LineWithoutWraparoundPaysTheLongerPath) {
  ChipSpec c = V5eChip();
  Topology line = Topo(c, {4});
  auto g = AnalyzeGroup(line, Iota(4));
  EXPECT_FALSE(g.ring);
  auto ag = ModelCollective(c, line, CollectiveKind::kAllGather, Iota(4), kS);
  EXPECT_DOUBLE_EQ(ag.seconds, 3.0 * kS / kB + 3 * kL);
  auto a2a = ModelCollective(c, line, CollectiveKind::kAllToAll, Iota(4), kS);
  EXPECT_DOUBLE_EQ(a2a.seconds, 4.0 * kS / (4 * kB) + 3 * kL);
  // Two chips: one link.
  Topology two = Topo(c, {2});
  EXPECT_DOUBLE_EQ(ModelCollective(c, two, CollectiveKind::kAllGather, Iota(2), kS).seconds,
                   1.0 * kS / kB + kL);
}

TEST(InterconnectTest, FullPodAxisWrapsIntoARing) {
  ChipSpec c = V5eChip();
  Topology t = Topo(c, {16});
  EXPECT_TRUE(t.wraps(0));
  auto ag = ModelCollective(c, t, CollectiveKind::kAllGather, Iota(16), kS);
  EXPECT_DOUBLE_EQ(ag.seconds, 15.0 * kS / (2 * kB) + 8 * kL);
  // Eight chips in a line are not a full v5e axis: no wraparound.
  Topology no_wrap = Topo(c, {8});
  EXPECT_FALSE(AnalyzeGroup(no_wrap, Iota(8)).ring);
}

TEST(InterconnectTest, StridedGroupCrossesSeveralHops) {
  ChipSpec c = V5eChip();
  Topology t = Topo(c, {1, 8});
  std::vector<int> group = {0, 2, 4, 6};  // every other chip of a line
  auto g = AnalyzeGroup(t, group);
  EXPECT_FALSE(g.ring);
  EXPECT_EQ(g.hops_per_step, 2);
  EXPECT_DOUBLE_EQ(ModelCollective(c, t, CollectiveKind::kAllGather, group, kS).seconds,
                   3.0 * kS / kB + 3 * 2 * kL);
}

TEST(InterconnectTest, CoresOfOneChipUseHbm) {
  ChipSpec c = V2Chip();
  Topology t = Topo(c, {2, 2});
  std::vector<int> pair = {4, 5};  // the two cores of chip 2
  auto g = AnalyzeGroup(t, pair);
  EXPECT_EQ(g.chips, 1);
  EXPECT_EQ(g.algorithm, "on-chip");
  EXPECT_DOUBLE_EQ(ModelCollective(c, t, CollectiveKind::kAllGather, pair, kS).seconds,
                   1.0 * kS / c.hbm_bandwidth);
}

TEST(InterconnectTest, PpermuteIsTheSlowestPair) {
  ChipSpec c = V5eChip();
  Topology t = Topo(c, {2, 4});
  std::vector<std::pair<int, int>> pairs = {{0, 1}, {0 + 1, 7}};  // 1 hop, then (1,0)->(1,3): 3 hops
  auto p = ModelCollective(c, t, CollectiveKind::kPpermute, Iota(8), kS, pairs);
  EXPECT_DOUBLE_EQ(p.seconds, 1.0 * kS / kB + 3 * kL);
  EXPECT_DOUBLE_EQ(ModelCollective(c, t, CollectiveKind::kPsum, {std::vector<int>{3}}, kS).seconds, 0);
}

}  // namespace
}  // namespace tpumesh::mesh
