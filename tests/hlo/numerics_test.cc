// XLA:CPU's numerics that an op-by-op evaluation does not give by itself
// (docs/stablehlo.md, "Numerics"): denormals flushed (FTZ/DAZ) in every op
// of a run, on every thread that computes it; a multiply fused into its one
// add or subtract (fma) and chained constant factors folded
// (hlo/contraction.h). Each contraction case is checked element by element
// against std::fma or the two-rounding result, on inputs where the two
// differ; the cases where XLA does not contract run beside one where it
// does, so every test fails on an op-by-op evaluation.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/interpreter.h"
#include "kernels/ops_parallel.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace tpumesh::hlo {
namespace {

constexpr float kDenormal = 1e-40f;  // below FLT_MIN (1.2e-38)

Tensor F32(const Type& t, const std::vector<float>& values) {
  Tensor x = NewTensor(t, nullptr).value();
  std::memcpy(x.data.mutable_raw(), values.data(), values.size() * sizeof(float));
  return x;
}

// Runs @main with f32 arguments (each of main's argument types) and returns
// result `k`'s elements.
std::vector<float> RunF32(const std::string& text, const std::vector<std::vector<float>>& args, size_t k = 0,
                       int threads = 0) {
  auto m = ParseModule(text, "t.mlir");
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return {};
  EXPECT_TRUE(Verify(*m).ok()) << Verify(*m).message();
  std::vector<Tensor> in;
  for (size_t i = 0; i < args.size(); ++i) in.push_back(F32(m->FindFunc("main")->arg_types[i], args[i]));
  Options o;
  o.threads = threads;
  auto r = RunFunction(*m, "main", std::move(in), DeviceSite{}, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return {};
  const float* p = (*r)[k].as<float>();
  return std::vector<float>(p, p + (*r)[k].num_elements());
}

uint32_t BitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// ---------------------------------------------------------------- FTZ/DAZ

TEST(HloNumericsTest, SignOfADenormalIsASignedZero) {
  const std::string text = R"(
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.sign %x : tensor<4xf32>
  return %0 : tensor<4xf32>
})";
  const auto y = RunF32(text, {{kDenormal, -kDenormal, 2.0f, -0.0f}});
  ASSERT_EQ(y.size(), 4u);
  EXPECT_EQ(BitsOf(y[0]), BitsOf(0.0f));
  EXPECT_EQ(BitsOf(y[1]), BitsOf(-0.0f));
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_EQ(BitsOf(y[3]), BitsOf(-0.0f));
}

TEST(HloNumericsTest, DenormalOperandsReadAsZeroAndResultsFlush) {
  const std::string text = R"(
func.func @main(%x: tensor<3xf32>, %y: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %0 = stablehlo.add %x, %y : tensor<3xf32>
  %1 = stablehlo.multiply %x, %y : tensor<3xf32>
  return %0, %1 : tensor<3xf32>, tensor<3xf32>
})";
  const std::vector<std::vector<float>> args = {{kDenormal, 1e-20f, 3.0f}, {0.0f, 1e-20f, 0.5f}};
  // DAZ: denormal + 0 is 0 (IEEE: the denormal); FTZ: 1e-20 * 1e-20 is 0.
  EXPECT_EQ(RunF32(text, args, 0), (std::vector<float>{0.0f, 2e-20f, 3.5f}));
  EXPECT_EQ(RunF32(text, args, 1), (std::vector<float>{0.0f, 0.0f, 1.5f}));
}

TEST(HloNumericsTest, DotAndReduceFlushToo) {
  const std::string text = R"(
func.func @main(%a: tensor<1x2xf32>, %b: tensor<2x1xf32>, %c: tensor<1x2xf32>) -> (tensor<1x1xf32>, tensor<f32>) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<1x2xf32>, tensor<2x1xf32>) -> tensor<1x1xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %1 = stablehlo.reduce(%c init: %z) applies stablehlo.add across dimensions = [0, 1] : (tensor<1x2xf32>, tensor<f32>) -> tensor<f32>
  return %0, %1 : tensor<1x1xf32>, tensor<f32>
})";
  // 1e-20 * 1e-20 flushes; denormals sum to 0.
  const std::vector<std::vector<float>> args = {{1e-20f, kDenormal}, {1e-20f, 1.0f}, {kDenormal, kDenormal}};
  EXPECT_EQ(RunF32(text, args, 0), (std::vector<float>{0.0f}));
  EXPECT_EQ(RunF32(text, args, 1), (std::vector<float>{0.0f}));
}

