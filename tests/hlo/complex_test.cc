// complex<f32> and complex<f64> through hlo/: read from MLIR (types and
// (re, im) constants), verified, and computed as XLA does
// (hlo/elementwise_complex.h): division by zero and by infinity, abs without
// overflow or underflow, the parts, compare, convert. The expected values
// are worked by hand from the definitions.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/interpreter.h"
#include "tests/testing/hlo_run.h"

namespace tpumesh::hlo {
namespace {

using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();

using ::tpumesh::testing::RunMain;

std::string Binary(const std::string& op, const std::string& type) {
  return "func.func @main(%a: " + type + ", %b: " + type + ") -> " + type + " {\n  %0 = stablehlo." + op +
         " %a, %b : " + type + "\n  return %0 : " + type + "\n}\n";
}

void ExpectSame(float got, float want, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": " << got;
  } else if (std::isinf(want) || want == 0) {
    EXPECT_EQ(got, want) << what;
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << what;
  } else {
    EXPECT_NEAR(got, want, 2e-7 * std::fabs(want)) << what;
  }
}

TEST(ComplexTest, DivideFollowsXlaAtZeroAndInfinity) {
  // (dividend re, im, divisor re, im) -> quotient (re, im)
  struct Case {
    float a_re, a_im, b_re, b_im, q_re, q_im;
  };
  const Case cases[] = {
      {1, 2, 3, 4, 11.0f / 25, 2.0f / 25},       // (1+2i)(3-4i) / 25
      {4, -2, 0, 2, -1, -2},                     // the |b_r| < |b_i| branch
      {1, 2, 0, 0, kInf, kInf},                  // zero divisor: inf with b_r's sign times a
      {-1, 2, -0.0f, 0, kInf, -kInf},            // ... b_r = -0
      {kInf, kInf, 1, 0, kInf, kInf},            // infinite dividend, finite divisor
      {1, 1, kInf, kInf, 0, 0},                  // finite dividend, infinite divisor
      {1, 1, kInf, 0, 0, 0},                     // Smith's quotient is not NaN here: kept
  };
  std::vector<float> a, b;
  for (const Case& c : cases) {
    a.insert(a.end(), {c.a_re, c.a_im});
    b.insert(b.end(), {c.b_re, c.b_im});
  }
  const std::string type = "tensor<" + std::to_string(std::size(cases)) + "xcomplex<f32>>";
  const auto got = RunMain<float>(Binary("divide", type), {a, b});
  ASSERT_EQ(got.size(), 2 * std::size(cases));
  for (size_t i = 0; i < std::size(cases); ++i) {
    ExpectSame(got[2 * i], cases[i].q_re, "case " + std::to_string(i) + " re");
    ExpectSame(got[2 * i + 1], cases[i].q_im, "case " + std::to_string(i) + " im");
  }
}

TEST(ComplexTest, AbsNeitherOverflowsNorUnderflows) {
  const std::string text = R"(
func.func @main(%z: tensor<6xcomplex<f32>>) -> tensor<6xf32> {
  %0 = stablehlo.abs %z : (tensor<6xcomplex<f32>>) -> tensor<6xf32>
  return %0 : tensor<6xf32>
}
)";
  // 3-4-5 triangles whose squares overflow (1e76) or underflow (1e-60) f32.
  const std::vector<float> z = {3e37f, 4e37f, -3e-30f, 4e-30f, 0, -0.0f, kInf, 1, kInf, -kInf, 0, -2};
  const auto got = RunMain<float>(text, {z});
  const float want[] = {5e37f, 5e-30f, 0, kInf, kInf, 2};
  ASSERT_EQ(got.size(), std::size(want));
  for (size_t i = 0; i < std::size(want); ++i) ExpectSame(got[i], want[i], "abs " + std::to_string(i));
}

