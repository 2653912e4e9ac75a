// GroupNormF32 and LayerNormF32 against reference::GroupNorm / LayerNorm on
// every Highway target.
#include "kernels/norm.h"

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

// Error bound of the fast normalisation against the double reference.
// The mean's f32 partial sums have at most 1024/4 = 256 terms each (HWY_SCALAR;
// fewer with wider vectors) before being folded into a double, so
// |mean error| <= gamma_256 * mean|x| ~ 256 u mean|x|; the variance likewise
// (relative 256 u, halved in rstd), then (x - m) * a + b adds 3 roundings
// and SiLU 4 ulp. Per element, with xhat = (x - mean) rstd:
//   tol = 300 u (|xhat gamma| + |beta| + mean|x| rstd |gamma|) (+ 8 u |y| for
//   SiLU).
// 300 rather than 256 + 3 + 1 leaves room for the lane reduction's log2(16)
// adds.
struct Stats {
  double mean, rstd, mean_abs;
};

Stats StatsOf(const float* x, int64_t n, float eps) {
  double s = 0, sa = 0;
  for (int64_t i = 0; i < n; ++i) {
    s += x[i];
    sa += std::fabs(x[i]);
  }
  const double mean = s / n;
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
  return {mean, 1.0 / std::sqrt(ss / n + eps), sa / n};
}

struct GroupCase {
  GroupNormShape shape;
  float offset;  // added to x: a mean far from 0 tests the two-pass variance
};

std::string Name(const GroupNormShape& s) {
  return "group_norm [" + std::to_string(s.batch) + ", " +
         std::to_string(s.channels) + ", " + std::to_string(s.inner) + "] / " +
         std::to_string(s.num_groups);
}

TEST(GroupNormTest, MatchesReferenceEveryTarget) {
  const std::vector<GroupCase> cases = {
      {{1, 32, 64, 32}, 0.0f},    // 1 channel per group
      {{3, 33, 25, 3}, 0.0f},     // 11 channels per group, odd inner
      {{1, 12, 49, 4}, 5.0f},     // mean 5, std ~0.6
      {{2, 64, 1, 32}, 0.0f},     // inner 1 (a [N, C] tensor)
      {{1, 320, 81, 32}, -3.0f},  // SD channel count, odd spatial size 9x9
      {{1, 6, 2001, 2}, 0.5f},  // groups longer than one 1024-element sum chunk
  };
  WorstRatio worst("group_norm");
  ForEachTarget([&](const char*) {
    for (const GroupCase& c : cases) {
      const GroupNormShape& s = c.shape;
      const int64_t n = s.batch * s.channels * s.inner;
      std::vector<float> x = RandomVector(n, 3);
      for (float& e : x) e += c.offset;
      const std::vector<float> gamma = RandomVector(s.channels, 4, 0.5f, 1.5f);
      const std::vector<float> beta = RandomVector(s.channels, 5);
      for (bool silu : {false, true}) {
        for (bool affine : {true, false}) {
          const std::string what =
              Name(s) + (silu ? " +silu" : "") + (affine ? "" : " no affine");
          const float* g = affine ? gamma.data() : nullptr;
          const float* b = affine ? beta.data() : nullptr;
          std::vector<float> got(n, NAN), want(n);
          ASSERT_TRUE(
              GroupNormF32(s, 1e-5f, x.data(), g, b, got.data(), silu).ok());
          reference::GroupNorm(s, 1e-5f, x.data(), g, b, want.data(), silu);
          const int64_t cg = s.channels / s.num_groups,
                        per_group = cg * s.inner;
          std::vector<Stats> stats;
          for (int64_t grp = 0; grp < s.batch * s.num_groups; ++grp)
            stats.push_back(
                StatsOf(x.data() + grp * per_group, per_group, 1e-5f));
          worst.Add(ExpectAllNear(
              got, want,
              [&](size_t i) {
                const int64_t group =
                    static_cast<int64_t>(i) / per_group;  // n * G + g
                const int64_t ch =
                    (static_cast<int64_t>(i) / s.inner) % s.channels;
                const Stats& st = stats[group];
                const double ga = affine ? std::fabs(gamma[ch]) : 1.0,
                             be = affine ? std::fabs(beta[ch]) : 0.0;
                const double xhat = std::fabs(x[i] - st.mean) * st.rstd;
                return 300 * kU *
                           (xhat * ga + be + st.mean_abs * st.rstd * ga) +
                       (silu ? 8 * kU * std::fabs(want[i]) : 0.0);
              },
              what));
        }
      }
    }
  });
}

TEST(GroupNormTest, InPlaceAndBitIdenticalForEveryThreadCount) {
  const GroupNormShape s{2, 64, 300, 32};
  const int64_t n = s.batch * s.channels * s.inner;
  const std::vector<float> x = RandomVector(n, 8), gamma = RandomVector(64, 9),
                           beta = RandomVector(64, 10);
  std::vector<float> one(n);
  ASSERT_TRUE(GroupNormF32(s, 1e-6f, x.data(), gamma.data(), beta.data(),
                           one.data(), true, 1)
                  .ok());
  for (int threads : {2, 5, 0}) {
    std::vector<float> y = x;  // in place
    ASSERT_TRUE(GroupNormF32(s, 1e-6f, y.data(), gamma.data(), beta.data(),
                             y.data(), true, threads)
                    .ok());
    ExpectBitIdentical(one, y, "threads " + std::to_string(threads));
  }
}

