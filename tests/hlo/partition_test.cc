// The partitioner's rules (hlo/partition.h) one op at a time: how splits
// pass through an op, when an operand is gathered and when the results are
// partial sums; and the device groups a sharding gives.
#include "hlo/partition.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/module.h"

namespace tpumesh::hlo {
namespace {

// A group of `ways` devices: 0, stride, 2*stride, ...
DeviceGroup Group(int ways, int stride = 1) {
  std::vector<int> g;
  for (int i = 0; i < ways; ++i) g.push_back(i * stride);
  return std::make_shared<const std::vector<int>>(g);
}
Split SplitAt(size_t rank, size_t dim, int ways, int stride = 1) {
  Split s;
  s.dims.assign(rank, DimSplit{});
  s.dims[dim] = {ways, Group(ways, stride)};
  return s;
}

// The module's @main body's first op, with its operand and result types.
struct OneOp {
  Module m;
  const Op* op = nullptr;
};
OneOp Parse(const std::string& body, const std::string& args, const std::string& result) {
  OneOp o;
  auto m = ParseModule("func.func @main(" + args + ") -> " + result + " {\n" + body + "\n  return %0 : " + result + "\n}\n",
                       "t.mlir");
  EXPECT_TRUE(m.ok()) << m.status().message();
  o.m = std::move(*m);
  o.op = &o.m.FindFunc("main")->body.blocks[0].ops[0];
  return o;
}
Partitioned PropagateOne(const OneOp& o, const std::vector<Split>& in) {
  return Propagate(*o.op, o.op->operand_types, in, o.op->result_types);
}

TEST(Partition, BatchSplitPassesThroughAMatmulAndIsReadLocally) {
  const auto o = Parse("  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : "
                       "(tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>",
                       "%a: tensor<8x16xf32>, %b: tensor<16x4xf32>", "tensor<8x4xf32>");
  const Partitioned p = PropagateOne(o, {SplitAt(2, 0, 8), {}});
  EXPECT_TRUE(p.gathered.empty());
  EXPECT_TRUE(p.reduced_over.empty());
  EXPECT_EQ(p.results[0].Local(o.op->result_types[0]).dims, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(p.read[0].Local(o.op->operand_types[0]).dims, (std::vector<int64_t>{1, 16}));
  EXPECT_EQ(p.read[1].Local(o.op->operand_types[1]).dims, (std::vector<int64_t>{16, 4}));
}

TEST(Partition, SplitContractingDimensionGivesPartialSums) {
  const auto o = Parse("  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : "
                       "(tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>",
                       "%a: tensor<8x16xf32>, %b: tensor<16x4xf32>", "tensor<8x4xf32>");
  const Partitioned p = PropagateOne(o, {SplitAt(2, 1, 4), SplitAt(2, 0, 4)});
  EXPECT_TRUE(p.gathered.empty());
  ASSERT_EQ(p.reduced_over.size(), 1u);
  EXPECT_EQ(*p.reduced_over[0], *Group(4));
  EXPECT_TRUE(p.results[0].replicated());
  // One side split: the whole side is read as the matching piece.
  const Partitioned one = PropagateOne(o, {{}, SplitAt(2, 0, 4)});
  EXPECT_EQ(one.reduced_over.size(), 1u);
  EXPECT_EQ(one.read[0].Local(o.op->operand_types[0]).dims, (std::vector<int64_t>{8, 4}));
  // Split on different device groups: one side is gathered instead.
  const Partitioned q = PropagateOne(o, {SplitAt(2, 1, 4), SplitAt(2, 0, 4, 2)});
  EXPECT_EQ(q.gathered, (std::vector<size_t>{1}));
}

TEST(Partition, ReshapeKeepsASplitWhosePrefixSurvives) {
  const auto keep = Parse("  %0 = stablehlo.reshape %a : (tensor<8x4x4xf32>) -> tensor<8x16xf32>",
                          "%a: tensor<8x4x4xf32>", "tensor<8x16xf32>");
  const Partitioned p = PropagateOne(keep, {SplitAt(3, 0, 8)});
  EXPECT_TRUE(p.gathered.empty());
  EXPECT_EQ(p.results[0].Local(keep.op->result_types[0]).dims, (std::vector<int64_t>{1, 16}));
  const auto merge = Parse("  %0 = stablehlo.reshape %a : (tensor<8x4x4xf32>) -> tensor<128xf32>",
                           "%a: tensor<8x4x4xf32>", "tensor<128xf32>");
  const Partitioned q = PropagateOne(merge, {SplitAt(3, 1, 4)});  // the middle dimension cannot stay split
  EXPECT_EQ(q.gathered, (std::vector<size_t>{0}));
  EXPECT_TRUE(q.results[0].replicated());
}

TEST(Partition, ReducingASplitDimensionIsAnAllReduce) {
  const auto o = Parse("  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
                       "  %0 = stablehlo.reduce(%a init: %c) applies stablehlo.add across dimensions = [0] : "
                       "(tensor<8x4xf32>, tensor<f32>) -> tensor<4xf32>",
                       "%a: tensor<8x4xf32>", "tensor<4xf32>");
  const Op& reduce = o.m.FindFunc("main")->body.blocks[0].ops[1];
  const Partitioned p = Propagate(reduce, reduce.operand_types, {SplitAt(2, 0, 8), {}}, reduce.result_types);
  ASSERT_EQ(p.reduced_over.size(), 1u);
  EXPECT_TRUE(p.results[0].replicated());
  const Partitioned q = Propagate(reduce, reduce.operand_types, {SplitAt(2, 1, 4), {}}, reduce.result_types);
  EXPECT_TRUE(q.reduced_over.empty());
  EXPECT_EQ(q.results[0].Local(reduce.result_types[0]).dims, (std::vector<int64_t>{1}));
}

TEST(Partition, OperandsSplitDifferentlyAreGathered) {
  const auto o = Parse("  %0 = stablehlo.add %a, %b : tensor<8x8xf32>", "%a: tensor<8x8xf32>, %b: tensor<8x8xf32>",
                       "tensor<8x8xf32>");
  const Partitioned p = PropagateOne(o, {SplitAt(2, 0, 8), SplitAt(2, 1, 8)});
  EXPECT_EQ(p.gathered, (std::vector<size_t>{1}));
  EXPECT_EQ(p.results[0], SplitAt(2, 0, 8));
  // A slice that cuts the split dimension needs it whole.
  const auto s = Parse("  %0 = stablehlo.slice %a [0:4, 0:8] : (tensor<8x8xf32>) -> tensor<4x8xf32>",
                       "%a: tensor<8x8xf32>", "tensor<4x8xf32>");
  EXPECT_EQ(PropagateOne(s, {SplitAt(2, 0, 2)}).gathered, (std::vector<size_t>{0}));
  EXPECT_TRUE(PropagateOne(s, {SplitAt(2, 1, 2)}).gathered.empty());
}

TEST(Partition, ShardingsGiveTheDevicesOfEachPiece) {
  // 2x4 devices, dimension 0 over the first axis, the second replicated:
  // device 5 (row 1, column 1) shares its pieces with device 1.
  auto s = MhloSharding("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", 8);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Split split = SplitOf(*s, 5, {4, 6});
  EXPECT_EQ(split.dim(0).ways, 2);
  EXPECT_EQ(*split.dim(0).group, (std::vector<int>{1, 5}));
  EXPECT_FALSE(split.dim(1).split());
  EXPECT_EQ(split.Local(Type{Type::Kind::kTensor, ElementType::kF32, {4, 6}, {}}).dims, (std::vector<int64_t>{2, 6}));
  // Not divisible: left whole.
  EXPECT_TRUE(SplitOf(*s, 5, {3, 6}).replicated());
}

TEST(Partition, AMeshWithoutAxesIsReplicatedAndNotTheProgramsMesh) {
  // JAX gives a scalar argument of a sharded jit the sharding
  // #sdy.sharding<@empty_mesh, []>: replicated on the run's mesh; and it
  // may declare @empty_mesh before the mesh the program runs on (pmap).
  auto m = ParseModule(
      "module @m {\n"
      "  sdy.mesh @empty_mesh = <[]>\n"
      "  sdy.mesh @mesh = <[\"i\"=8]>\n"
      "  func.func public @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"i\"}, {}]>},\n"
      "                         %arg1: tensor<i32> {sdy.sharding = #sdy.sharding<@empty_mesh, []>}) -> tensor<8x4xf32> {\n"
      "    return %arg0 : tensor<8x4xf32>\n"
      "  }\n"
      "}\n",
      "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Func& main = *m->FindFunc("main");
  // The program's mesh is its first with axes, whatever the order.
  const std::vector<mesh::MeshAxis> axes = SdyMeshAxes(*m);
  ASSERT_EQ(axes.size(), 1u);
  EXPECT_EQ(axes[0].name, "i");
  EXPECT_EQ(axes[0].size, 8);
  auto split = SdySharding(*main.arg_attrs[0].Find("sdy.sharding"), *m, axes);
  ASSERT_TRUE(split.ok()) << split.status().message();
  EXPECT_EQ(split->tiles, (std::vector<int64_t>{8, 1}));
  auto whole = SdySharding(*main.arg_attrs[1].Find("sdy.sharding"), *m, axes);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_TRUE(whole->tiles.empty());
  // On a run mesh of other names over as many devices, the sharding's own
  // mesh tiles it; over another device count it is refused, naming both.
  auto renamed = SdySharding(*main.arg_attrs[0].Find("sdy.sharding"), *m, {{"data", 2}, {"model", 4}});
  ASSERT_TRUE(renamed.ok()) << renamed.status().message();
  EXPECT_EQ(renamed->tiles, (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(renamed->device_tiles[5], (std::vector<int64_t>{5, 0}));
  auto other = SdySharding(*main.arg_attrs[0].Find("sdy.sharding"), *m, {{"data", 4}});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("sdy mesh @mesh is i=8 (8 devices) but the run's mesh is data=4 (4 devices"),
            std::string::npos)
      << other.status().message();
}

TEST(Partition, UnreducedAxesAreTheirOwnSubgroup) {
  // #sdy.sharding<@mesh, [{"x"}, {}], unreduced={"z"}> on x=2, y=2, z=2:
  // y holds copies, z partial values.
  auto m = ParseModule(
      "module @m {\n"
      "  sdy.mesh @mesh = <[\"x\"=2, \"y\"=2, \"z\"=2]>\n"
      "  func.func public @main(%arg0: tensor<4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, {}], "
      "unreduced={\"z\"}>}) -> tensor<4x4xf32> {\n"
      "    return %arg0 : tensor<4x4xf32>\n"
      "  }\n"
      "}\n",
      "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto s = SdySharding(*m->FindFunc("main")->arg_attrs[0].Find("sdy.sharding"), *m, SdyMeshAxes(*m));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->tiles, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(s->unreduced_count, 2);
  EXPECT_EQ(s->unreduced, (std::vector<int64_t>{0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(s->replica, (std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 1}));
}

}  // namespace
}  // namespace tpumesh::hlo
