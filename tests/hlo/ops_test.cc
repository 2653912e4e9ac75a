// Ops of the interpreter (hlo/interpreter.h) on small hand-written modules,
// for the semantics the exported programs do not reach: padding that holds
// a non-neutral init in reduce_window, integer division by zero and shifts
// past the width, saturating float -> int converts, scatter out of bounds.
#include <bit>
#include <climits>
#include <complex>
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

// jax 0.4 lowers lax.tan to chlo.tan (the current jax to stablehlo.tan):
// the same values.
TEST(HloOpsTest, ChloTanIsStablehloTan) {
  const std::string text = R"(
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = chlo.tan %x : tensor<4xf32> -> tensor<4xf32>
  %1 = stablehlo.tan %x : tensor<4xf32>
  %2 = stablehlo.subtract %0, %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}
)";
  const std::vector<float> x = {0.5f, -1.25f, 3.0f, 1e-3f};
  auto m = ParseModule(text, "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(RunMain<float>(text, {Make<float>("tensor<4xf32>", x)}), (std::vector<float>(4, 0.0f)));
  EXPECT_NE(std::tan(x[0]), 0.0f);
}

// stablehlo.composite runs its decomposition: jax's portable artifacts
// carry chlo.mulhi (jax.random's Philox) so, in the pretty form, and the
// generic form says the same.
TEST(HloOpsTest, CompositeRunsItsDecomposition) {
  const std::string text = R"(
func.func @main(%x: tensor<3xui32>) -> tensor<3xui32> {
  %m = stablehlo.constant dense<3528531795> : tensor<3xui32>
  %0 = stablehlo.composite "chlo.mulhi" %x, %m {decomposition = @chlo.mulhi.impl, version = 1 : i32} : (tensor<3xui32>, tensor<3xui32>) -> tensor<3xui32>
  %1 = "stablehlo.composite"(%0, %m) <{decomposition = @chlo.mulhi.impl, name = "chlo.mulhi"}> : (tensor<3xui32>, tensor<3xui32>) -> tensor<3xui32>
  return %1 : tensor<3xui32>
}
func.func private @chlo.mulhi.impl(%arg0: tensor<3xui32>, %arg1: tensor<3xui32>) -> tensor<3xui32> {
  %c = stablehlo.constant dense<32> : tensor<3xui64>
  %0 = stablehlo.convert %arg0 : (tensor<3xui32>) -> tensor<3xui64>
  %1 = stablehlo.convert %arg1 : (tensor<3xui32>) -> tensor<3xui64>
  %2 = stablehlo.multiply %0, %1 : tensor<3xui64>
  %3 = stablehlo.shift_right_logical %2, %c : tensor<3xui64>
  %4 = stablehlo.convert %3 : (tensor<3xui64>) -> tensor<3xui32>
  return %4 : tensor<3xui32>
}
)";
  const std::vector<uint32_t> x = {0xffffffffu, 12345u, 0x80000001u};
  std::vector<uint32_t> want;
  for (uint32_t v : x) {
    const uint64_t m = 3528531795u;
    const uint64_t hi = (static_cast<uint64_t>(v) * m) >> 32;
    want.push_back(static_cast<uint32_t>((hi * m) >> 32));
  }
  EXPECT_EQ(RunMain<uint32_t>(text, {Make<uint32_t>("tensor<3xui32>", x)}), want);
  // Without its decomposition it is one line, not a crash.
  auto m = ParseModule("func.func @main(%x: tensor<ui32>) -> tensor<ui32> {\n"
                       "  %0 = stablehlo.composite \"chlo.mulhi\" %x, %x {version = 1 : i32} : (tensor<ui32>, tensor<ui32>) -> tensor<ui32>\n"
                       "  return %0 : tensor<ui32>\n}\n",
                       "t.mlir");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(std::string(m.status().message()).find("without decomposition"), std::string::npos) << m.status().message();
}