TEST(GroupNormTest, RejectsBadArguments) {
  float dummy = 0;
  Status st =
      GroupNormF32({1, 30, 4, 32}, 1e-5f, &dummy, &dummy, &dummy, &dummy);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("do not divide"), std::string::npos)
      << st.message();
  EXPECT_EQ(GroupNormF32({1, 32, 4, 32}, -1.0f, &dummy, &dummy, &dummy, &dummy)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(GroupNormF32({1, 32, 4, 32}, 1e-5f, &dummy, &dummy, nullptr, &dummy)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      GroupNormF32({0, 32, 4, 32}, 1e-5f, &dummy, nullptr, nullptr, &dummy)
          .code(),
      StatusCode::kInvalidArgument);
}

TEST(GroupNormTest, Cost) {
  const OpCost c = GroupNormCost({1, 320, 4096, 32}, true, true);
  const double n = 320.0 * 4096;
  EXPECT_DOUBLE_EQ(c.flops, 11 * n);
  EXPECT_DOUBLE_EQ(c.transcendentals, 32 + n);
  EXPECT_DOUBLE_EQ(c.bytes_read, 4 * (n + 640));
  EXPECT_DOUBLE_EQ(c.bytes_written, 4 * n);
}

TEST(LayerNormTest, MatchesReferenceEveryTarget) {
  struct Case {
    int64_t rows, dim;
    float offset;
  };
  const std::vector<Case> cases = {{1, 1, 0},    {3, 17, 0},   {5, 33, 2},
                                   {77, 768, 0}, {4, 320, -4}, {2, 3001, 0}};
  WorstRatio worst("layer_norm");
  ForEachTarget([&](const char*) {
    for (const Case& c : cases) {
      std::vector<float> x = RandomVector(c.rows * c.dim, 21);
      for (float& e : x) e += c.offset;
      const std::vector<float> gamma = RandomVector(c.dim, 22),
                               beta = RandomVector(c.dim, 23);
      for (bool affine : {true, false}) {
        const std::string what = "layer_norm [" + std::to_string(c.rows) +
                                 ", " + std::to_string(c.dim) + "]" +
                                 (affine ? "" : " no affine");
        const float* g = affine ? gamma.data() : nullptr;
        const float* b = affine ? beta.data() : nullptr;
        std::vector<float> got(x.size(), NAN), want(x.size());
        ASSERT_TRUE(
            LayerNormF32(c.rows, c.dim, 1e-5f, x.data(), g, b, got.data())
                .ok());
        reference::LayerNorm(c.rows, c.dim, 1e-5f, x.data(), g, b, want.data());
        std::vector<Stats> stats;
        for (int64_t r = 0; r < c.rows; ++r)
          stats.push_back(StatsOf(x.data() + r * c.dim, c.dim, 1e-5f));
        // As GroupNormTest's bound, per row.
        worst.Add(ExpectAllNear(
            got, want,
            [&](size_t i) {
              const int64_t r = static_cast<int64_t>(i) / c.dim,
                            col = static_cast<int64_t>(i) % c.dim;
              const Stats& st = stats[r];
              const double ga = affine ? std::fabs(gamma[col]) : 1.0,
                           be = affine ? std::fabs(beta[col]) : 0.0;
              return 300 * kU *
                     (std::fabs(x[i] - st.mean) * st.rstd * ga + be +
                      st.mean_abs * st.rstd * ga);
            },
            what));
      }
    }
  });
}

TEST(LayerNormTest, ConstantRowGivesBeta) {
  // var = 0: (x - mean) is exactly 0, y = beta whatever eps.
  std::vector<float> x(40, 2.5f), gamma(40, 3.0f), beta = RandomVector(40, 1),
                                                   y(40);
  ASSERT_TRUE(
      LayerNormF32(1, 40, 1e-5f, x.data(), gamma.data(), beta.data(), y.data())
          .ok());
  ExpectAllNear(y, beta, 0.0, "constant row");
}

TEST(LayerNormTest, BitIdenticalForEveryThreadCount) {
  const int64_t rows = 1000, dim = 320;
  const std::vector<float> x = RandomVector(rows * dim, 30),
                           g = RandomVector(dim, 31), b = RandomVector(dim, 32);
  std::vector<float> one(x.size());
  ASSERT_TRUE(LayerNormF32(rows, dim, 1e-5f, x.data(), g.data(), b.data(),
                           one.data(), 1)
                  .ok());
  for (int threads : {2, 0}) {
    std::vector<float> many(x.size());
    ASSERT_TRUE(LayerNormF32(rows, dim, 1e-5f, x.data(), g.data(), b.data(),
                             many.data(), threads)
                    .ok());
    ExpectBitIdentical(one, many, "threads " + std::to_string(threads));
  }
}

}  // namespace
}  // namespace tpumesh::kernels