TEST(ComplexTest, SqrtLogAndSign) {
  const std::string text = R"(
func.func @main(%z: tensor<3xcomplex<f64>>) -> tensor<9xcomplex<f64>> {
  %0 = stablehlo.sqrt %z : tensor<3xcomplex<f64>>
  %1 = stablehlo.log %z : tensor<3xcomplex<f64>>
  %2 = stablehlo.sign %z : tensor<3xcomplex<f64>>
  %3 = stablehlo.concatenate %0, %1, %2, dim = 0 : (tensor<3xcomplex<f64>>, tensor<3xcomplex<f64>>, tensor<3xcomplex<f64>>) -> tensor<9xcomplex<f64>>
  return %3 : tensor<9xcomplex<f64>>
}
)";
  // z = -4, 3 + 4i, 0: sqrt 2i, 2 + i, 0; log (log 4, pi), (log 5, atan2(4, 3)),
  // (-inf, 0); sign -1, (0.6, 0.8), 0.
  const auto got = RunMain<double>(text, {{-4, 0, 3, 4, 0, 0}});
  const double want[18] = {0, 2, 2, 1, 0, 0, std::log(4.0), M_PI, std::log(5.0), std::atan2(4.0, 3.0),
                           -std::numeric_limits<double>::infinity(), 0, -1, 0, 0.6, 0.8, 0, 0};
  ASSERT_EQ(got.size(), 18u);
  for (size_t i = 0; i < 18; ++i) {
    if (std::isinf(want[i])) EXPECT_EQ(got[i], want[i]) << i;
    else EXPECT_NEAR(got[i], want[i], 1e-15 * std::max(1.0, std::fabs(want[i]))) << i;
  }
}

// rsqrt, expm1, tan, tanh and power on complex values (jnp.vander's
// powers, lax.rsqrt and the complex-plane accuracy tests of jax's suite).
TEST(ComplexTest, RsqrtExpm1TanTanhAndPower) {
  const std::string text = R"(
func.func @main(%z: tensor<3xcomplex<f64>>, %w: tensor<3xcomplex<f64>>) -> tensor<15xcomplex<f64>> {
  %0 = stablehlo.rsqrt %z : tensor<3xcomplex<f64>>
  %1 = stablehlo.exponential_minus_one %z : tensor<3xcomplex<f64>>
  %2 = stablehlo.tan %z : tensor<3xcomplex<f64>>
  %3 = stablehlo.tanh %z : tensor<3xcomplex<f64>>
  %4 = stablehlo.power %z, %w : tensor<3xcomplex<f64>>
  %5 = stablehlo.concatenate %0, %1, %2, %3, %4, dim = 0 : (tensor<3xcomplex<f64>>, tensor<3xcomplex<f64>>, tensor<3xcomplex<f64>>, tensor<3xcomplex<f64>>, tensor<3xcomplex<f64>>) -> tensor<15xcomplex<f64>>
  return %5 : tensor<15xcomplex<f64>>
}
)";
  const std::vector<std::complex<double>> z = {{3, 4}, {1e-9, 2e-9}, {-0.5, 1.25}};
  const std::vector<std::complex<double>> w = {{2, 0}, {0, 0}, {0.5, -1}};
  std::vector<double> zs, ws;
  for (size_t i = 0; i < 3; ++i) {
    zs.insert(zs.end(), {z[i].real(), z[i].imag()});
    ws.insert(ws.end(), {w[i].real(), w[i].imag()});
  }
  const auto got = RunMain<double>(text, {zs, ws});
  ASSERT_EQ(got.size(), 30u);
  std::vector<std::complex<double>> want;
  for (auto v : z) want.push_back(1.0 / std::sqrt(v));
  // expm1 near 0 keeps its digits: z itself plus z^2 / 2
  for (auto v : z) want.push_back(std::abs(v) < 1e-6 ? v + v * v / 2.0 : std::exp(v) - 1.0);
  for (auto v : z) want.push_back(std::tan(v));
  for (auto v : z) want.push_back(std::tanh(v));
  want.push_back({-7, 24});  // (3 + 4i)^2
  want.push_back({1, 0});    // 0^0 is 1 and so is anything^0
  want.push_back(std::exp(w[2] * std::log(z[2])));
  for (size_t i = 0; i < 15; ++i) {
    EXPECT_NEAR(got[2 * i], want[i].real(), 1e-14 * std::max(1e-9, std::abs(want[i]))) << i;
    EXPECT_NEAR(got[2 * i + 1], want[i].imag(), 1e-14 * std::max(1e-9, std::abs(want[i]))) << i;
  }
}