// rng_bit_generator's bits and state are XLA:CPU's (jax's CPU backend,
// measured: lax.rng_bit_generator(np.array([1, 2, 3, 4], np.uint32), shape)
// under jax 0.10.2; u64 with jax_enable_x64), DEFAULT being its Philox.
TEST(HloOpsTest, RngBitGeneratorIsXlaCpusPhilox) {
  auto run = [](const std::string& bits_type, const std::string& algorithm, uint64_t s0, uint64_t s1) {
    const std::string text = "func.func @main(%s: tensor<2xui64>) -> (tensor<2xui64>, " + bits_type +
                             ") {\n  %state, %bits = stablehlo.rng_bit_generator %s, algorithm = " + algorithm +
                             " : (tensor<2xui64>) -> (tensor<2xui64>, " + bits_type + ")\n  return %state, %bits : "
                             "tensor<2xui64>, " + bits_type + "\n}\n";
    auto m = ParseModule(text, "t.mlir");
    EXPECT_TRUE(m.ok()) << m.status().message();
    EXPECT_TRUE(Verify(*m).ok());
    DeviceSite site;
    auto r = RunFunction(*m, "main", {Make<uint64_t>("tensor<2xui64>", {s0, s1})}, site, Options{});
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : std::vector<Tensor>{};
  };
  auto values = [](const Tensor& t, auto zero) {
    using T = decltype(zero);
    return std::vector<T>(t.as<T>(), t.as<T>() + t.num_elements());
  };
  const uint64_t s0 = 0x0000000200000001u, s1 = 0x0000000400000003u;  // u32 [1, 2, 3, 4]
  auto u32 = run("tensor<5xui32>", "DEFAULT", s0, s1);
  ASSERT_EQ(u32.size(), 2u);
  EXPECT_EQ(values(u32[1], uint32_t{}),
            (std::vector<uint32_t>{0x1e8fe864, 0x4d5e0bd7, 0x4b87c9be, 0x2d689201, 0x5273487b}));
  EXPECT_EQ(values(u32[0], uint64_t{}), (std::vector<uint64_t>{s0, s1 + 2}));  // two blocks of 4 words
  auto u64 = run("tensor<3xui64>", "PHILOX", s0, s1);
  ASSERT_EQ(u64.size(), 2u);
  EXPECT_EQ(values(u64[1], uint64_t{}),
            (std::vector<uint64_t>{0x4d5e0bd71e8fe864u, 0x2d6892014b87c9beu, 0x61c056965273487bu}));
  auto u16 = run("tensor<2x2xui16>", "DEFAULT", s0, s1);
  ASSERT_EQ(u16.size(), 2u);
  EXPECT_EQ(values(u16[1], uint16_t{}), (std::vector<uint16_t>{0xe864, 0x0bd7, 0xc9be, 0x9201}));
  EXPECT_EQ(values(u16[0], uint64_t{}), (std::vector<uint64_t>{s0, s1 + 1}));
  // The counter's low half wraps into its high half (here the key's word).
  auto wrap = run("tensor<6xui32>", "DEFAULT", 0xfffffffeffffffffu, 0xfffffffffffffffdu);
  ASSERT_EQ(wrap.size(), 2u);
  EXPECT_EQ(values(wrap[1], uint32_t{}),
            (std::vector<uint32_t>{0x234c23ee, 0x978faca3, 0x480dad5a, 0xe9e2f857, 0xa6e2b479, 0xfb042cf4}));
  EXPECT_EQ(values(wrap[0], uint64_t{}), (std::vector<uint64_t>{0xfffffffeffffffffu, 0xffffffffffffffffu}));
}

// A complex dot_general (jnp.dot of complex arrays, jnp.vander's powers):
// the complex products summed, with a batch and a transposed operand.
TEST(HloOpsTest, ComplexDotGeneral) {
  const std::string text = R"(
func.func @main(%a: tensor<2x2x3xcomplex<f32>>) -> tensor<2x2x2xcomplex<f32>> {
  %0 = stablehlo.dot_general %a, %a, batching_dims = [0] x [0], contracting_dims = [2] x [2] : (tensor<2x2x3xcomplex<f32>>, tensor<2x2x3xcomplex<f32>>) -> tensor<2x2x2xcomplex<f32>>
  return %0 : tensor<2x2x2xcomplex<f32>>
}
)";
  std::vector<float> a(24);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.5f;
  const auto got = RunMain<std::complex<float>>(text, {Make<float>("tensor<2x2x3xcomplex<f32>>", a)});
  ASSERT_EQ(got.size(), 8u);
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        double re = 0, im = 0;
        for (int k = 0; k < 3; ++k) {
          const float* x = &a[static_cast<size_t>(((b * 2 + i) * 3 + k) * 2)];
          const float* y = &a[static_cast<size_t>(((b * 2 + j) * 3 + k) * 2)];
          re += x[0] * y[0] - x[1] * y[1];
          im += x[0] * y[1] + x[1] * y[0];
        }
        const size_t at = static_cast<size_t>((b * 2 + i) * 2 + j);
        EXPECT_FLOAT_EQ(got[at].real(), static_cast<float>(re));
        EXPECT_FLOAT_EQ(got[at].imag(), static_cast<float>(im));
      }
}

