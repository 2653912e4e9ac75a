// Ops of the interpreter (hlo/interpreter.h) on small hand-written modules,
// for the semantics the exported programs do not reach: padding that holds
// a non-neutral init in reduce_window, integer division by zero and shifts
// past the width, saturating float -> int converts, scatter out of bounds.
#include <climits>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/interpreter.h"

namespace tpumesh::hlo {
namespace {

template <typename T>
Tensor Make(const std::string& type_text, const std::vector<T>& values) {
  auto m = ParseModule("func.func @main(%a: " + type_text + ") -> " + type_text + " {\n return %a : " + type_text +
                           "\n}\n",
                       "t.mlir");
  EXPECT_TRUE(m.ok());
  Tensor t = NewTensor(m->funcs[0].arg_types[0], nullptr).value();
  std::memcpy(t.data.mutable_raw(), values.data(), values.size() * sizeof(T));
  return t;
}

template <typename T>
std::vector<T> RunMain(const std::string& text, std::vector<Tensor> args) {
  auto m = ParseModule(text, "t.mlir");
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return {};
  EXPECT_TRUE(Verify(*m).ok()) << Verify(*m).message();
  DeviceSite site;
  auto r = RunFunction(*m, "main", std::move(args), site, Options{});
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return {};
  const T* p = (*r)[0].as<T>();
  return std::vector<T>(p, p + (*r)[0].num_elements());
}

TEST(HloOpsTest, ReduceWindowPaddingHoldsTheInit) {
  const std::string text = R"(
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = stablehlo.constant dense<1.0> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%x, %one) <{window_dimensions = array<i64: 3>, padding = dense<[[1, 1]]> : tensor<1x2xi64>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
)";
  // init 1, then the padded window [1, x0, x1], [x0, x1, x2], ...
  EXPECT_EQ(RunMain<float>(text, {Make<float>("tensor<4xf32>", {1, 2, 3, 4})}), (std::vector<float>{5, 7, 10, 9}));
}

TEST(HloOpsTest, IntegerEdgeCasesFollowXla) {
  const std::string text = R"(
func.func @main(%x: tensor<4xi32>) -> tensor<4xi32> {
  %z = stablehlo.constant dense<[0, 0, 40, -1]> : tensor<4xi32>
  %q = stablehlo.divide %x, %z : tensor<4xi32>
  %s = stablehlo.shift_left %x, %z : tensor<4xi32>
  %r = stablehlo.remainder %x, %z : tensor<4xi32>
  %0 = stablehlo.add %q, %s : tensor<4xi32>
  %1 = stablehlo.add %0, %r : tensor<4xi32>
  return %1 : tensor<4xi32>
}
)";
  // x / 0 = -1, x % 0 = x, x << 40 = 0, INT_MIN / -1 = INT_MIN and % -1 = 0
  const int32_t kMin = INT32_MIN;
  const auto got = RunMain<int32_t>(text, {Make<int32_t>("tensor<4xi32>", {7, -3, 5, kMin})});
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], -1 + 7 + 7);
  EXPECT_EQ(got[1], -1 + -3 + -3);
  EXPECT_EQ(got[2], 0 + 0 + 5);
  EXPECT_EQ(got[3], static_cast<int32_t>(static_cast<uint32_t>(kMin) + 0u + 0u));
}

TEST(HloOpsTest, FloatToIntConvertSaturates) {
  const std::string text = R"(
func.func @main(%x: tensor<4xf32>) -> tensor<4xi32> {
  %0 = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}
)";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(RunMain<int32_t>(text, {Make<float>("tensor<4xf32>", {1e20f, -1e20f, nan, -2.7f})}),
            (std::vector<int32_t>{INT32_MAX, INT32_MIN, 0, -2}));
}

