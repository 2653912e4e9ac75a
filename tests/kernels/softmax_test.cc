// SoftmaxF32 against reference::Softmax on every Highway target.
#include "kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
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

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Relative error bound per element, u = 2^-24: x - max rounds (u |x - max|
// in the exponent, so relatively in e); exp is 1 ulp; the row sum is f32
// partial sums of at most 256 terms folded into a double (gamma_256 of the
// sum, all terms positive); the final multiply 1 ulp:
//   tol = y (|x - max| + 260) u, plus 1e-38 for results in the subnormal range.
TEST(SoftmaxTest, MatchesReferenceEveryTarget) {
  struct Case {
    int64_t rows, dim;
    float range;
  };
  const std::vector<Case> cases = {{1, 1, 1},    {3, 17, 10},   {5, 33, 30},
                                   {2, 1000, 5}, {4, 4097, 20}, {77, 77, 8}};
  WorstRatio worst("softmax");
  ForEachTarget([&](const char*) {
    for (const Case& c : cases) {
      std::vector<float> x =
          RandomVector(c.rows * c.dim, 40, -c.range, c.range);
      // Mask a stripe as attention does (-inf scores), never a whole row here.
      for (int64_t r = 0; r < c.rows; ++r)
        for (int64_t i = r % 3 + 1; i < c.dim; i += 5)
          x[r * c.dim + i] = kNegInf;
      std::vector<float> got(x.size(), NAN), want(x.size());
      ASSERT_TRUE(SoftmaxF32(c.rows, c.dim, x.data(), got.data()).ok());
      reference::Softmax(c.rows, c.dim, x.data(), want.data());
      std::vector<float> row_max(c.rows);
      for (int64_t r = 0; r < c.rows; ++r)
        row_max[r] = *std::max_element(x.begin() + r * c.dim,
                                       x.begin() + (r + 1) * c.dim);
      worst.Add(ExpectAllNear(
          got, want,
          [&](size_t i) {
            const float xi = x[i];
            if (xi == kNegInf) return 0.0;  // must be exactly 0
            const double spread =
                std::fabs(static_cast<double>(xi) - row_max[i / c.dim]);
            return std::fabs(want[i]) * (spread + 260) * kU + 1e-38;
          },
          "softmax " + std::to_string(c.rows) + "x" + std::to_string(c.dim)));
    }
  });
}

TEST(SoftmaxTest, RowsSumToOneAndHugeValuesDoNotOverflow) {
  std::vector<float> x = {1e30f, 1e30f, -1e30f, 88.0f, 89.0f,
                          90.0f, 0.0f,  0.0f,   0.0f};
  std::vector<float> y(9);
  ASSERT_TRUE(SoftmaxF32(3, 3, x.data(), y.data()).ok());
  EXPECT_FLOAT_EQ(y[0], 0.5f);
  EXPECT_FLOAT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_NEAR(y[3] + y[4] + y[5], 1.0, 4e-7);
  EXPECT_NEAR(y[6], 1.0 / 3, 1e-7);
}

TEST(SoftmaxTest, FullyMaskedRowIsZeroNotNan) {
  std::vector<float> x = {kNegInf, kNegInf, kNegInf, 1.0f, kNegInf, 1.0f};
  std::vector<float> y(6, NAN);
  ASSERT_TRUE(SoftmaxF32(2, 3, x.data(), y.data()).ok());
  ExpectAllNear(y, {0, 0, 0, 0.5f, 0, 0.5f}, 0.0, "masked");
}

TEST(SoftmaxTest, InPlaceAndBitIdenticalForEveryThreadCount) {
  const std::vector<float> x = RandomVector(300 * 333, 41, -5, 5);
  std::vector<float> one(x.size());
  ASSERT_TRUE(SoftmaxF32(300, 333, x.data(), one.data(), 1).ok());
  for (int threads : {2, 0}) {
    std::vector<float> y = x;
    ASSERT_TRUE(SoftmaxF32(300, 333, y.data(), y.data(), threads).ok());
    ExpectBitIdentical(one, y, "threads " + std::to_string(threads));
  }
}

TEST(SoftmaxTest, RejectsBadArgumentsAndCosts) {
  float dummy = 0;
  EXPECT_EQ(SoftmaxF32(1, 0, &dummy, &dummy).code(),
            StatusCode::kInvalidArgument);
  const OpCost c = SoftmaxCost(10, 100);
  EXPECT_DOUBLE_EQ(c.flops, 4000);
  EXPECT_DOUBLE_EQ(c.transcendentals, 1010);
}

}  // namespace
}  // namespace tpumesh::kernels