// jnp.vdot's program: a complex -> complex convert of one type written over
// its dying operand (in place) kept the value (it was zeroed before it was
// read), so the dot of conj(a) and b is not 0.
TEST(ComplexTest, ConvertInPlaceKeepsTheValue) {
  const std::string text = R"(
func.func @main(%a: tensor<2xcomplex<f32>>, %b: tensor<2xi16>) -> tensor<complex<f32>> {
  %0 = stablehlo.real %a : (tensor<2xcomplex<f32>>) -> tensor<2xf32>
  %1 = stablehlo.imag %a : (tensor<2xcomplex<f32>>) -> tensor<2xf32>
  %2 = stablehlo.negate %1 : tensor<2xf32>
  %3 = stablehlo.complex %0, %2 : tensor<2xcomplex<f32>>
  %4 = stablehlo.convert %3 : tensor<2xcomplex<f32>>
  %5 = stablehlo.convert %b : (tensor<2xi16>) -> tensor<2xcomplex<f32>>
  %6 = stablehlo.dot_general %4, %5, contracting_dims = [0] x [0] : (tensor<2xcomplex<f32>>, tensor<2xcomplex<f32>>) -> tensor<complex<f32>>
  return %6 : tensor<complex<f32>>
}
)";
  auto m = ParseModule(text, "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  Tensor a = NewTensor(m->funcs[0].arg_types[0], nullptr).value();
  Tensor b = NewTensor(m->funcs[0].arg_types[1], nullptr).value();
  const float av[4] = {1, 2, 3, -1};
  const int16_t bv[2] = {2, 5};
  std::memcpy(a.data.mutable_raw(), av, sizeof av);
  std::memcpy(b.data.mutable_raw(), bv, sizeof bv);
  DeviceSite site;
  auto r = RunFunction(*m, "main", {a, b}, site, Options{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const float* got = (*r)[0].as<float>();
  // conj(1 + 2i) 2 + conj(3 - i) 5 = (2 - 4i) + (15 + 5i)
  EXPECT_EQ(got[0], 17.0f);
  EXPECT_EQ(got[1], 1.0f);
}

// The edges jax's complex-plane accuracy test checks: expm1 of a huge real
// value is (inf, 0), not (inf, NaN); tan of an infinite real part is NaN
// in both parts.
TEST(ComplexTest, Expm1AndTanAtInfinity) {
  const std::string text = R"(
func.func @main(%z: tensor<2xcomplex<f32>>) -> tensor<4xcomplex<f32>> {
  %0 = stablehlo.exponential_minus_one %z : tensor<2xcomplex<f32>>
  %1 = stablehlo.tan %z : tensor<2xcomplex<f32>>
  %2 = stablehlo.concatenate %0, %1, dim = 0 : (tensor<2xcomplex<f32>>, tensor<2xcomplex<f32>>) -> tensor<4xcomplex<f32>>
  return %2 : tensor<4xcomplex<f32>>
}
)";
  const auto got = RunMain<float>(text, {{3.4e38f, 0, -kInf, 0}});
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got[0], kInf);
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_EQ(got[2], -1.0f);
  EXPECT_EQ(got[3], 0.0f);
  EXPECT_TRUE(std::isnan(got[6]) && std::isnan(got[7])) << got[6] << " " << got[7];
}

