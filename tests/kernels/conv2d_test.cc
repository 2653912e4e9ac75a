// Conv2dF32 against reference::Conv2d on every Highway target, with both the
// default (BLIS) GEMM and a caller-supplied one; Conv2dPacked (the weight
// packed once for the matmul kernel) for every provider and precision on
// every Highway target, against a reference of the MXU's arithmetic, and its
// kBf16 implicit GEMM against the kHighway path bit for bit.
#include "kernels/conv2d.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/bf16.h"
#include "kernels/matmul.h"
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

// Shapes both conv forms are swept over: channels off the vector width (3,
// 17, 33), odd H/W, batch 1, 2 and 3, stride 2 on odd sizes, 1x1 direct and
// im2col, asymmetric padding (the VAE's downsample pads (0, 1, 0, 1)), a 1x1
// image, a general stride-3 5x5 kernel and a 1x3 one.
std::vector<Conv2dShape> CommonShapes() {
  return {
      MakeConv2dShape(1, 3, 7, 9, 17, 3, 1, 1),
      MakeConv2dShape(3, 17, 5, 5, 33, 3, 2, 1),
      MakeConv2dShape(1, 33, 11, 13, 16, 3, 2, 1),
      MakeConv2dShape(2, 16, 8, 8, 3, 1, 1, 0),
      MakeConv2dShape(1, 5, 9, 7, 4, 1, 2, 0),
      MakeConv2dShape(1, 4, 1, 1, 5, 3, 1, 1),
      Pads(MakeConv2dShape(1, 8, 9, 9, 8, 3, 2, 0), 0, 0, 1, 1),
      Kernel(MakeConv2dShape(1, 3, 13, 17, 4, 5, 3, 2), 5, 5),
      Kernel(MakeConv2dShape(1, 2, 6, 37, 3, 1, 1, 0), 1, 3),
  };
}