// An integer convolution (lax.conv_general_dilated of int32): exact sums,
// the values jax's CPU backend gives (measured, jax 0.10.2), with the
// output features stored first (a layout other than the loops').
TEST(HloOpsTest, IntegerConvolution) {
  const std::string text = R"(
func.func @main(%x: tensor<1x4x4x2xi32>, %w: tensor<3x3x2x2xi32>) -> tensor<2x1x2x2xi32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[f, b, 0, 1], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x4x2xi32>, tensor<3x3x2x2xi32>) -> tensor<2x1x2x2xi32>
  return %0 : tensor<2x1x2x2xi32>
}
)";
  std::vector<int32_t> x(32), w(36);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = i - 9;
  for (int i = 0; i < 36; ++i) w[static_cast<size_t>(i)] = i % 7 - 3;
  auto m = ParseModule(text, "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE(Verify(*m).ok()) << Verify(*m).message();
  DeviceSite site;
  auto r = RunFunction(*m, "main", {Make<int32_t>("tensor<1x4x4x2xi32>", x), Make<int32_t>("tensor<3x3x2x2xi32>", w)},
                       site, Options{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const int32_t* y = (*r)[0].as<int32_t>();
  // NHWC [46, 10, 46, 4, 46, -14, 46, -20] with the features first
  EXPECT_EQ(std::vector<int32_t>(y, y + 8), (std::vector<int32_t>{46, 46, 46, 46, 10, 4, -14, -20}));
  // preferred_element_type f32: the same sums as floats
  std::string to_f32 = text;
  for (size_t at; (at = to_f32.find("tensor<2x1x2x2xi32>")) != std::string::npos;)
    to_f32.replace(at, 19, "tensor<2x1x2x2xf32>");
  auto mf = ParseModule(to_f32, "t.mlir");
  ASSERT_TRUE(mf.ok()) << mf.status().message();
  auto rf = RunFunction(*mf, "main", {Make<int32_t>("tensor<1x4x4x2xi32>", x), Make<int32_t>("tensor<3x3x2x2xi32>", w)},
                        site, Options{});
  ASSERT_TRUE(rf.ok()) << rf.status().message();
  const float* yf = (*rf)[0].as<float>();
  EXPECT_EQ(std::vector<float>(yf, yf + 8), (std::vector<float>{46, 46, 46, 46, 10, 4, -14, -20}));
}

// jaxlib 0.4 writes chlo ops VHLO lacks as custom calls @mhlo.<op>: read
// back as the chlo op (lax.erf, lax.top_k), the same values.
TEST(HloOpsTest, MhloCustomCallsAreTheirChloOps) {
  const std::string text = R"(
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<2xf32>, tensor<2xi32>) {
  %0 = stablehlo.custom_call @mhlo.erf(%x) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = chlo.erf %x : tensor<4xf32> -> tensor<4xf32>
  %2 = stablehlo.subtract %0, %1 : tensor<4xf32>
  %3:2 = stablehlo.custom_call @mhlo.topk(%x) {mhlo.attributes = {k = 2 : i64, largest = true}, mhlo.version = 1 : i64} : (tensor<4xf32>) -> (tensor<2xf32>, tensor<2xi32>)
  return %2, %3#0, %3#1 : tensor<4xf32>, tensor<2xf32>, tensor<2xi32>
}
)";
  auto m = ParseModule(text, "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE(Verify(*m).ok()) << Verify(*m).message();
  DeviceSite site;
  auto r = RunFunction(*m, "main", {Make<float>("tensor<4xf32>", {3, 1, 2, 5})}, site, Options{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(std::vector<float>((*r)[0].as<float>(), (*r)[0].as<float>() + 4), std::vector<float>(4, 0.0f));
  EXPECT_EQ(std::vector<float>((*r)[1].as<float>(), (*r)[1].as<float>() + 2), (std::vector<float>{5, 3}));
  EXPECT_EQ(std::vector<int32_t>((*r)[2].as<int32_t>(), (*r)[2].as<int32_t>() + 2), (std::vector<int32_t>{3, 0}));
  // The smallest k is not chlo.top_k: left a custom call, refused.
  auto smallest = ParseModule(
      "func.func @main(%x: tensor<4xf32>) -> tensor<2xf32> {\n"
      "  %0:2 = stablehlo.custom_call @mhlo.topk(%x) {mhlo.attributes = {k = 2 : i64, largest = false}} : "
      "(tensor<4xf32>) -> (tensor<2xf32>, tensor<2xi32>)\n  return %0#0 : tensor<2xf32>\n}\n",
      "t.mlir");
  ASSERT_TRUE(smallest.ok()) << smallest.status().message();
  EXPECT_FALSE(Verify(*smallest).ok());
}

// stablehlo.broadcast (jax 0.4's eager pmap): its sizes prepended.
TEST(HloOpsTest, BroadcastPrependsItsSizes) {
  const std::string text = R"(
func.func @main(%x: tensor<2xi32>) -> tensor<3x2xi32> {
  %0 = stablehlo.broadcast %x, sizes = [3] : (tensor<2xi32>) -> tensor<3x2xi32>
  return %0 : tensor<3x2xi32>
}
)";
  EXPECT_EQ(RunMain<int32_t>(text, {Make<int32_t>("tensor<2xi32>", {7, -1})}),
            (std::vector<int32_t>{7, -1, 7, -1, 7, -1}));
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

// Regions name values of the function around them: jax's programs reach
// the plugin with constants hoisted to the function's top, so jnp.sort's
// comparator and a reduce's body use them from there.
TEST(HloOpsTest, RegionsUseValuesFromOutside) {
  const std::string text = R"(
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %two = stablehlo.constant dense<2.000000e+00> : tensor<f32>
  %0 = "stablehlo.sort"(%x) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.compare EQ, %a, %zero, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %2 = stablehlo.select %1, %zero, %a : tensor<i1>, tensor<f32>
    %3 = stablehlo.compare LT, %2, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %3 : tensor<i1>
  }) : (tensor<4xf32>) -> tensor<4xf32>
  %s = stablehlo.reduce(%0 init: %zero) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
   reducer(%p: tensor<f32>, %q: tensor<f32>) {
    %m = stablehlo.multiply %q, %two : tensor<f32>
    %t = stablehlo.add %p, %m : tensor<f32>
    stablehlo.return %t : tensor<f32>
  }
  %b = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %r = stablehlo.add %0, %b : tensor<4xf32>
  return %r : tensor<4xf32>
}
)";
  // sorted [-1, 0, 2, 3], sum of twice each 8
  EXPECT_EQ(RunMain<float>(text, {Make<float>("tensor<4xf32>", {3, -1, 2, 0})}), (std::vector<float>{7, 8, 10, 11}));
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

