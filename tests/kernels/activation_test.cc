// ActivationF32 and GegluF32 against the double references on every Highway
// target, on a dense sweep of [-20, 20] plus extreme values.
#include "kernels/activation.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/ops_reference.h"
#include "tests/kernels/ops_test_util.h"

namespace tpumesh::kernels {
namespace {

using testing::ExpectAllNear;
using testing::ExpectBitIdentical;
using testing::ForEachTarget;
using testing::kU;
using testing::RandomVector;
using testing::WorstRatio;

std::vector<float> SweepInputs() {
  std::vector<float> x;
  for (int i = -200000; i <= 200000; i += 7)
    x.push_back(static_cast<float>(i) * 1e-4f);  // [-20, 20]
  for (float e : {0.0f, -0.0f, 1e-30f, 1e-7f, 1e-3f, 3.94f * 1.41421356f, 50.0f,
                  88.0f, 100.0f, 200.0f, 1e4f, 1e30f}) {
    x.push_back(e);
    x.push_back(-e);
  }
  return x;  // 57k values: not a multiple of any vector width
}

// Error bound of each vector function against the exact value, per input
// (u = 2^-24). Terms, each from the formula's own f32 steps:
//  - sigmoid forms (silu, quick_gelu): z = 1.702 x rounds, and 1.702 itself
//    is rounded to f32 (|dz| <= 1.5 u |z|, moving sigmoid relatively by
//    (1 - sigmoid(z)) |dz|); exp is 1 ulp; the divide and the final multiply
//    1 ulp each: (6 + 1.5 (1 - s) |z|) u |y|.
//  - gelu (erf): the erf approximation is within 5.6 u absolute (measured
//    below), 1 + erf rounds (2 u absolute), x / sqrt 2 rounds (moves erf by
//    at most 1.13 u |x| / sqrt 2): 0.5 |x| (8 + 0.8 |x|) u, plus 4 u |y|. The
//    absolute 0.5 |x| part is the f32 formula's floor, PyTorch's too: for
//    x << 0, 1 + erf cancels.
//  - gelu_tanh: inner = sqrt(2/pi)(x + 0.044715 x^3) rounds ~4 u relative,
//    tanh is 4 ulp: 0.5 |x| (5 + 4 |inner| sech^2(inner)) u, plus 4 u |y|.
double Tolerance(Activation act, double x, double want) {
  const double ax = std::fabs(x), aw = std::fabs(want);
  switch (act) {
    case Activation::kSilu:
    case Activation::kQuickGelu: {
      const double z = act == Activation::kSilu ? x : 1.702 * x;
      const double one_minus_s = 1.0 / (1.0 + std::exp(z));
      return (6 + 1.5 * one_minus_s * std::fabs(z)) * kU * aw + 1e-38;
    }
    case Activation::kGeluErf:
      return 0.5 * ax * (8 + 0.8 * ax) * kU + 4 * kU * aw + 1e-38;
    case Activation::kGeluTanh: {
      const double inner = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
      const double sech = std::isfinite(inner) && std::fabs(inner) < 40
                              ? 1.0 / std::cosh(inner)
                              : 0.0;
      return 0.5 * ax * (5 + 4 * std::fabs(inner) * sech * sech) * kU +
             4 * kU * aw + 1e-38;
    }
  }
  return 0;
}

TEST(ActivationTest, MatchesReferenceEveryTarget) {
  const std::vector<float> x = SweepInputs();
  for (Activation act : {Activation::kGeluErf, Activation::kGeluTanh,
                         Activation::kQuickGelu, Activation::kSilu}) {
    const std::string name(ActivationName(act));
    WorstRatio worst(name);
    ForEachTarget([&](const char*) {
      std::vector<float> got(x.size(), NAN), want(x.size());
      ASSERT_TRUE(ActivationF32(act, static_cast<int64_t>(x.size()), x.data(),
                                got.data())
                      .ok());
      reference::ActivationF32(act, static_cast<int64_t>(x.size()), x.data(),
                               want.data());
      worst.Add(ExpectAllNear(
          got, want, [&](size_t i) { return Tolerance(act, x[i], want[i]); },
          name));
      // In place gives the same bits.
      std::vector<float> y = x;
      ASSERT_TRUE(
          ActivationF32(act, static_cast<int64_t>(y.size()), y.data(), y.data())
              .ok());
      ExpectBitIdentical(got, y, name + " in place");
    });
  }
}

TEST(ActivationTest, KnownValues) {
  const std::vector<float> x = {0.0f, 1.0f, -1.0f, 3.0f};
  std::vector<float> y(4);
  ASSERT_TRUE(ActivationF32(Activation::kGeluErf, 4, x.data(), y.data()).ok());
  // torch.nn.functional.gelu(torch.tensor([0., 1., -1., 3.])) in float64.
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_NEAR(y[1], 0.8413447460685429, 2e-7);
  EXPECT_NEAR(y[2], -0.15865525393145707, 2e-7);
  EXPECT_NEAR(y[3], 2.9959507889462837, 4e-7);
  ASSERT_TRUE(ActivationF32(Activation::kSilu, 4, x.data(), y.data()).ok());
  EXPECT_NEAR(y[1], 0.7310585786300049, 2e-7);  // sigmoid(1)
  ASSERT_TRUE(ActivationF32(Activation::kGeluTanh, 4, x.data(), y.data()).ok());
  EXPECT_NEAR(y[1], 0.8411919906082768, 2e-7);
}

TEST(ActivationTest, BitIdenticalForEveryThreadCount) {
  const std::vector<float> x = RandomVector(100003, 5, -8, 8);
  std::vector<float> one(x.size()), many(x.size());
  ASSERT_TRUE(
      ActivationF32(Activation::kGeluErf, 100003, x.data(), one.data(), 1)
          .ok());
  ASSERT_TRUE(
      ActivationF32(Activation::kGeluErf, 100003, x.data(), many.data(), 2)
          .ok());
  ExpectBitIdentical(one, many, "gelu threads 2");
}

TEST(GegluTest, MatchesReferenceEveryTarget) {
  struct Case {
    int64_t rows, f;
  };
  WorstRatio worst("geglu");
  ForEachTarget([&](const char*) {
    for (const Case c :
         {Case{1, 1}, Case{3, 17}, Case{77, 33}, Case{5, 1280}}) {
      const std::vector<float> x = RandomVector(c.rows * 2 * c.f, 9, -6, 6);
      std::vector<float> got(c.rows * c.f, NAN), want(c.rows * c.f);
      ASSERT_TRUE(GegluF32(c.rows, c.f, x.data(), got.data()).ok());
      reference::Geglu(c.rows, c.f, x.data(), want.data());
      worst.Add(ExpectAllNear(
          got, want,
          [&](size_t i) {
            const int64_t r = static_cast<int64_t>(i) / c.f,
                          col = static_cast<int64_t>(i) % c.f;
            const double hidden = x[r * 2 * c.f + col],
                         gate = x[r * 2 * c.f + c.f + col];
            const double g =
                reference::ActivationValue(Activation::kGeluErf, gate);
            return std::fabs(hidden) *
                       Tolerance(Activation::kGeluErf, gate, g) +
                   kU * std::fabs(want[i]);
          },
          "geglu " + std::to_string(c.rows) + "x" + std::to_string(c.f)));
    }
  });
}

TEST(ActivationTest, RejectsBadArguments) {
  float dummy = 0;
  EXPECT_EQ(ActivationF32(Activation::kSilu, -1, &dummy, &dummy).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ActivationF32(static_cast<Activation>(42), 1, &dummy, &dummy).code(),
      StatusCode::kUnimplemented);
  EXPECT_EQ(GegluF32(1, 0, &dummy, &dummy).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(ActivationF32(Activation::kSilu, 0, nullptr, nullptr).ok());
}

TEST(ActivationTest, Cost) {
  const OpCost c = ActivationCost(Activation::kGeluErf, 4096 * 1280);
  EXPECT_DOUBLE_EQ(c.flops, 4.0 * 4096 * 1280);
  EXPECT_DOUBLE_EQ(c.transcendentals, 4096.0 * 1280);
  const OpCost g = GegluCost(4096, 1280);
  EXPECT_DOUBLE_EQ(g.bytes_read, 8.0 * 4096 * 1280);
  EXPECT_DOUBLE_EQ(g.bytes_written, 4.0 * 4096 * 1280);
}

}  // namespace
}  // namespace tpumesh::kernels