// log1p keeps its digits near 0 (jnp.log1p of complex arrays).
TEST(ComplexTest, Log1p) {
  const std::string text = R"(
func.func @main(%z: tensor<3xcomplex<f64>>) -> tensor<3xcomplex<f64>> {
  %0 = stablehlo.log_plus_one %z : tensor<3xcomplex<f64>>
  return %0 : tensor<3xcomplex<f64>>
}
)";
  const auto got = RunMain<double>(text, {{1e-10, 2e-10, 3, 4, 1e300, 1e300}});
  ASSERT_EQ(got.size(), 6u);
  const std::complex<double> small(1e-10, 2e-10);
  const std::complex<double> want[3] = {small - small * small / 2.0, std::log(std::complex<double>(4, 4)),
                                        std::log(std::complex<double>(1e300, 1e300))};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(got[2 * i], want[i].real(), 1e-15 * std::abs(want[i])) << i;
    EXPECT_NEAR(got[2 * i + 1], want[i].imag(), 1e-15 * std::abs(want[i])) << i;
  }
}

TEST(ComplexTest, SqrtOfAHugeValueDoesNotOverflow) {
  // |3e38 + 3e38i| overflows f32, its square root (2.06e19) does not.
  const std::string text = R"(
func.func @main(%z: tensor<complex<f32>>) -> tensor<complex<f32>> {
  %0 = stablehlo.sqrt %z : tensor<complex<f32>>
  return %0 : tensor<complex<f32>>
}
)";
  const auto got = RunMain<float>(text, {{3e38f, 3e38f}});
  ASSERT_EQ(got.size(), 2u);
  const double r = std::sqrt(std::hypot(3e38, 3e38)), t = M_PI / 8;
  EXPECT_NEAR(got[0], r * std::cos(t), 1e-6 * r);
  EXPECT_NEAR(got[1], r * std::sin(t), 1e-6 * r);
}

TEST(ComplexTest, MultiplyAddAndConstants) {
  const std::string text = R"(
func.func @main(%z: tensor<2xcomplex<f64>>) -> tensor<2xcomplex<f64>> {
  %c = stablehlo.constant dense<[(1.0, 2.0), (0.5, -1.5)]> : tensor<2xcomplex<f64>>
  %i = stablehlo.constant dense<(0.0, 1.0)> : tensor<complex<f64>>
  %ib = stablehlo.broadcast_in_dim %i, dims = [] : (tensor<complex<f64>>) -> tensor<2xcomplex<f64>>
  %0 = stablehlo.multiply %z, %c : tensor<2xcomplex<f64>>
  %1 = stablehlo.subtract %0, %ib : tensor<2xcomplex<f64>>
  return %1 : tensor<2xcomplex<f64>>
}
)";
  const std::vector<double> z = {3, -1, 2, 4};
  const auto got = RunMain<double>(text, {z});
  // (3 - i)(1 + 2i) - i = 5 + 4i; (2 + 4i)(0.5 - 1.5i) - i = 7 - 2i
  EXPECT_EQ(got, (std::vector<double>{5, 4, 7, -2}));
}

TEST(ComplexTest, ReduceAndPad) {
  // jnp.sum of complex values: a reduce with a (0, 0) init; and a pad.
  const std::string text = R"(
func.func @main(%z: tensor<2x3xcomplex<f32>>) -> tensor<4xcomplex<f32>> {
  %c = stablehlo.constant dense<(0.0, 0.0)> : tensor<complex<f32>>
  %0 = stablehlo.reduce(%z init: %c) applies stablehlo.add across dimensions = [1] : (tensor<2x3xcomplex<f32>>, tensor<complex<f32>>) -> tensor<2xcomplex<f32>>
  %f = stablehlo.constant dense<(9.0, -9.0)> : tensor<complex<f32>>
  %1 = stablehlo.pad %0, %f, low = [1], high = [1], interior = [0] : (tensor<2xcomplex<f32>>, tensor<complex<f32>>) -> tensor<4xcomplex<f32>>
  return %1 : tensor<4xcomplex<f32>>
}
)";
  const std::vector<float> z = {1, 2, 3, -1, -0.5f, 0.5f, 0, 0, 0, 1, 2, 0};
  EXPECT_EQ(RunMain<float>(text, {z}),
            (std::vector<float>{9, -9, 3.5f, 1.5f, 2, 1, 9, -9}));
}