// The flush holds on the threads that take an op's tasks (more elements
// than one task's chunk, on 2 threads), and the caller's own environment is
// restored after the run.
TEST(HloNumericsTest, EveryThreadFlushesAndTheCallerIsRestored) {
  const std::string text = R"(
func.func @main(%x: tensor<262144xf32>) -> tensor<262144xf32> {
  %0 = stablehlo.add %x, %x : tensor<262144xf32>
  return %0 : tensor<262144xf32>
})";
#if defined(__x86_64__)
  constexpr unsigned kControl = ~0x3fu;  // MXCSR less its sticky exception flags
  const unsigned before = _mm_getcsr() & kControl;
#endif
  // This thread's arena of 2 made first, with IEEE denormals: TBB's workers
  // start from the arena's own environment, not from the run's.
  kernels::ParallelForTasks(2, 2, [](int64_t, int64_t) {});
  const auto y = RunF32(text, {std::vector<float>(262144, kDenormal)}, 0, 2);
  ASSERT_EQ(y.size(), 262144u);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], 0.0f) << i;
#if defined(__x86_64__)
  EXPECT_EQ(_mm_getcsr() & kControl, before);
#endif
  volatile float d = kDenormal;
  EXPECT_NE(d + 0.0f, 0.0f);  // this thread keeps IEEE denormals
}

// ---------------------------------------------------------------- contraction

// n values in [-4, 4) with full mantissas (a fixed LCG: the same every run).
std::vector<float> Values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) * 8.0f - 4.0f;
  }
  return v;
}

// Rounded after each op, whatever the compiler's contraction setting.
[[gnu::noinline]] float Mul(float a, float b) {
  volatile float p = a * b;
  return p;
}
[[gnu::noinline]] float Add(float a, float b) {
  volatile float s = a + b;
  return s;
}

constexpr size_t kN = 256;

// The tests' inputs: four vectors of kN.
const std::vector<std::vector<float>>& Inputs() {
  static const auto* in = new std::vector<std::vector<float>>{Values(kN, 1), Values(kN, 2), Values(kN, 3),
                                                             Values(kN, 4)};
  return *in;
}

// got[i] == want(i) for every i (bitwise), and want differs from
// other(i) somewhere (the inputs tell the two forms apart).
template <typename Want, typename Other>
void ExpectElements(const std::vector<float>& got, Want want, Other other) {
  ASSERT_EQ(got.size(), kN);
  int apart = 0;
  for (size_t i = 0; i < kN; ++i) {
    ASSERT_EQ(BitsOf(got[i]), BitsOf(want(i))) << "element " << i;
    apart += BitsOf(want(i)) != BitsOf(other(i));
  }
  EXPECT_GT(apart, 0) << "the inputs do not tell the forms apart";
}

// main(a, b, c, d) over tensor<256xf32> with `body` (which defines %r0, %r1).
std::string Program(const std::string& body, int results = 1) {
  std::string types = "tensor<256xf32>", rets = "%r0";
  for (int k = 1; k < results; ++k) {
    types += ", tensor<256xf32>";
    rets += ", %r" + std::to_string(k);
  }
  return "func.func @main(%a: tensor<256xf32>, %b: tensor<256xf32>, %c: tensor<256xf32>, %d: tensor<256xf32>) -> (" +
         types + ") {\n" + body + "  return " + rets + " : " + types + "\n}\n";
}

TEST(HloNumericsTest, ProductPlusAddendIsOneFma) {
  const auto& x = Inputs();
  // a*b + c and c + a*b
  for (const char* add : {"stablehlo.add %m, %c", "stablehlo.add %c, %m"}) {
    const std::string text = Program("  %m = stablehlo.multiply %a, %b : tensor<256xf32>\n  %r0 = " +
                                     std::string(add) + " : tensor<256xf32>\n");
    ExpectElements(
        RunF32(text, x), [&](size_t i) { return std::fma(x[0][i], x[1][i], x[2][i]); },
        [&](size_t i) { return Add(Mul(x[0][i], x[1][i]), x[2][i]); });
  }
}

