// Typed attributes (hlo/attrs.h): resolved when the module is read, and an
// op whose attributes do not fit refused by Verify, before anything runs.
#include <string>
#include <variant>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/attrs.h"
#include "hlo/interpreter.h"

namespace tpumesh::hlo {
namespace {

using ::testing::HasSubstr;

const Op& FirstOp(const Module& m) { return m.funcs[0].body.blocks[0].ops[0]; }

// lax.dot(..., precision=DotAlgorithmPreset...): the algorithm's operand
// type and passes are the dot's precision (BF16_BF16_F32 one pass, _X3
// three, F32_F32_F32 exact).
TEST(AttrsTest, DotAlgorithmIsThePrecision) {
  auto dot = [](const std::string& type, int passes) {
    auto m = ParseModule("func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {\n"
                         "  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], algorithm = "
                         "<lhs_precision_type = " + type + ", rhs_precision_type = " + type +
                             ", accumulation_type = f32, lhs_component_count = 1, rhs_component_count = 1, "
                             "num_primitive_operations = " + std::to_string(passes) +
                             ", allow_imprecise_accumulation = false> : (tensor<2x3xf32>, tensor<3x4xf32>) -> "
                             "tensor<2x4xf32>\n  return %0 : tensor<2x4xf32>\n}\n",
                         "t.mlir");
    EXPECT_TRUE(m.ok()) << m.status().message();
    if (!m.ok()) return kernels::Precision::kDefault;
    EXPECT_TRUE(Verify(*m).ok());
    return FirstOp(*m).typed->precision;
  };
  EXPECT_EQ(dot("bf16", 1), kernels::Precision::kDefault);
  EXPECT_EQ(dot("bf16", 3), kernels::Precision::kHigh);
  EXPECT_EQ(dot("bf16", 6), kernels::Precision::kHighest);
  EXPECT_EQ(dot("f32", 1), kernels::Precision::kHighest);
}

TEST(AttrsTest, ResolvedWhenRead) {
  auto m = ParseModule(R"(func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], precision = [HIGH, HIGHEST] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
})",
                       "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Op& dot = FirstOp(*m);
  ASSERT_NE(dot.typed, nullptr);
  EXPECT_TRUE(dot.typed->status.ok());
  const auto* d = std::get_if<DotAttrs>(&dot.typed->value);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->dims.lc, Dims{1});
  EXPECT_EQ(d->dims.rc, Dims{0});
  EXPECT_EQ(dot.typed->precision, kernels::Precision::kHighest);

  auto c = ParseModule(R"(func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xi1> {
  %0 = stablehlo.compare GE, %a, %b, TOTALORDER : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
})",
                       "t.mlir");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const auto* cmp = std::get_if<CompareAttrs>(&FirstOp(*c).typed->value);
  ASSERT_NE(cmp, nullptr);
  EXPECT_EQ(cmp->direction, CompareDirection::kGe);
  EXPECT_TRUE(cmp->total_order);
}

TEST(AttrsTest, ReplicaGroupsResolvedWhenRead) {
  auto m = ParseModule(R"(func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.all_reduce"(%a) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1], [2, -1]]> : tensor<2x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
})",
                       "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  const auto* c = std::get_if<CollectiveAttrs>(&FirstOp(*m).typed->value);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->dense_groups);
  ASSERT_EQ(c->groups.size(), 2u);
  EXPECT_EQ(c->groups[0], (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(c->groups[1], (std::vector<int64_t>{2}));  // -1 pads a ragged group
}

TEST(AttrsTest, AttributesThatDoNotFitAreRefusedByVerify) {
  auto m = ParseModule(R"(func.func @main(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
})",
                       "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Status s = Verify(*m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("t.mlir:2:"));
  EXPECT_THAT(s.message(), HasSubstr("stablehlo.dot_general"));

  auto c = ParseModule(R"(func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xi1> {
  %0 = "stablehlo.compare"(%a, %b) {comparison_direction = #stablehlo<comparison_direction XX>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
})",
                       "t.mlir");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_THAT(Verify(*c).message(), HasSubstr("stablehlo.compare: bad comparison_direction"));

  auto sl = ParseModule(R"(func.func @main(%a: tensor<4xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.slice"(%a) {start_indices = array<i64: 0>} : (tensor<4xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
})",
                       "t.mlir");
  ASSERT_TRUE(sl.ok()) << sl.status().message();
  EXPECT_THAT(Verify(*sl).message(), HasSubstr("t.mlir:2:"));
  EXPECT_THAT(Verify(*sl).message(), HasSubstr("limit_indices"));
}

}  // namespace
}  // namespace tpumesh::hlo