TEST(ComplexTest, PartsExpCompareAndConvert) {
  const std::string text = R"(
func.func @main(%x: tensor<3xi32>, %y: tensor<3xf32>) -> tensor<3xf32> {
  %zx = stablehlo.convert %x : (tensor<3xi32>) -> tensor<3xcomplex<f32>>
  %zero = stablehlo.constant dense<0.0> : tensor<3xf32>
  %zy = stablehlo.complex %zero, %y : tensor<3xcomplex<f32>>
  %z = stablehlo.add %zx, %zy : tensor<3xcomplex<f32>>
  %e = stablehlo.exponential %zy : tensor<3xcomplex<f32>>
  %re = stablehlo.real %e : (tensor<3xcomplex<f32>>) -> tensor<3xf32>
  %im = stablehlo.imag %z : (tensor<3xcomplex<f32>>) -> tensor<3xf32>
  %eq = stablehlo.compare EQ, %z, %zx : (tensor<3xcomplex<f32>>, tensor<3xcomplex<f32>>) -> tensor<3xi1>
  %s = stablehlo.select %eq, %re, %im : tensor<3xi1>, tensor<3xf32>
  return %s : tensor<3xf32>
}
)";
  // z = x + iy; where y = 0 (z == x) the result is re(exp(iy)) = cos 0 = 1,
  // elsewhere im(z) = y.
  const float pi = static_cast<float>(M_PI);
  auto m = ParseModule(text, "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<Tensor> in;
  in.push_back(NewTensor(m->funcs[0].arg_types[0], nullptr).value());
  in.push_back(NewTensor(m->funcs[0].arg_types[1], nullptr).value());
  const int32_t x[3] = {7, -2, 5};
  const float y[3] = {0, pi, -0.5f};
  std::memcpy(in[0].data.mutable_raw(), x, sizeof x);
  std::memcpy(in[1].data.mutable_raw(), y, sizeof y);
  ASSERT_TRUE(Verify(*m).ok()) << Verify(*m).message();
  auto r = RunFunction(*m, "main", std::move(in), DeviceSite{}, Options{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const float* got = (*r)[0].as<float>();
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], pi);
  EXPECT_EQ(got[2], -0.5f);
}

TEST(ComplexTest, TypesAreChecked) {
  // stablehlo.complex takes two reals of the result's part type; real and
  // abs give the part type; complex values compare EQ / NE only.
  const std::string bad_complex = R"(
func.func @main(%a: tensor<2xf64>, %b: tensor<2xf64>) -> tensor<2xcomplex<f32>> {
  %0 = "stablehlo.complex"(%a, %b) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xcomplex<f32>>
  return %0 : tensor<2xcomplex<f32>>
}
)";
  auto m = ParseModule(bad_complex, "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_THAT(Verify(*m).message(), HasSubstr("stablehlo.complex"));
  const std::string bad_real = R"(
func.func @main(%a: tensor<2xcomplex<f32>>) -> tensor<2xf64> {
  %0 = stablehlo.real %a : (tensor<2xcomplex<f32>>) -> tensor<2xf64>
  return %0 : tensor<2xf64>
}
)";
  m = ParseModule(bad_real, "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_THAT(Verify(*m).message(), HasSubstr("is f32"));
  const std::string ordered = R"(
func.func @main(%a: tensor<2xcomplex<f32>>) -> tensor<2xi1> {
  %0 = stablehlo.compare LT, %a, %a : (tensor<2xcomplex<f32>>, tensor<2xcomplex<f32>>) -> tensor<2xi1>
  return %0 : tensor<2xi1>
}
)";
  m = ParseModule(ordered, "t.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE(Verify(*m).ok());
  std::vector<Tensor> in;
  in.push_back(NewTensor(m->funcs[0].arg_types[0], nullptr).value());
  auto r = RunFunction(*m, "main", std::move(in), DeviceSite{}, Options{});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("EQ or NE only"));
}

}  // namespace
}  // namespace tpumesh::hlo