TEST(HloNumericsTest, SubtractionsNegateTheAddendOrTheFactor) {
  const auto& x = Inputs();
  const std::string minus_c = Program(
      "  %m = stablehlo.multiply %a, %b : tensor<256xf32>\n  %r0 = stablehlo.subtract %m, %c : tensor<256xf32>\n");
  ExpectElements(
      RunF32(minus_c, x), [&](size_t i) { return std::fma(x[0][i], x[1][i], -x[2][i]); },
      [&](size_t i) { return Add(Mul(x[0][i], x[1][i]), -x[2][i]); });
  const std::string c_minus = Program(
      "  %m = stablehlo.multiply %a, %b : tensor<256xf32>\n  %r0 = stablehlo.subtract %c, %m : tensor<256xf32>\n");
  ExpectElements(
      RunF32(c_minus, x), [&](size_t i) { return std::fma(-x[0][i], x[1][i], x[2][i]); },
      [&](size_t i) { return Add(x[2][i], -Mul(x[0][i], x[1][i])); });
}

TEST(HloNumericsTest, OfTwoProductsTheLeftIsFused) {
  const auto& x = Inputs();
  const std::string body =
      "  %m = stablehlo.multiply %a, %b : tensor<256xf32>\n  %n = stablehlo.multiply %c, %d : tensor<256xf32>\n"
      "  %r0 = stablehlo.add %m, %n : tensor<256xf32>\n"
      "  %p = stablehlo.multiply %a, %b : tensor<256xf32>\n  %q = stablehlo.multiply %c, %d : tensor<256xf32>\n"
      "  %r1 = stablehlo.subtract %p, %q : tensor<256xf32>\n";
  const std::string text = Program(body, 2);
  ExpectElements(
      RunF32(text, x, 0), [&](size_t i) { return std::fma(x[0][i], x[1][i], Mul(x[2][i], x[3][i])); },
      [&](size_t i) { return std::fma(x[2][i], x[3][i], Mul(x[0][i], x[1][i])); });
  ExpectElements(
      RunF32(text, x, 1), [&](size_t i) { return std::fma(x[0][i], x[1][i], -Mul(x[2][i], x[3][i])); },
      [&](size_t i) { return std::fma(-x[2][i], x[3][i], Mul(x[0][i], x[1][i])); });
}

// A product with a second user is rounded (r0 = a*b + c beside r1 = a*b);
// the single-use c*d in the same program is fused.
TEST(HloNumericsTest, AProductWithTwoUsersIsRounded) {
  const auto& x = Inputs();
  const std::string text = Program(
      "  %m = stablehlo.multiply %a, %b : tensor<256xf32>\n  %r0 = stablehlo.add %m, %c : tensor<256xf32>\n"
      "  %n = stablehlo.multiply %c, %d : tensor<256xf32>\n  %s = stablehlo.add %n, %a : tensor<256xf32>\n"
      "  %r1 = stablehlo.subtract %s, %m : tensor<256xf32>\n",
      2);
  ExpectElements(
      RunF32(text, x, 0), [&](size_t i) { return Add(Mul(x[0][i], x[1][i]), x[2][i]); },
      [&](size_t i) { return std::fma(x[0][i], x[1][i], x[2][i]); });
  ExpectElements(
      RunF32(text, x, 1), [&](size_t i) { return Add(std::fma(x[2][i], x[3][i], x[0][i]), -Mul(x[0][i], x[1][i])); },
      [&](size_t i) { return Add(Add(Mul(x[2][i], x[3][i]), x[0][i]), -Mul(x[0][i], x[1][i])); });
}

