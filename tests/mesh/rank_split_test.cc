// What a collective across ranks sends where (mesh/rank_split.h), on an
// 8-device mesh that a stand-in cluster claims is split over 2 or 4 ranks
// (nothing is exchanged here; tests/cluster runs the collectives under
// mpirun): each rank gets only what its devices need, a group inside one
// rank sends nothing, and psum's owned ranges cover the array once.
#include "mesh/rank_split.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/mesh.h"

namespace tpumesh::mesh {
namespace {

class Claimed final : public Cluster {
 public:
  explicit Claimed(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  std::string transport() const override { return "claimed"; }
  StatusOr<std::vector<Bytes>> Exchange(std::span<const Outgoing>) override { return InternalError("not connected"); }
  Status Barrier() override { return InternalError("not connected"); }
  [[noreturn]] void Fail(const Status&) override { std::abort(); }

 private:
  int size_;
};

struct Fixture {
  explicit Fixture(int ranks, std::vector<MeshAxis> axes) : cluster(ranks) {
    MeshOptions o;
    o.cluster = &cluster;
    mesh = std::move(Mesh::Create(V5eChip(), {2, 4}, std::move(axes), o)).value();
  }
  RankSplit Split(const CollectiveCall& call, int device) {
    return RankSplit(*mesh, call, std::move(mesh->Group(device, call.axes)).value());
  }
  Claimed cluster;
  std::unique_ptr<Mesh> mesh;
};

CollectiveCall Call(CollectiveKind kind, AxisNames axes, Shape shape, DType t = DType::kF32) {
  CollectiveCall c;
  c.kind = kind;
  c.axes = std::move(axes);
  c.shape = std::move(shape);
  c.dtype = t;
  return c;
}

TEST(RankSplitTest, PsumOwnedRangesCoverTheArrayOnceAndGoOnlyToTheirOwner) {
  for (int ranks : {2, 4}) {
    Fixture f(ranks, {{"data", 8}});
    for (int64_t count : {0, 1, 3, 15, 1001}) {
      const CollectiveCall c = Call(CollectiveKind::kPsum, {"data"}, {count});
      const RankSplit s = f.Split(c, 0);
      ASSERT_EQ(static_cast<int>(s.ranks().size()), ranks);
      int64_t next = 0;
      for (int r : s.ranks()) {
        const auto [b, e] = s.OwnedElements(r);
        EXPECT_EQ(b, next) << "rank " << r << " count " << count;
        EXPECT_LE(e - b, count / ranks + 1);
        next = e;
      }
      EXPECT_EQ(next, count);
      // Member 0 (rank 0) sends each other rank exactly its range, in bytes.
      for (int r = 0; r < ranks; ++r) {
        const auto [b, e] = s.OwnedElements(r);
        const auto slices = s.Slices(0, r);
        if (r == 0 || e == b) {
          EXPECT_TRUE(slices.empty()) << r;
          continue;
        }
        ASSERT_EQ(slices.size(), 1u);
        EXPECT_EQ(slices[0].offset, b * 4);
        EXPECT_EQ(slices[0].size, (e - b) * 4);
      }
    }
  }
}

TEST(RankSplitTest, AGroupInsideARankSendsNothing) {
  Fixture f(2, {{"data", 2}, {"model", 4}});
  for (CollectiveKind k : {CollectiveKind::kPsum, CollectiveKind::kAllGather, CollectiveKind::kPpermute}) {
    CollectiveCall c = Call(k, {"model"}, {4, 4});
    c.perm = {{0, 3}};
    const RankSplit s = f.Split(c, 1);
    EXPECT_FALSE(s.spans_ranks());
    for (int k2 = 0; k2 < 4; ++k2) EXPECT_TRUE(s.Slices(k2, 1).empty());
  }
}

TEST(RankSplitTest, PpermuteSendsOnlyToTheDestinationsRank) {
  // data=8 over 4 ranks: member k is device k, on rank k/2.
  Fixture f(4, {{"data", 8}});
  CollectiveCall c = Call(CollectiveKind::kPpermute, {"data"}, {5}, DType::kBF16);
  c.perm = {{0, 7}, {1, 0}, {2, 3}};
  const RankSplit s = f.Split(c, 0);
  EXPECT_EQ(s.SliceBytes(0, 3), 10);  // 0 -> 7 on rank 3
  EXPECT_EQ(s.SliceBytes(0, 1), 0);
  EXPECT_EQ(s.SliceBytes(0, 2), 0);
  EXPECT_EQ(s.SliceBytes(1, 0), 0);   // 1 -> 0: the same rank
  EXPECT_EQ(s.SliceBytes(2, 1), 0);   // 2 -> 3: the same rank
  for (int r = 0; r < 4; ++r) EXPECT_EQ(s.SliceBytes(5, r), 0) << "member 5 sends to nobody";
}

TEST(RankSplitTest, AllGatherGoesWholeToEveryOtherRankWithAMember) {
  // data=4,model=2 over 4 ranks: a `data` group is {m, m+2, m+4, m+6}, one
  // member per rank.
  Fixture f(4, {{"data", 4}, {"model", 2}});
  const CollectiveCall c = Call(CollectiveKind::kAllGather, {"data"}, {3, 2}, DType::kI32);
  const RankSplit s = f.Split(c, 1);
  EXPECT_EQ(s.group(), (std::vector<int>{1, 3, 5, 7}));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(s.SliceBytes(0, r), r == 0 ? 0 : 24) << r;
}

TEST(RankSplitTest, PsumScatterSendsTheBlocksOfTheReceiversMembers) {
  // data=8 over 2 ranks: rank 1 hosts members 4..7. Input [outer=3, 8,
  // chunk=2]: rank 1 gets, per row, the 4 blocks of members 4..7, which
  // touch: one range per row.
  Fixture f(2, {{"data", 8}});
  CollectiveCall c = Call(CollectiveKind::kPsumScatter, {"data"}, {3, 16});
  c.axis = 1;
  c.tiled = true;
  const RankSplit s = f.Split(c, 0);
  const auto slices = s.Slices(0, 1);
  ASSERT_EQ(slices.size(), 3u);
  for (int o = 0; o < 3; ++o) {
    EXPECT_EQ(slices[o].offset, (o * 16 + 8) * 4);
    EXPECT_EQ(slices[o].size, 8 * 4);
  }
  EXPECT_EQ(s.PositionOnRank(6), 2);
}

TEST(RankSplitTest, AllToAllSendsTheChunksOfTheReceiversMembers) {
  // data=8 over 4 ranks, tiled split of axis 1 (16 = 8 chunks of 2): rank 2
  // hosts members 4 and 5, whose chunks are columns 8..11 of each row.
  Fixture f(4, {{"data", 8}});
  CollectiveCall c = Call(CollectiveKind::kAllToAll, {"data"}, {3, 16});
  c.axis = 1;
  c.concat_axis = 0;
  c.tiled = true;
  const RankSplit s = f.Split(c, 0);
  EXPECT_EQ(s.AllToAllBox(), (Shape{3, 2}));
  // Member 4's box (3 rows of columns 8..9), then member 5's (10..11).
  const auto slices = s.Slices(0, 2);
  ASSERT_EQ(slices.size(), 6u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(slices[i].offset, (i * 16 + 8) * 4);
    EXPECT_EQ(slices[3 + i].offset, (i * 16 + 10) * 4);
  }
  EXPECT_EQ(s.SliceBytes(0, 2), 12 * 4);
  EXPECT_EQ(s.SliceBytes(0, 0), 0);
}

}  // namespace
}  // namespace tpumesh::mesh