// The StableHLO spec's scatter examples (update_window_dims, inserted and
// batching dims, scatter_dims_to_operand_dims out of order, a window out of
// bounds skipped), then the two forms JAX writes for slices: x.at[1:3, 2:4]
// .add(u) with a 1-D index vector and no scatter dims (index_vector_dim 0,
// which StableHLO does not print), and rows by an implicit trailing index
// vector (index_vector_dim == the indices' rank).
std::string Scatter(const std::string& x_type, const std::string& indices, const std::string& updates,
                    const std::string& dims) {
  return "func.func @main(%x: " + x_type + ") -> " + x_type + " {\n  %i = stablehlo.constant " + indices +
         "\n  %u = stablehlo.constant " + updates +
         "\n  %0 = \"stablehlo.scatter\"(%x, %i, %u) <{indices_are_sorted = false, scatter_dimension_numbers = "
         "#stablehlo.scatter<" + dims + ">, unique_indices = false}> ({\n"
         "  ^bb0(%a: tensor<i64>, %b: tensor<i64>):\n"
         "    %s = stablehlo.add %a, %b : tensor<i64>\n"
         "    stablehlo.return %s : tensor<i64>\n"
         "  }) : (" + x_type + ", " + indices.substr(indices.rfind(": ") + 2) + ", " +
         updates.substr(updates.rfind(": ") + 2) + ") -> " + x_type + "\n  return %0 : " + x_type + "\n}\n";
}

std::vector<int64_t> Iota(int64_t from, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = from + i;
  return v;
}