// A value out of a reduce (another kernel) is never a product to fuse: sum
// over pairs, then + d, rounded at each step. Beside it, a product returned
// by a function called once is fused into the caller's add (XLA inlines).
TEST(HloNumericsTest, NothingIsFusedAcrossAReduceButAcrossAnInlinedCall) {
  const auto& x = Inputs();
  const std::string text = R"(
func.func private @scale(%u: tensor<256xf32>, %v: tensor<256xf32>) -> tensor<256xf32> {
  %m = stablehlo.multiply %u, %v : tensor<256xf32>
  return %m : tensor<256xf32>
}
func.func @main(%a: tensor<256xf32>, %b: tensor<256xf32>, %c: tensor<256xf32>, %d: tensor<256xf32>) -> (tensor<128xf32>, tensor<256xf32>) {
  %m = stablehlo.multiply %a, %b : tensor<256xf32>
  %m2 = stablehlo.reshape %m : (tensor<256xf32>) -> tensor<128x2xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%m2 init: %z) applies stablehlo.add across dimensions = [1] : (tensor<128x2xf32>, tensor<f32>) -> tensor<128xf32>
  %d2 = stablehlo.slice %d [0:128] : (tensor<256xf32>) -> tensor<128xf32>
  %r0 = stablehlo.add %s, %d2 : tensor<128xf32>
  %p = func.call @scale(%a, %b) : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  %r1 = stablehlo.add %c, %p : tensor<256xf32>
  return %r0, %r1 : tensor<128xf32>, tensor<256xf32>
})";
  const auto r0 = RunF32(text, x, 0);
  ASSERT_EQ(r0.size(), kN / 2);
  for (size_t i = 0; i < kN / 2; ++i) {
    const float pair = Add(Mul(x[0][2 * i], x[1][2 * i]), Mul(x[0][2 * i + 1], x[1][2 * i + 1]));
    ASSERT_EQ(BitsOf(r0[i]), BitsOf(Add(pair, x[3][i]))) << i;
  }
  ExpectElements(
      RunF32(text, x, 1), [&](size_t i) { return std::fma(x[0][i], x[1][i], x[2][i]); },
      [&](size_t i) { return Add(Mul(x[0][i], x[1][i]), x[2][i]); });
}

// A product passed into a function called once fuses into the callee's
// add (XLA inlines the call).
TEST(HloNumericsTest, AProductFusesIntoAFunctionCalledOnce) {
  const auto& x = Inputs();
  const std::string text = R"(
func.func private @plus(%u: tensor<256xf32>, %v: tensor<256xf32>) -> tensor<256xf32> {
  %s = stablehlo.add %u, %v : tensor<256xf32>
  return %s : tensor<256xf32>
}
func.func @main(%a: tensor<256xf32>, %b: tensor<256xf32>, %c: tensor<256xf32>, %d: tensor<256xf32>) -> tensor<256xf32> {
  %m = stablehlo.multiply %a, %b : tensor<256xf32>
  %r0 = func.call @plus(%m, %c) : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  return %r0 : tensor<256xf32>
})";
  ExpectElements(
      RunF32(text, x), [&](size_t i) { return std::fma(x[0][i], x[1][i], x[2][i]); },
      [&](size_t i) { return Add(Mul(x[0][i], x[1][i]), x[2][i]); });
}

// A product returned by a function called from two places fuses into
// both callers' adds (XLA inlines each call).
TEST(HloNumericsTest, AProductFusesAtEveryCallOfItsFunction) {
  const auto& x = Inputs();
  const std::string text = R"(
func.func private @times(%u: tensor<256xf32>, %v: tensor<256xf32>) -> tensor<256xf32> {
  %m = stablehlo.multiply %u, %v : tensor<256xf32>
  return %m : tensor<256xf32>
}
func.func @main(%a: tensor<256xf32>, %b: tensor<256xf32>, %c: tensor<256xf32>, %d: tensor<256xf32>) -> (tensor<256xf32>, tensor<256xf32>) {
  %p = func.call @times(%a, %b) : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  %r0 = stablehlo.add %p, %c : tensor<256xf32>
  %q = func.call @times(%c, %d) : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  %r1 = stablehlo.subtract %a, %q : tensor<256xf32>
  return %r0, %r1 : tensor<256xf32>, tensor<256xf32>
})";
  ExpectElements(
      RunF32(text, x, 0), [&](size_t i) { return std::fma(x[0][i], x[1][i], x[2][i]); },
      [&](size_t i) { return Add(Mul(x[0][i], x[1][i]), x[2][i]); });
  ExpectElements(
      RunF32(text, x, 1), [&](size_t i) { return std::fma(-x[2][i], x[3][i], x[0][i]); },
      [&](size_t i) { return Add(x[0][i], -Mul(x[2][i], x[3][i])); });
}