std::vector<Conv2dShape> Concat(std::vector<Conv2dShape> a, const std::vector<Conv2dShape>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Conv2dF32: the common shapes and several row chunks (Wo = 70 and 65 with
// 512-pixel chunks).
std::vector<Conv2dShape> Shapes() {
  return Concat(CommonShapes(), {
                                    MakeConv2dShape(1, 4, 20, 70, 6, 3, 1, 1),
                                    MakeConv2dShape(2, 3, 41, 130, 5, 3, 2, 1),
                                });
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

// ------------------------------------------------------------ Conv2dPacked

struct ProviderPrecision {
  Provider provider;
  Precision precision;
};

std::string Name(const ProviderPrecision& p) {
  return std::string(ProviderName(p.provider)) + "/" +
         std::string(PrecisionName(p.precision));
}

// Every provider with every precision it implements; kBf16 only where the
// CPU has AVX512_BF16.
std::vector<ProviderPrecision> PackedConfigs() {
  std::vector<ProviderPrecision> v;
  if (Avx512Bf16Active()) {
    v.push_back({Provider::kBf16, Precision::kDefault});
    v.push_back({Provider::kBf16, Precision::kHigh});
  }
  for (Provider p : {Provider::kHighway, Provider::kBlis})
    for (Precision q :
         {Precision::kDefault, Precision::kHigh, Precision::kHighest})
      v.push_back({p, q});
  return v;
}

// Conv2dPacked: the common shapes and the kernel's edges: C_in 1, 3, 17,
// 33, 70, 320 (off and on the 32-channel transposition blocks and the
// 16-lane vectors), K odd (63, 9) and K over one 512-k block (630, 2880: 2
// and 6 K blocks); C_out 1..45 and 1030 (two 1024-column blocks); output
// pixels per image not a multiple of the 14-row micro-tile, so tiles span
// two images (batch 3); 420 pixels (three 168-row blocks).
std::vector<Conv2dShape> PackedShapes() {
  return Concat(CommonShapes(), {
                                    MakeConv2dShape(1, 70, 12, 15, 45, 3, 1, 1),
                                    MakeConv2dShape(1, 1, 5, 4, 2, 3, 1, 1),
                                    MakeConv2dShape(3, 7, 6, 5, 40, 3, 1, 1),
                                    MakeConv2dShape(1, 19, 20, 21, 21, 3, 1, 1),
                                    MakeConv2dShape(1, 320, 6, 6, 36, 3, 1, 1),
                                    MakeConv2dShape(1, 4, 4, 4, 1030, 1, 1, 0),
                                });
}

StatusOr<PackedConv2dWeight> PackFor(const Conv2dShape& s,
                                     const std::vector<float>& w,
                                     const ProviderPrecision& p) {
  return PackedConv2dWeight::Pack(s.out_channels, s.in_channels, s.kernel_h,
                                  s.kernel_w, w.data(),
                                  {p.precision, p.provider});
}

// Runs Conv2dPacked; y starts as NaN so an element never written shows.
std::vector<float> RunPacked(const Conv2dShape& s, const Data& d,
                             const PackedConv2dWeight& w, bool with_bias,
                             int threads = 1) {
  std::vector<float> y(OutSize(s), NAN);
  const Status st = Conv2dPacked(s, d.x.data(), w,
                                 with_bias ? d.b.data() : nullptr, y.data(),
                                 threads);
  EXPECT_TRUE(st.ok()) << st.message();
  return y;
}

// The MXU's terms, summed exactly (double) with their magnitudes: per (x, w)
// product bf16(x) bf16(w) at kDefault; x_hi w_hi + x_cross w_lo + x_lo
// w_cross at kHigh (cross = hi, 0 for Inf/NaN, as matmul_internal's split);
// x w at kHighest.
struct ConvReference {
  std::vector<double> value, magnitude;
};

ConvReference MxuReference(const Conv2dShape& s, const Data& d,
                           Precision precision, bool with_bias) {
  auto split = [](float v, double* hi, double* lo, double* cross) {
    const float h = RoundToBf16(v);
    *hi = h;
    *lo = std::isfinite(h) ? RoundToBf16(v - h) : 0.0f;
    *cross = std::isfinite(h) ? h : 0.0f;
  };
  const int64_t ho = s.out_height(), wo = s.out_width();
  ConvReference r;
  r.value.assign(OutSize(s), 0.0);
  r.magnitude.assign(OutSize(s), 0.0);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t co = 0; co < s.out_channels; ++co)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          double sum = 0, mag = 0;
          for (int64_t ci = 0; ci < s.in_channels; ++ci)
            for (int64_t dy = 0; dy < s.kernel_h; ++dy) {
              const int64_t iy = oy * s.stride + dy - s.pad_top;
              if (iy < 0 || iy >= s.height) continue;
              for (int64_t dx = 0; dx < s.kernel_w; ++dx) {
                const int64_t ix = ox * s.stride + dx - s.pad_left;
                if (ix < 0 || ix >= s.width) continue;
                const float a =
                    d.x[((n * s.in_channels + ci) * s.height + iy) * s.width +
                        ix];
                const float b =
                    d.w[((co * s.in_channels + ci) * s.kernel_h + dy) *
                            s.kernel_w +
                        dx];
                switch (precision) {
                  case Precision::kDefault: {
                    const double t =
                        double{RoundToBf16(a)} * double{RoundToBf16(b)};
                    sum += t;
                    mag += std::fabs(t);
                    break;
                  }
                  case Precision::kHigh: {
                    double ah, al, ac, bh, bl, bc;
                    split(a, &ah, &al, &ac);
                    split(b, &bh, &bl, &bc);
                    const double t0 = ah * bh, t1 = ac * bl, t2 = al * bc;
                    sum += t0 + t1 + t2;
                    mag += std::fabs(t0) + std::fabs(t1) + std::fabs(t2);
                    break;
                  }
                  case Precision::kHighest: {
                    const double t = double{a} * double{b};
                    sum += t;
                    mag += std::fabs(t);
                    break;
                  }
                }
              }
            }
          const size_t i = ((n * s.out_channels + co) * ho + oy) * wo + ox;
          const double bias = with_bias ? d.b[co] : 0.0;
          r.value[i] = sum + bias;
          r.magnitude[i] = mag + std::fabs(bias);
        }
  return r;
}

// Small-integer data is exact at every precision (bf16 holds integers up to
// 256, kHigh's lo pieces are 0, every partial sum is an integer below 2^24),
// so every provider must match the plain reference exactly: tolerance 0.
TEST(Conv2dPackedTest, ExactOnIntegersEveryProviderAndTarget) {
  ForEachTarget([](const char*) {
    for (const ProviderPrecision& p : PackedConfigs()) {
      for (const Conv2dShape& s : PackedShapes()) {
        const std::string what = Name(p) + " " + Name(s);
        SCOPED_TRACE(what);
        const Data d = MakeData(s, /*integers=*/true, 7);
        StatusOr<PackedConv2dWeight> w = PackFor(s, d.w, p);
        ASSERT_TRUE(w.ok()) << w.status().message();
        std::vector<float> want(OutSize(s));
        reference::Conv2d(s, d.x.data(), d.w.data(), d.b.data(), want.data());
        ExpectAllNear(RunPacked(s, d, *w, true), want, 0.0, what);
        reference::Conv2d(s, d.x.data(), d.w.data(), nullptr, want.data());
        ExpectAllNear(RunPacked(s, d, *w, false), want, 0.0, what + " no bias");
      }
    }
  });
}

// Random floats against the MXU reference. An f32 chain of T additions (T =
// K, 3K at kHigh) errs by at most T u S, S = sum |terms| (recursive
// summation); kHighest also rounds each product and every path rounds the
// bias add once: allowed (T + 3) u S + u |want| + 1e-30.
TEST(Conv2dPackedTest, RandomFloatsWithinSummationBoundEveryProviderAndTarget) {
  WorstRatio worst("conv2d packed");
  std::vector<std::vector<ConvReference>> refs;  // [shape][precision]
  for (const Conv2dShape& s : PackedShapes()) {
    const Data d = MakeData(s, /*integers=*/false, 11);
    refs.emplace_back();
    for (Precision q :
         {Precision::kDefault, Precision::kHigh, Precision::kHighest})
      refs.back().push_back(MxuReference(s, d, q, true));
  }
  ForEachTarget([&](const char*) {
    for (const ProviderPrecision& p : PackedConfigs()) {
      const std::vector<Conv2dShape> shapes = PackedShapes();
      for (size_t si = 0; si < shapes.size(); ++si) {
        const Conv2dShape& s = shapes[si];
        const std::string what = Name(p) + " " + Name(s);
        SCOPED_TRACE(what);
        const Data d = MakeData(s, /*integers=*/false, 11);
        StatusOr<PackedConv2dWeight> w = PackFor(s, d.w, p);
        ASSERT_TRUE(w.ok()) << w.status().message();
        const ConvReference& ref = refs[si][static_cast<int>(p.precision)];
        std::vector<float> want(ref.value.begin(), ref.value.end());
        const double terms = static_cast<double>(
            p.precision == Precision::kHigh ? 3 * s.gemm_k() : s.gemm_k());
        worst.Add(ExpectAllNear(
            RunPacked(s, d, *w, true), want,
            [&](size_t i) {
              return (terms + 3) * kU * ref.magnitude[i] +
                     kU * std::fabs(ref.value[i]) + 1e-30;
            },
            what));
      }
    }
  });
}

// kBf16's implicit GEMM and kHighway's gathered matmul add the same products
// in the same order: the same bits, on every Highway target (denormals
// aside: none in this data).
TEST(Conv2dPackedTest, Bf16EqualsHighwayBitForBitEveryTarget) {
  if (!Avx512Bf16Active()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  ForEachTarget([](const char*) {
    for (Precision q : {Precision::kDefault, Precision::kHigh}) {
      for (const Conv2dShape& s : PackedShapes()) {
        const std::string what =
            std::string(PrecisionName(q)) + " " + Name(s);
        SCOPED_TRACE(what);
        const Data d = MakeData(s, /*integers=*/false, 13);
        StatusOr<PackedConv2dWeight> wb =
            PackFor(s, d.w, {Provider::kBf16, q});
        StatusOr<PackedConv2dWeight> wh =
            PackFor(s, d.w, {Provider::kHighway, q});
        ASSERT_TRUE(wb.ok() && wh.ok());
        for (bool with_bias : {true, false}) {
          ExpectBitIdentical(RunPacked(s, d, *wb, with_bias),
                             RunPacked(s, d, *wh, with_bias),
                             what + (with_bias ? "" : " no bias"));
        }
      }
    }
  });
}

// K is never split and every element is one chain: the same bits for 1, 2,
// 3 and 0 (the caller's arena) threads, whatever grid each count picks.
TEST(Conv2dPackedTest, BitIdenticalForEveryThreadCount) {
  for (const ProviderPrecision& p : PackedConfigs()) {
    for (const Conv2dShape& s :
         {MakeConv2dShape(2, 19, 37, 45, 21, 3, 1, 1),
          MakeConv2dShape(3, 7, 6, 5, 70, 3, 1, 1),
          MakeConv2dShape(1, 33, 8, 8, 1030, 3, 1, 1)}) {
      const std::string what = Name(p) + " " + Name(s);
      const Data d = MakeData(s, false, 3);
      StatusOr<PackedConv2dWeight> w = PackFor(s, d.w, p);
      ASSERT_TRUE(w.ok()) << w.status().message();
      const std::vector<float> one = RunPacked(s, d, *w, true, 1);
      for (int threads : {2, 3, 0}) {
        ExpectBitIdentical(one, RunPacked(s, d, *w, true, threads),
                           what + " threads " + std::to_string(threads));
      }
    }
  }
}

// A NaN in one input pixel reaches exactly the outputs whose window holds
// it, in every output channel, and nothing else (an indexing check with
// teeth: every gathered offset and transposed store is exercised).
TEST(Conv2dPackedTest, NaNReachesExactlyItsWindow) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const ProviderPrecision& p : PackedConfigs()) {
    for (const Conv2dShape& s : {MakeConv2dShape(3, 7, 6, 5, 40, 3, 1, 1),
                                 MakeConv2dShape(1, 33, 11, 13, 16, 3, 2, 1)}) {
      const std::string what = Name(p) + " " + Name(s);
      Data d = MakeData(s, false, 5);
      const int64_t n0 = s.batch - 1, c0 = s.in_channels / 2, iy0 = 3, ix0 = 2;
      d.x[((n0 * s.in_channels + c0) * s.height + iy0) * s.width + ix0] = nan;
      StatusOr<PackedConv2dWeight> w = PackFor(s, d.w, p);
      ASSERT_TRUE(w.ok());
      const std::vector<float> y = RunPacked(s, d, *w, true);
      const int64_t ho = s.out_height(), wo = s.out_width();
      int failures = 0;
      for (int64_t n = 0; n < s.batch; ++n)
        for (int64_t co = 0; co < s.out_channels; ++co)
          for (int64_t oy = 0; oy < ho; ++oy)
            for (int64_t ox = 0; ox < wo; ++ox) {
              const int64_t dy = iy0 + s.pad_top - oy * s.stride;
              const int64_t dx = ix0 + s.pad_left - ox * s.stride;
              const bool in_window = n == n0 && dy >= 0 && dy < s.kernel_h &&
                                     dx >= 0 && dx < s.kernel_w;
              const size_t i = ((n * s.out_channels + co) * ho + oy) * wo + ox;
              if (std::isnan(y[i]) != in_window && ++failures <= 5) {
                ADD_FAILURE() << what << "[" << i << "] (n " << n << ", c "
                              << co << ", y " << oy << ", x " << ox
                              << "): got " << y[i] << ", want "
                              << (in_window ? "NaN" : "a number");
              }
            }
    }
  }
}