TEST(HloOpsTest, ScatterFollowsTheSpec) {
  EXPECT_EQ(RunMain<int64_t>(Scatter("tensor<3x4x2xi64>",
                                     "dense<[[[0, 2], [1, 0], [2, 1]], [[0, 1], [1, 0], [0, 9]]]> : tensor<2x3x2xi64>",
                                     "dense<1> : tensor<2x3x2x2xi64>",
                                     "update_window_dims = [2, 3], inserted_window_dims = [0], "
                                     "scatter_dims_to_operand_dims = [1, 0], index_vector_dim = 2"),
                             {Make<int64_t>("tensor<3x4x2xi64>", Iota(1, 24))}),
            (std::vector<int64_t>{1, 2, 5, 6, 7, 8, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 21, 22, 23,
                                  24}));
  EXPECT_EQ(RunMain<int64_t>(Scatter("tensor<2x3x4x2xi64>",
                                     "dense<[[[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]], [[[0, 0], [2, 1], "
                                     "[2, 2]], [[1, 2], [0, 1], [1, 0]]]]> : tensor<2x2x3x2xi64>",
                                     "dense<1> : tensor<2x2x3x2x2xi64>",
                                     "update_window_dims = [3, 4], inserted_window_dims = [1], input_batching_dims = "
                                     "[0], scatter_indices_batching_dims = [1], scatter_dims_to_operand_dims = [2, 1], "
                                     "index_vector_dim = 3"),
                             {Make<int64_t>("tensor<2x3x4x2xi64>", Iota(1, 48))}),
            (std::vector<int64_t>{3,  4,  6,  7,  6,  7,  7,  8,  9,  10, 11, 12, 15, 16, 17, 18,
                                  17, 18, 19, 20, 22, 23, 24, 25, 25, 26, 28, 29, 30, 31, 31, 32,
                                  35, 36, 38, 39, 38, 39, 39, 40, 41, 42, 44, 45, 46, 47, 47, 48}));
  // x.at[1:3, 2:4].add(u): index_vector_dim 0, not printed.
  EXPECT_EQ(RunMain<int64_t>(Scatter("tensor<3x4xi64>", "dense<[1, 2]> : tensor<2xi64>",
                                     "dense<[[10, 20], [30, 40]]> : tensor<2x2xi64>",
                                     "update_window_dims = [0, 1], scatter_dims_to_operand_dims = [0, 1]"),
                             {Make<int64_t>("tensor<3x4xi64>", Iota(0, 12))}),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 16, 27, 8, 9, 40, 51}));
  // x.at[[0, 2]].add(u): an implicit trailing index vector.
  EXPECT_EQ(RunMain<int64_t>(Scatter("tensor<3x2xi64>", "dense<[0, 2]> : tensor<2xi64>",
                                     "dense<[[10, 20], [30, 40]]> : tensor<2x2xi64>",
                                     "update_window_dims = [1], inserted_window_dims = [0], "
                                     "scatter_dims_to_operand_dims = [0], index_vector_dim = 1"),
                             {Make<int64_t>("tensor<3x2xi64>", Iota(0, 6))}),
            (std::vector<int64_t>{10, 21, 2, 3, 34, 45}));
}

// x[2] as jnp writes it: a 1-D index vector with index_vector_dim 0 (not
// printed), the start clamped into the operand.
TEST(HloOpsTest, GatherOfOneIndexVector) {
  const std::string text = R"(
func.func @main(%x: tensor<4xi32>) -> tensor<2xi32> {
  %i = stablehlo.constant dense<2> : tensor<1xi32>
  %j = stablehlo.constant dense<7> : tensor<1xi32>
  %0 = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0]>, indices_are_sorted = true, slice_sizes = array<i64: 1>}> : (tensor<4xi32>, tensor<1xi32>) -> tensor<i32>
  %1 = "stablehlo.gather"(%x, %j) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0]>, indices_are_sorted = true, slice_sizes = array<i64: 1>}> : (tensor<4xi32>, tensor<1xi32>) -> tensor<i32>
  %a = stablehlo.reshape %0 : (tensor<i32>) -> tensor<1xi32>
  %b = stablehlo.reshape %1 : (tensor<i32>) -> tensor<1xi32>
  %2 = stablehlo.concatenate %a, %b, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  return %2 : tensor<2xi32>
}
)";
  EXPECT_EQ(RunMain<int32_t>(text, {Make<int32_t>("tensor<4xi32>", {10, 11, 12, 13})}), (std::vector<int32_t>{12, 13}));
}

