// models/parallel.h and the split declarations of models/params.h: how a
// parameter is cut into rank shares, how a collective over the model axis is
// priced where the axis sits on the topology, and the row/column layers
// against the whole layer.
#include "models/parallel.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/chip_spec.h"

namespace tpumesh::models {
namespace {

using mesh::Array;
using mesh::DType;
using ::testing::HasSubstr;

Array Iota(mesh::Shape shape) {
  Array a = Array::Host(DType::kF32, shape);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.mutable_data<float>()[i] = static_cast<float>(i);
  return a;
}

TEST(ParamShardTest, UnitsAreBalancedAndCoverEverything) {
  EXPECT_EQ(ShardUnits(10, 4, 0), std::make_pair(int64_t{0}, int64_t{2}));
  EXPECT_EQ(ShardUnits(10, 4, 1), std::make_pair(int64_t{2}, int64_t{5}));
  EXPECT_EQ(ShardUnits(10, 4, 3), std::make_pair(int64_t{7}, int64_t{10}));
  ParamSplit s{0, 10, 1, false, "heads"};
  EXPECT_TRUE(s.SplitsOver(4));
  EXPECT_FALSE(s.SplitsOver(1));
  EXPECT_FALSE(s.SplitsOver(16));  // more ranks than heads: whole
  s.even = true;
  EXPECT_FALSE(s.SplitsOver(4));  // an all_gathered layer needs equal shares
  EXPECT_TRUE(s.SplitsOver(5));
}

// GEGLU's [value; gate] projection: each rank gets the same columns of both
// halves; a row-parallel weight is cut along its input features.
TEST(ParamShardTest, SlicesHoldTheRightRows) {
  std::vector<ParamSpec> manifest = {
      {"ff.weight", {8, 3}, {0, 4, 2, false, "columns"}},
      {"out.weight", {3, 4}, {1, 4, 1, false, "columns"}},
      {"norm.weight", {3}, {}},
  };
  std::map<std::string, Array> m = {{"ff.weight", Iota({8, 3})}, {"out.weight", Iota({3, 4})},
                                    {"norm.weight", Iota({3})}};
  ParamMap full(m);
  auto ranks = ShardParams(full, manifest, 2);
  ASSERT_TRUE(ranks.ok()) << ranks.status().ToString();
  ASSERT_EQ(ranks->size(), 2u);
  const ParamMap& r1 = (*ranks)[1];
  // ff rows 2,3 (value half) and 6,7 (gate half).
  EXPECT_EQ(r1["ff.weight"].shape(), (mesh::Shape{4, 3}));
  EXPECT_EQ(r1["ff.weight"].ToVector<float>(),
            (std::vector<float>{6, 7, 8, 9, 10, 11, 18, 19, 20, 21, 22, 23}));
  EXPECT_EQ(r1["out.weight"].ToVector<float>(), (std::vector<float>{2, 3, 6, 7, 10, 11}));
  EXPECT_TRUE(r1["norm.weight"].SharesStorageWith(full["norm.weight"]));
  ASSERT_NE(r1.split("ff.weight"), nullptr);
  EXPECT_EQ(*r1.split("ff.weight"), std::make_pair(int64_t{2}, int64_t{4}));
  EXPECT_EQ(r1.split("norm.weight"), nullptr);
  EXPECT_EQ(ShardManifest(manifest, 2, 1)[0].shape, (mesh::Shape{4, 3}));
  EXPECT_TRUE(CheckShards(*ranks, manifest, "test").ok());
  auto bad = CheckShards({full, full}, manifest, "test");
  EXPECT_FALSE(bad.ok());
  // The ranks pack into one WeightPacks: a weight they hold in common is
  // packed once, and a rank that releases its loaded pages after packing
  // cannot take them from another rank's packer (generate of SD 1.5 with
  // data=4,model=2 crashed in PackWeight).
  EXPECT_EQ((*ranks)[0].packs(), r1.packs());
}

// A psum over the model axis of data=2,model=4 on a v5e 2x4 slice, priced in
// a dry run. Along x the four devices are a 2x2 box of chips (a ring);
// along y a line of four without wraparound. With F bytes, n = 4 chips, B
// the link bandwidth and L the hop latency, psum = psum_scatter + all_gather
// of F/n chunks:
//   ring: 2 [(n-1) (F/n) / (2B) + ceil((n-1)/2) L] = 3F/(4B) + 4L
//   line: 2 [(n-1) (F/n) / B + (n-1) L]            = 3F/(2B) + 6L
TEST(ModelAxisTest, PsumPricedWhereTheAxisRuns) {
  auto chip = mesh::LoadChipSpec("v5e");
  ASSERT_TRUE(chip.ok());
  const double B = chip->ici_link_bandwidth, L = chip->ici_hop_latency_s;
  const double F = 4e6;  // 1e6 f32 values at precision highest
  for (const char* along : {"x", "y"}) {
    mesh::MeshSpec spec;
    spec.axes = "data=2,model=4";
    spec.model_axis_along = along;
    auto m = mesh::CreateDataModelMesh(spec);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto axis = ModelAxis::Priced(**m, 0);
    ASSERT_TRUE(axis.ok()) << axis.status().ToString();
    EXPECT_EQ(axis->size(), 4);
    std::vector<mesh::OpRecord> ops;
    Ctx ctx{nullptr, Precision::kHighest};
    ctx.dry_run = true;
    ctx.ops = &ops;
    ctx.model = &*axis;
    ctx.scope = "unet";
    auto y = axis->Psum(ctx, Array::Host(DType::kF32, {1000, 1000}), "mid_block.resnets.0.conv2");
    ASSERT_TRUE(y.ok());
    ASSERT_EQ(ops.size(), 1u);
    const double want = std::string(along) == "x" ? 3 * F / (4 * B) + 4 * L : 3 * F / (2 * B) + 6 * L;
    EXPECT_NEAR(ops[0].ici_seconds, want, 1e-12) << "model along " << along;
    EXPECT_EQ(ops[0].type, "collective");
    EXPECT_EQ(ops[0].module, "unet/mid_block.resnets.0.conv2");
    EXPECT_GT(ops[0].ici_bytes, 0);
    // Along x the group is devices 0-3; along y devices 0, 2, 4, 6.
    EXPECT_EQ(axis->group(), (std::string(along) == "x" ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0, 2, 4, 6}));
  }
}

TEST(ModelAxisTest, ParametersSplitForAnotherAxisSizeAreRefused) {
  std::vector<ParamMap> ranks(2);
  Ctx ctx;
  auto p = RankParams(ctx, ranks, "unet");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("split 2 ways"));
}

}  // namespace
}  // namespace tpumesh::models
