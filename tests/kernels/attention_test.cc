// AttentionF32 against reference::Attention (full softmax in double) on
// every Highway target: kHighest (blocked, online softmax in f32) and the
// matmul path of kDefault and kHigh (bf16 operands, P rounded to bf16).
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/bf16.h"
#include "kernels/cpu_path.h"
#include "kernels/matmul.h"
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

std::string Name(const AttentionShape& s, bool causal) {
  return "attention B" + std::to_string(s.batch) + " Lq" +
         std::to_string(s.q_len) + " Lk" + std::to_string(s.kv_len) + " H" +
         std::to_string(s.heads) + " D" + std::to_string(s.head_dim) +
         (causal ? " causal" : "");
}

// Per output (b, i, h, :), u = 2^-24. A score s_j = scale * sum_d q_d k_d is
// an f32 FMA chain of D terms and one multiply: |ds_j| <= (D + 1) u scale
// sum_d |q_d k_d| + u |s_j|. p_j = exp(s_j - m) then carries a relative
// error of about |ds_j| + 2 u, and out = sum p v / sum p moves by at most
// 2 max|ds| max|v|. The two sums over keys (l, and P V with its rescales,
// one per 256-key block) are f32 chains of at most Lk + Lk/256 + 1 terms:
// gamma_Lk each relative to sum p |v| <= l max|v|. With the final multiply:
//   tol = max_j |v_j| (2 max_j |ds_j| + 2 (Lk + 16) u) + u |want|.
//
// The matmul path: kDefault is compared with the reference on bf16-rounded
// q, k, v, so its scores differ from the reference's only by the f32
// accumulation above; P is then rounded to bf16 (relative 2^-9 per term), which
// moves out by at most 2^-9 max|v|: tol gains 2^-8 max|v|. kHigh is compared
// on the raw inputs: bf16x3 drops a_lo b_lo and rounds the lo pieces, about
// 2^-15 |q_d k_d| per product and 2^-16 relative on P: ds gains 2^-14 scale
// sum|q_d k_d|, tol 2^-14 max|v|.
void CheckAgainstReference(const AttentionShape& s, bool causal, float q_gain,
                           WorstRatio& worst,
                           std::optional<float> scale = std::nullopt,
                           Precision precision = Precision::kHighest) {
  const int64_t hd = s.hidden(), dh = s.head_dim;
  std::vector<float> q = RandomVector(s.batch * s.q_len * hd, 1),
                     k = RandomVector(s.batch * s.kv_len * hd, 2),
                     v = RandomVector(s.batch * s.kv_len * hd, 3);
  for (float& e : q)
    e *= q_gain;  // large gains make peaked rows: the running max moves
  std::vector<float> got(q.size(), NAN), want(q.size());
  AttentionOptions opt;
  opt.causal = causal;
  opt.scale = scale;
  opt.precision = precision;
  ASSERT_TRUE(
      AttentionF32(s, q.data(), k.data(), v.data(), got.data(), opt).ok());
  if (precision == Precision::kDefault)
    for (auto* x : {&q, &k, &v})
      for (float& e : *x) e = RoundToBf16(e);
  reference::Attention(s, q.data(), k.data(), v.data(), want.data(), scale,
                       causal);
  const double extra_ds = precision == Precision::kHigh ? 0x1p-14 : 0.0;
  const double extra_tol = precision == Precision::kDefault ? 0x1p-8
                           : precision == Precision::kHigh  ? 0x1p-14
                                                            : 0.0;
  const double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(dh));
  // Bound per (b, i, h).
  std::vector<double> row_tol(s.batch * s.q_len * s.heads);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.q_len; ++i)
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t visible = causal ? std::min(s.kv_len, i + 1) : s.kv_len;
        double ds = 0, vmax = 0;
        for (int64_t j = 0; j < visible; ++j) {
          double abs_dot = 0, dot = 0;
          for (int64_t d = 0; d < dh; ++d) {
            const double qd = q[(b * s.q_len + i) * hd + h * dh + d],
                         kd = k[(b * s.kv_len + j) * hd + h * dh + d];
            abs_dot += std::fabs(qd * kd);
            dot += qd * kd;
            vmax = std::max<double>(
                vmax, std::fabs(v[(b * s.kv_len + j) * hd + h * dh + d]));
          }
          ds = std::max(ds, ((dh + 1) * kU + extra_ds) * std::fabs(sc) *
                                    abs_dot +
                                kU * std::fabs(sc * dot));
        }
        row_tol[(b * s.q_len + i) * s.heads + h] =
            vmax * (2 * ds + 2 * (s.kv_len + 16) * kU + extra_tol);
      }
  worst.Add(ExpectAllNear(
      got, want,
      [&](size_t e) { return row_tol[e / dh] + kU * std::fabs(want[e]); },
      Name(s, causal)));
}

std::vector<AttentionShape> Shapes() {
  return {
      {1, 5, 7, 1, 1},      {3, 17, 33, 2, 8},
      {1, 64, 64, 8, 40},    // exactly one query block; SD1.5's D
      {2, 65, 77, 3, 17},    // one row past a block, odd D
      {1, 130, 300, 2, 40},  // keys span two 256-key blocks, neither full
      {1, 77, 77, 12, 64},   // CLIP ViT-L text encoder (causal)
      {2, 200, 77, 8, 40},   // SD cross-attention: Lk = 77 text tokens
      {1, 1, 513, 1, 160},  // one query, three key blocks, D = 160 (SD's 1280 /
                            // 8)
      {1, 300, 100, 1, 80},  // Lq > Lk
      {1, 50, 300, 2, 24},   // Lq < Lk
      {2, 40, 512, 2, 40},   // Lk a multiple of 256: the scores' padded row stride
  };
}