// batch_group_count 2 (a depthwise conv's kernel gradient): images [0, 2)
// make output features [0, 2), images [2, 4) features [2, 4); against the
// direct loop.
TEST(HloOpsTest, ConvolutionWithBatchGroups) {
  const std::string text = R"(
func.func @main(%x: tensor<4x3x2xf32>, %k: tensor<2x2x4xf32>) -> tensor<2x2x4xf32> {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1], pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [1]} {batch_group_count = 2 : i64, feature_group_count = 1 : i64} : (tensor<4x3x2xf32>, tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  return %0 : tensor<2x2x4xf32>
}
)";
  std::vector<float> x(24), k(16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3;
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(i % 5) * 0.5f - 1;
  std::vector<float> want(16, 0);
  for (int n = 0; n < 2; ++n)
    for (int w = 0; w < 2; ++w)
      for (int o = 0; o < 4; ++o) {
        const int image = (o / 2) * 2 + n;
        float s = 0;
        for (int t = 0; t < 2; ++t)
          for (int i = 0; i < 2; ++i)
            s += x[static_cast<size_t>((image * 3 + w + t) * 2 + i)] * k[static_cast<size_t>((t * 2 + i) * 4 + o)];
        want[static_cast<size_t>((n * 2 + w) * 4 + o)] = s;
      }
  EXPECT_EQ(RunMain<float>(text, {Make<float>("tensor<4x3x2xf32>", x), Make<float>("tensor<2x2x4xf32>", k)}), want);
}

// reduce_precision in the pretty form JAX prints, as XLA computes it: the
// mantissa rounded to nearest even, overflow to inf, what falls below the
// format's normals to a signed zero, NaN kept bit for bit.
TEST(HloOpsTest, ReducePrecisionFollowsXla) {
  const std::string text = R"(
func.func @main(%x: tensor<9xf32>) -> tensor<9xf32> {
  %0 = stablehlo.reduce_precision %x, format = e5m10 : tensor<9xf32>
  return %0 : tensor<9xf32>
}
)";
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::bit_cast<float>(0x7fc00123u);
  const std::vector<float> in = {1 + 0x1p-11f,      1 + 3 * 0x1p-11f, 65519.0f, 65520.0f, -1e6f,
                                 -0x1p-15f,         0x1p-14f,         nan,      0x1.ffep-15f};
  const std::vector<float> want = {1.0f, 1 + 0x1p-9f, 65504.0f, inf, -inf, -0.0f, 0x1p-14f, nan, 0x1p-14f};
  const auto got = RunMain<float>(text, {Make<float>("tensor<9xf32>", in)});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << i << ": " << in[i];
}

// The same on f64 and on f16's own bits (an f16 subnormal rounds as its
// bits do): the values XLA:CPU gives (jax 0.10.2's CPU backend, measured).
TEST(HloOpsTest, ReducePrecisionOnF64AndF16) {
  const std::string f64 = R"(
func.func @main(%x: tensor<8xf64>) -> tensor<8xf64> {
  %0 = stablehlo.reduce_precision %x, format = e5m10 : tensor<8xf64>
  return %0 : tensor<8xf64>
}
)";
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> in = {1 + 0x1p-11, 1 + 3 * 0x1p-11, 65519.0, 65520.0, -1e6, -0x1p-15, 1 + 0x1p-30, 1e300};
  const std::vector<double> want = {1.0, 1 + 0x1p-9, 65504.0, inf, -inf, -0.0, 1.0, inf};
  const auto got = RunMain<double>(f64, {Make<double>("tensor<8xf64>", in)});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint64_t>(got[i]), std::bit_cast<uint64_t>(want[i])) << i << ": " << in[i];
  const std::string f16 = R"(
func.func @main(%x: tensor<5xf16>) -> tensor<5xf16> {
  %0 = stablehlo.reduce_precision %x, format = e5m8 : tensor<5xf16>
  return %0 : tensor<5xf16>
}
)";
  EXPECT_EQ(RunMain<uint16_t>(f16, {Make<uint16_t>("tensor<5xf16>", {0x3c02, 0x3c06, 0x0010, 0x0003, 0x7bff})}),
            (std::vector<uint16_t>{0x3c00, 0x3c08, 0x0010, 0x0004, 0x7c00}));
}

}  // namespace
}  // namespace tpumesh::hlo
