// Conv2dF32 against reference::Conv2d on every Highway target, with both the
// default (BLIS) GEMM and a caller-supplied one.
#include "kernels/conv2d.h"

#include <atomic>
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
using testing::RandomIntVector;
using testing::RandomVector;
using testing::WorstRatio;

Conv2dShape Pads(Conv2dShape s, int64_t top, int64_t left, int64_t bottom,
                 int64_t right) {
  s.pad_top = top;
  s.pad_left = left;
  s.pad_bottom = bottom;
  s.pad_right = right;
  return s;
}

Conv2dShape Kernel(Conv2dShape s, int64_t kh, int64_t kw) {
  s.kernel_h = kh;
  s.kernel_w = kw;
  return s;
}

std::string Name(const Conv2dShape& s) {
  return "conv " + std::to_string(s.batch) + "x" +
         std::to_string(s.in_channels) + "x" + std::to_string(s.height) + "x" +
         std::to_string(s.width) + " -> " + std::to_string(s.out_channels) +
         " k" + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) +
         " s" + std::to_string(s.stride) + " p" + std::to_string(s.pad_top) +
         std::to_string(s.pad_left) + std::to_string(s.pad_bottom) +
         std::to_string(s.pad_right);
}

// Channels off the vector width (3, 17, 33), odd H/W, batch 1 and 3, stride 2
// on odd sizes, 1x1 direct and im2col, asymmetric padding (the VAE's
// downsample pads (0, 1, 0, 1)), a 1x1 image, several row chunks (Wo = 70
// and 65 with 512-pixel chunks), and a general stride-3 5x5 kernel.
std::vector<Conv2dShape> Shapes() {
  return {
      MakeConv2dShape(1, 3, 7, 9, 17, 3, 1, 1),
      MakeConv2dShape(3, 17, 5, 5, 33, 3, 2, 1),
      MakeConv2dShape(1, 33, 11, 13, 16, 3, 2, 1),
      MakeConv2dShape(2, 16, 8, 8, 3, 1, 1, 0),
      MakeConv2dShape(1, 5, 9, 7, 4, 1, 2, 0),
      MakeConv2dShape(1, 4, 1, 1, 5, 3, 1, 1),
      Pads(MakeConv2dShape(1, 8, 9, 9, 8, 3, 2, 0), 0, 0, 1, 1),
      MakeConv2dShape(1, 4, 20, 70, 6, 3, 1, 1),
      MakeConv2dShape(2, 3, 41, 130, 5, 3, 2, 1),
      Kernel(MakeConv2dShape(1, 3, 13, 17, 4, 5, 3, 2), 5, 5),
      Kernel(MakeConv2dShape(1, 2, 6, 37, 3, 1, 1, 0), 1, 3),
  };
}

struct Data {
  std::vector<float> x, w, b;
};

Data MakeData(const Conv2dShape& s, bool integers, uint32_t seed) {
  const int64_t nx = s.batch * s.in_channels * s.height * s.width;
  const int64_t nw = s.out_channels * s.gemm_k();
  if (integers)
    return {RandomIntVector(nx, seed, 4), RandomIntVector(nw, seed + 1, 4),
            RandomIntVector(s.out_channels, seed + 2, 8)};
  return {RandomVector(nx, seed), RandomVector(nw, seed + 1),
          RandomVector(s.out_channels, seed + 2)};
}

int64_t OutSize(const Conv2dShape& s) {
  return s.batch * s.out_channels * s.out_height() * s.out_width();
}

// Small-integer data: every product and partial sum is an integer below 2^24,
// exact in f32 in any order, so the result must equal the reference exactly.
// Tolerance 0: this catches any indexing or padding mistake, however small.
TEST(Conv2dTest, ExactOnIntegersEveryTarget) {
  ForEachTarget([](const char*) {
    for (const Conv2dShape& s : Shapes()) {
      SCOPED_TRACE(Name(s));
      const Data d = MakeData(s, /*integers=*/true, 7);
      std::vector<float> got(OutSize(s), NAN), want(OutSize(s));
      ASSERT_TRUE(
          Conv2dF32(s, d.x.data(), d.w.data(), d.b.data(), got.data()).ok());
      reference::Conv2d(s, d.x.data(), d.w.data(), d.b.data(), want.data());
      ExpectAllNear(got, want, 0.0, Name(s));
      // Without bias too.
      ASSERT_TRUE(
          Conv2dF32(s, d.x.data(), d.w.data(), nullptr, got.data()).ok());
      reference::Conv2d(s, d.x.data(), d.w.data(), nullptr, want.data());
      ExpectAllNear(got, want, 0.0, Name(s) + " no bias");
    }
  });
}