TEST(Conv2dPackedTest, RejectsBadArgumentsBeforeCompute) {
  const Conv2dShape s = MakeConv2dShape(1, 3, 8, 8, 4, 3, 1, 1);
  const Data d = MakeData(s, true, 1);
  StatusOr<PackedConv2dWeight> w =
      PackFor(s, d.w, {Provider::kHighway, Precision::kDefault});
  ASSERT_TRUE(w.ok());
  std::vector<float> y(OutSize(s));
  auto expect = [&](const Status& st, StatusCode code, const char* text) {
    EXPECT_EQ(st.code(), code) << st.message();
    EXPECT_NE(st.message().find(text), std::string::npos) << st.message();
  };
  Conv2dShape other = MakeConv2dShape(1, 4, 8, 8, 4, 3, 1, 1);
  expect(Conv2dPacked(other, d.x.data(), *w, nullptr, y.data()),
         StatusCode::kInvalidArgument, "does not fit");
  other = MakeConv2dShape(1, 3, 8, 8, 4, 1, 1, 0);
  expect(Conv2dPacked(other, d.x.data(), *w, nullptr, y.data()),
         StatusCode::kInvalidArgument, "does not fit");
  expect(Conv2dPacked(MakeConv2dShape(1, 3, 8, 8, 4, 3, 0, 1), d.x.data(), *w,
                      nullptr, y.data()),
         StatusCode::kInvalidArgument, "stride");
  expect(Conv2dPacked(s, nullptr, *w, nullptr, y.data()),
         StatusCode::kInvalidArgument, "x is null");
  expect(Conv2dPacked(s, d.x.data(), *w, nullptr, nullptr),
         StatusCode::kInvalidArgument, "y is null");
  expect(Conv2dPacked(s, d.x.data(), PackedConv2dWeight(), nullptr, y.data()),
         StatusCode::kInvalidArgument, "empty");
  // The caller-packed W^T form checks K and C_out against the shape.
  expect(Conv2dPacked(MakeConv2dShape(1, 3, 8, 8, 4, 1, 1, 0), d.x.data(),
                      w->matrix(), nullptr, y.data()),
         StatusCode::kInvalidArgument, "W^T [27, 4] does not fit");
  expect(Conv2dPacked(MakeConv2dShape(1, 3, 8, 8, 5, 3, 1, 1), d.x.data(),
                      w->matrix(), nullptr, y.data()),
         StatusCode::kInvalidArgument, "C_out = 5");
  expect(PackedConv2dWeight::Pack(0, 3, 3, 3, d.w.data()).status(),
         StatusCode::kInvalidArgument, "out_channels");
  expect(PackedConv2dWeight::Pack(4, 3, 3, 0, d.w.data()).status(),
         StatusCode::kInvalidArgument, "kernel_w");
  expect(PackedConv2dWeight::Pack(4, 3, 3, 3, nullptr).status(),
         StatusCode::kInvalidArgument, "w is null");
  expect(PackedConv2dWeight::Pack(4, 3, 3, 3, d.w.data(),
                                  {Precision::kHighest, Provider::kBf16})
             .status(),
         StatusCode::kUnimplemented, "bf16");
  // The weight keeps its dimensions and resolves kAuto.
  StatusOr<PackedConv2dWeight> a = PackedConv2dWeight::Pack(4, 3, 3, 3, d.w.data());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->out_channels(), 4);
  EXPECT_EQ(a->in_channels(), 3);
  EXPECT_EQ(a->kernel_h(), 3);
  EXPECT_EQ(a->kernel_w(), 3);
  EXPECT_NE(a->provider(), Provider::kAuto);
  EXPECT_EQ(a->matrix().k(), 27);
  EXPECT_EQ(a->matrix().n(), 4);
}

}  // namespace
}  // namespace tpumesh::kernels