TEST(AttentionTest, MatchesReferenceEveryTarget) {
  WorstRatio worst("attention");
  ForEachTarget([&](const char*) {
    for (const AttentionShape& s : Shapes())
      for (bool causal : {false, true})
        CheckAgainstReference(s, causal, 1.0f, worst);
  });
}

TEST(AttentionTest, PeakedScoresAndCustomScale) {
  WorstRatio worst("attention peaked");
  ForEachTarget([&](const char*) {
    // q * 8: scores up to ~+-50, the running max changes within and across
    // blocks.
    CheckAgainstReference({1, 70, 600, 2, 40}, false, 8.0f, worst);
    CheckAgainstReference({1, 70, 600, 2, 40}, true, 8.0f, worst);
    CheckAgainstReference({2, 33, 45, 3, 16}, false, 1.0f, worst, 0.5f);
  });
}

TEST(AttentionTest, MatmulPathMatchesReferenceEveryTarget) {
  for (Precision p : {Precision::kDefault, Precision::kHigh}) {
    WorstRatio worst(std::string("attention ") +
                     std::string(PrecisionName(p)));
    ForEachTarget([&](const char*) {
      for (const AttentionShape& s : Shapes())
        for (bool causal : {false, true})
          CheckAgainstReference(s, causal, 1.0f, worst, std::nullopt, p);
      CheckAgainstReference({1, 70, 600, 2, 40}, true, 8.0f, worst,
                            std::nullopt, p);
      CheckAgainstReference({2, 33, 45, 3, 16}, false, 1.0f, worst, 0.5f, p);
    });
  }
}

// Where vdpbf16ps runs, the bf16 provider gives the Highway provider's bits,
// as for a matmul (same pair order; the softmax is the same code).
TEST(AttentionTest, MatmulPathBf16EqualsHighwayBits) {
  if (!Avx512Bf16Active()) GTEST_SKIP() << "no active avx512bf16 path";
  const AttentionShape s{2, 150, 270, 3, 40};
  const std::vector<float> q = RandomVector(2 * 150 * 120, 4),
                           k = RandomVector(2 * 270 * 120, 5),
                           v = RandomVector(2 * 270 * 120, 6);
  for (Precision p : {Precision::kDefault, Precision::kHigh}) {
    for (bool causal : {false, true}) {
      AttentionOptions opt;
      opt.causal = causal;
      opt.precision = p;
      std::vector<float> want(q.size(), NAN), got(q.size(), NAN);
      opt.provider = Provider::kHighway;
      ASSERT_TRUE(
          AttentionF32(s, q.data(), k.data(), v.data(), want.data(), opt).ok());
      opt.provider = Provider::kBf16;
      ASSERT_TRUE(
          AttentionF32(s, q.data(), k.data(), v.data(), got.data(), opt).ok());
      ExpectBitIdentical(want, got,
                         std::string(PrecisionName(p)) +
                             (causal ? " causal" : ""));
    }
  }
}

TEST(AttentionTest, LongSequenceNotABlockMultiple) {
  WorstRatio worst("attention long");
  CheckAgainstReference({1, 1100, 1100, 1, 40}, false, 2.0f, worst);
  CheckAgainstReference({1, 1100, 1100, 1, 40}, true, 2.0f, worst);
}

TEST(AttentionTest, BitIdenticalForEveryThreadCount) {
  const AttentionShape s{2, 150, 270, 3, 40};
  const std::vector<float> q = RandomVector(2 * 150 * 120, 4),
                           k = RandomVector(2 * 270 * 120, 5),
                           v = RandomVector(2 * 270 * 120, 6);
  for (int c = 0; c < 6; ++c) {
    const bool causal = c % 2 == 1;
    const Precision precision = static_cast<Precision>(c / 2);
    AttentionOptions opt;
    opt.causal = causal;
    opt.precision = precision;
    std::vector<float> one(q.size());
    ASSERT_TRUE(
        AttentionF32(s, q.data(), k.data(), v.data(), one.data(), opt).ok());
    for (int threads : {2, 4, 0}) {
      opt.num_threads = threads;
      std::vector<float> many(q.size(), NAN);
      ASSERT_TRUE(
          AttentionF32(s, q.data(), k.data(), v.data(), many.data(), opt).ok());
      ExpectBitIdentical(one, many,
                         "threads " + std::to_string(threads) + " " +
                             std::string(PrecisionName(precision)) +
                             (causal ? " causal" : ""));
    }
  }
}

TEST(AttentionTest, RejectsBadShapesAndCosts) {
  float dummy = 0;
  EXPECT_EQ(
      AttentionF32({1, 0, 4, 1, 8}, &dummy, &dummy, &dummy, &dummy).code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(
      AttentionF32({1, 4, 4, 0, 8}, &dummy, &dummy, &dummy, &dummy).code(),
      StatusCode::kInvalidArgument);
  const OpCost c = AttentionCost({1, 4096, 4096, 8, 40});
  const double scores = 8.0 * 4096 * 4096;
  EXPECT_DOUBLE_EQ(c.flops, 4 * scores * 40 + 4 * scores + 8.0 * 4096 * 40);
  EXPECT_DOUBLE_EQ(c.transcendentals, scores);
  EXPECT_DOUBLE_EQ(c.bytes_read, 4.0 * 3 * 4096 * 320);
}

}  // namespace
}  // namespace tpumesh::kernels