// Random floats: the f32 GEMM may sum the K products in any order. Any order
// obeys |fl(sum) - sum| <= gamma_n * sum|terms|, gamma_n = n u / (1 - n u)
// (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 3.5),
// with n = K + 1 terms (the bias add included); the reference (double, one
// final rounding) adds u |want|. sum|terms| is the reference conv of |x|, |w|,
// |b|.
TEST(Conv2dTest, RandomFloatsWithinSummationBoundEveryTarget) {
  WorstRatio worst("conv2d");
  ForEachTarget([&](const char*) {
    for (const Conv2dShape& s : Shapes()) {
      SCOPED_TRACE(Name(s));
      const Data d = MakeData(s, /*integers=*/false, 11);
      std::vector<float> got(OutSize(s), NAN), want(OutSize(s)),
          mag(OutSize(s));
      ASSERT_TRUE(
          Conv2dF32(s, d.x.data(), d.w.data(), d.b.data(), got.data()).ok());
      reference::Conv2d(s, d.x.data(), d.w.data(), d.b.data(), want.data());
      Data a = d;
      for (auto* v : {&a.x, &a.w, &a.b})
        for (float& e : *v) e = std::fabs(e);
      reference::Conv2d(s, a.x.data(), a.w.data(), a.b.data(), mag.data());
      const double n = static_cast<double>(s.gemm_k() + 1),
                   gamma = n * kU / (1 - n * kU);
      worst.Add(ExpectAllNear(
          got, want,
          [&](size_t i) {
            return gamma * mag[i] * 1.0001 + kU * std::fabs(want[i]);
          },
          Name(s)));
    }
  });
}

TEST(Conv2dTest, BitIdenticalForEveryThreadCount) {
  const Conv2dShape s =
      MakeConv2dShape(2, 19, 37, 45, 21, 3, 1, 1);  // 4 chunks per image
  const Data d = MakeData(s, false, 3);
  std::vector<float> one(OutSize(s));
  ASSERT_TRUE(
      Conv2dF32(s, d.x.data(), d.w.data(), d.b.data(), one.data(), {}, 1).ok());
  for (int threads : {2, 3, 0}) {
    std::vector<float> many(OutSize(s), NAN);
    ASSERT_TRUE(Conv2dF32(s, d.x.data(), d.w.data(), d.b.data(), many.data(),
                          {}, threads)
                    .ok());
    ExpectBitIdentical(one, many, "threads " + std::to_string(threads));
  }
}

// A caller's GEMM is used as given (the MXU kernel plugs in here): a naive
// triple loop. Its calls must cover every output element exactly once, each
// with the full K = C_in kh kw.
TEST(Conv2dTest, UsesTheCallersGemm) {
  for (const Conv2dShape& s :
       {MakeConv2dShape(2, 5, 30, 40, 7, 3, 1, 1),
        MakeConv2dShape(1, 6, 8, 8, 300, 3, 1, 1)}) {  // channel blocks too
    std::atomic<int64_t> outputs{0};
    std::atomic<int> calls{0};
    GemmFn naive = [&](int64_t m, int64_t n, int64_t k, const float* a,
                       int64_t lda, const float* b, int64_t ldb, float* c,
                       int64_t ldc) {
      EXPECT_EQ(k, s.gemm_k());
      outputs += m * n;
      ++calls;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          float acc = 0;
          for (int64_t kk = 0; kk < k; ++kk)
            acc += a[i * lda + kk] * b[kk * ldb + j];
          c[i * ldc + j] = acc;
        }
    };
    const Data d = MakeData(s, true, 5);
    std::vector<float> got(OutSize(s), NAN), want(OutSize(s));
    ASSERT_TRUE(
        Conv2dF32(s, d.x.data(), d.w.data(), d.b.data(), got.data(), naive, 2)
            .ok());
    reference::Conv2d(s, d.x.data(), d.w.data(), d.b.data(), want.data());
    ExpectAllNear(got, want, 0.0, "naive gemm " + Name(s));
    EXPECT_EQ(outputs.load(), OutSize(s));
    EXPECT_GT(calls.load(), 1);
  }
}

TEST(Conv2dTest, RejectsBadShapesBeforeCompute) {
  float dummy = 0;
  Conv2dShape s = MakeConv2dShape(1, 3, 2, 2, 4, 5, 1, 1);  // 4x4 padded < 5x5
  Status st = Conv2dF32(s, &dummy, &dummy, nullptr, &dummy);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("smaller than"), std::string::npos)
      << st.message();
  s = MakeConv2dShape(1, 3, 8, 8, 4, 3, 0, 1);
  st = Conv2dF32(s, &dummy, &dummy, nullptr, &dummy);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("stride"), std::string::npos) << st.message();
  s = MakeConv2dShape(1, 0, 8, 8, 4, 3, 1, 1);
  EXPECT_EQ(CheckConv2d(s).code(), StatusCode::kInvalidArgument);
  s = Pads(MakeConv2dShape(1, 3, 8, 8, 4, 3, 1, 1), -1, 0, 0, 0);
  EXPECT_EQ(CheckConv2d(s).code(), StatusCode::kInvalidArgument);
}

TEST(Conv2dTest, OutputSizeAndCost) {
  const Conv2dShape s = MakeConv2dShape(1, 320, 64, 64, 320, 3, 1, 1);
  EXPECT_EQ(s.out_height(), 64);
  EXPECT_EQ(s.out_width(), 64);
  const OpCost c = Conv2dCost(s);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 320 * 2880 * 4096 + 320.0 * 4096);
  EXPECT_DOUBLE_EQ(c.bytes_read, 4.0 * (320 * 4096 + 320 * 2880 + 320));
  EXPECT_DOUBLE_EQ(c.bytes_written, 4.0 * 320 * 4096);
  const Conv2dShape down = MakeConv2dShape(1, 320, 64, 64, 320, 3, 2, 1);
  EXPECT_EQ(down.out_height(), 32);
  EXPECT_EQ(
      Pads(MakeConv2dShape(1, 8, 9, 9, 8, 3, 2, 0), 0, 0, 1, 1).out_height(),
      4);
}

}  // namespace
}  // namespace tpumesh::kernels