TEST(HloOpsTest, ScatterSkipsUpdatesOutOfBounds) {
  const std::string text = R"(
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %i = stablehlo.constant dense<[[1], [7], [1]]> : tensor<3x1xi32>
  %u = stablehlo.constant dense<[10.0, 20.0, 30.0]> : tensor<3xf32>
  %0 = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4xf32>, tensor<3x1xi32>, tensor<3xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
)";
  EXPECT_EQ(RunMain<float>(text, {Make<float>("tensor<4xf32>", {1, 2, 3, 4})}), (std::vector<float>{1, 42, 3, 4}));
}

// jnp.argsort's lowering: values and an iota sorted together by a
// comparator region (stable: equal values keep their order).
TEST(HloOpsTest, SortWithAComparatorRegion) {
  const std::string text = R"(
func.func @main(%x: tensor<6xf32>) -> tensor<6xi32> {
  %i = stablehlo.iota dim = 0 : tensor<6xi32>
  %0:2 = "stablehlo.sort"(%x, %i) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %lt = stablehlo.compare  LT, %a, %b,  TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) : (tensor<6xf32>, tensor<6xi32>) -> (tensor<6xf32>, tensor<6xi32>)
  return %0#1 : tensor<6xi32>
}
)";
  EXPECT_EQ(RunMain<int32_t>(text, {Make<float>("tensor<6xf32>", {3, 1, 2, 1, -5, 3})}),
            (std::vector<int32_t>{4, 1, 3, 2, 0, 5}));
}

// chlo.top_k (jax.lax.top_k): largest first, ties by index, NaN above all.
TEST(HloOpsTest, TopKTakesTheLargestInOrder) {
  const std::string text = R"(
func.func @main(%x: tensor<6xf32>) -> tensor<3xi32> {
  %values, %indices = chlo.top_k(%x, k = 3) : tensor<6xf32> -> (tensor<3xf32>, tensor<3xi32>)
  return %indices : tensor<3xi32>
}
)";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(RunMain<int32_t>(text, {Make<float>("tensor<6xf32>", {1, 5, nan, 5, -0.0f, 0.0f})}),
            (std::vector<int32_t>{2, 1, 3}));
}

// The verifier holds every op to its operand and result counts before
// anything runs (a generic-form "stablehlo.add" with one operand crashed).
TEST(HloOpsTest, OperandCountsAreCheckedBeforeRunning) {
  for (const char* op : {R"("stablehlo.add"(%a))", R"("stablehlo.gather"(%a))", R"("stablehlo.convolution"())",
                         R"("stablehlo.all_reduce"())", R"("stablehlo.reshape"(%a, %a))"}) {
    const std::string args = std::string(op).find("()") != std::string::npos ? "()" : "(tensor<4xf32>)";
    const std::string types = std::string(op).find("%a, %a") != std::string::npos ? "(tensor<4xf32>, tensor<4xf32>)"
                                                                                      : args;
    const std::string text = "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = " + std::string(op) +
                             " : " + types + " -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n";
    auto m = ParseModule(text, "t.mlir");
    ASSERT_TRUE(m.ok()) << m.status().message();
    const Status st = Verify(*m);
    EXPECT_FALSE(st.ok()) << op;
    EXPECT_NE(st.message().find("t.mlir:2:8: "), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(" operands, has "), std::string::npos) << st.message();
  }
}

// An op's written types must be its values' types (a while declared f32
// for an f64 argument overflowed the f32 result in a fuzzed dry run).
TEST(HloOpsTest, DeclaredTypesMustBeTheValuesTypes) {
  auto m = ParseModule(
      "func.func @main(%a: tensor<4xf32>) -> tensor<4xf64> {\n  %0 = stablehlo.add %a, %a : tensor<4xf64>\n"
      "  return %0 : tensor<4xf64>\n}\n",
      "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Status st = Verify(*m);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("t.mlir:2:8: stablehlo.add: operand 0 is declared tensor<4xf64> but %a is tensor<4xf32>"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace tpumesh::hlo
