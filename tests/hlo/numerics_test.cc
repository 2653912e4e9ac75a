// XLA:CPU's numerics that an op-by-op evaluation does not give by itself
// (docs/stablehlo.md, "Numerics"): denormals flushed (FTZ/DAZ) in every op
// of a run, on every thread that computes it.
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
  for (size_t i = 0; i < args.size(); ++i) in.push_back(F32(m->funcs[0].arg_types[i], args[i]));
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

}  // namespace
}  // namespace tpumesh::hlo