// (a * C1) * C2 is a * fl(C1 * C2), and fused as such into an add:
// (sqrt(2) * a) * 0.5 + 3 is fma(a, fl(sqrt(2) * 0.5), 3), as
// jax.random.normal(...) * 0.5 + 3 on XLA:CPU; the constants broadcast
// scalars, as JAX writes them.
TEST(HloNumericsTest, ChainedConstantFactorsAreFoldedFirst) {
  const auto& x = Inputs();
  const std::string text = Program(R"(  %k1 = stablehlo.constant dense<1.41421354> : tensor<f32>
  %c1 = stablehlo.broadcast_in_dim %k1, dims = [] : (tensor<f32>) -> tensor<256xf32>
  %k2 = stablehlo.constant dense<0.5> : tensor<f32>
  %c2 = stablehlo.broadcast_in_dim %k2, dims = [] : (tensor<f32>) -> tensor<256xf32>
  %k3 = stablehlo.constant dense<3.0> : tensor<f32>
  %c3 = stablehlo.broadcast_in_dim %k3, dims = [] : (tensor<f32>) -> tensor<256xf32>
  %m = stablehlo.multiply %c1, %a : tensor<256xf32>
  %n = stablehlo.multiply %c2, %m : tensor<256xf32>
  %r0 = stablehlo.add %c3, %n : tensor<256xf32>
  %k4 = stablehlo.constant dense<0.1> : tensor<256xf32>
  %k5 = stablehlo.constant dense<3.0> : tensor<f32>
  %p = stablehlo.multiply %b, %k4 : tensor<256xf32>
  %c5 = stablehlo.broadcast_in_dim %k5, dims = [] : (tensor<f32>) -> tensor<256xf32>
  %r1 = stablehlo.multiply %p, %c5 : tensor<256xf32>
)",
                                   2);
  const float k = Mul(1.41421354f, 0.5f);
  ExpectElements(
      RunF32(text, x, 0), [&](size_t i) { return std::fma(x[0][i], k, 3.0f); },
      [&](size_t i) { return std::fma(0.5f, Mul(1.41421354f, x[0][i]), 3.0f); });
  const float k2 = Mul(0.1f, 3.0f);
  ExpectElements(
      RunF32(text, x, 1), [&](size_t i) { return Mul(x[1][i], k2); },
      [&](size_t i) { return Mul(Mul(x[1][i], 0.1f), 3.0f); });
}

TEST(HloNumericsTest, F64ProductsFuseToo) {
  const std::string text = R"(
func.func @main(%a: tensor<2xf64>, %b: tensor<2xf64>, %c: tensor<2xf64>) -> tensor<2xf64> {
  %m = stablehlo.multiply %a, %b : tensor<2xf64>
  %r = stablehlo.add %m, %c : tensor<2xf64>
  return %r : tensor<2xf64>
})";
  auto m = ParseModule(text, "t.mlir");
  ASSERT_TRUE(m.ok());
  const double e = std::ldexp(1.0, -30);
  const std::vector<double> a = {1 + e, 3.0}, b = {1 - e, 1.0 / 3.0}, c = {-1.0, -1.0};
  std::vector<Tensor> in;
  for (const auto* v : {&a, &b, &c}) {
    Tensor t = NewTensor(m->funcs[0].arg_types[0], nullptr).value();
    std::memcpy(t.data.mutable_raw(), v->data(), 16);
    in.push_back(std::move(t));
  }
  auto r = RunFunction(*m, "main", std::move(in), DeviceSite{}, Options{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const double* y = (*r)[0].as<double>();
  EXPECT_EQ(y[0], -std::ldexp(1.0, -60));  // rounded first: (1 - 2^-60 -> 1) - 1 = 0
  EXPECT_EQ(y[1], std::fma(3.0, 1.0 / 3.0, -1.0));
}

}  // namespace
}  // namespace tpumesh::hlo
