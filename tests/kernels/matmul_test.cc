// kernels/matmul.h: every provider and precision against a scalar reference,
// the two MXU providers against each other bit for bit, every compiled
// Highway target, tile-edge shape sweeps, threads, batches, errors.
//
// Reference and tolerance. The reference sums, in double, the exact products
// of the operands the MXU sees: bf16(a)*bf16(b) (kDefault), a_hi*b_hi +
// a_hi*b_lo + a_lo*b_hi (kHigh) or a*b (kHighest); it also sums their
// magnitudes, S = sum |term|. A provider adds T terms in f32 in some order
// (T = K, 3K for kHigh), each addition rounding with relative error at most
// u = 2^-24, so |got - want| <= T*u*S (the classical recursive-summation bound
// gamma_T*S, gamma_T = T*u/(1 - T*u)); kHighest also rounds each product
// (one more u per term). The test allows (T + 2)*u*S + 1e-30. That bound is
// a worst case; the bits of kBf16 and kHighway are also compared exactly
// (they add the same terms in the same order), which is the sharp check.
#include "kernels/matmul.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "hwy/tests/hwy_gtest.h"
#include "kernels/bf16.h"
#include "kernels/matmul_cost.h"
#include "kernels/matmul_internal.h"
#include "kernels/peak.h"

namespace tpumesh::kernels {
namespace {

constexpr double kU = 1.0 / (1 << 24);
const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Shape {
  int64_t m, n, k;
};

std::string ShapeName(const Shape& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

// Around the tiles and blocks. kBf16: 14 x 32 micro-tiles, K blocks of 256
// pairs (512 k; kHigh: 255 expanded pairs = 170 k), 168 rows per A block,
// 1024 columns per column block. kHighway: 12 (AVX3) or 4 rows x 2 vectors,
// K blocks of 128 pairs (256 k; kHigh 126 = 84 k), 192 or 64 rows per block;
// its kHighest kernel blocks K by 128. The MXU's 128 x 128 weight tile: K
// and N of 127, 128 and 129.
const std::vector<Shape>& EdgeShapes() {
  static const std::vector<Shape> shapes = {
      {1, 1, 1},       {1, 32, 256},    {1, 33, 257},   {3, 5, 7},       {2, 3, 2},
      {13, 31, 255},   {14, 32, 256},   {15, 33, 257},  {12, 16, 84},    {11, 47, 85},
      {29, 64, 512},   {28, 96, 513},   {4, 8, 86},     {5, 17, 127},    {77, 100, 129},
      {6, 1, 300},     {1, 700, 3},     {40, 65, 1},    {400, 40, 40},   {169, 70, 170},
      {168, 31, 171},  {17, 45, 511},   {9, 20, 1025},  {3, 1057, 20},   {200, 33, 600},
      {128, 128, 128}, {31, 127, 128},  {7, 129, 128},
  };
  return shapes;
}

// A prime at least n + 1, so every leading dimension has a gap and no power-of-two stride.
int64_t PrimeAbove(int64_t n) {
  for (int64_t p = n + 1;; ++p) {
    bool prime = p > 1;
    for (int64_t d = 2; d * d <= p && prime; ++d) prime = p % d != 0;
    if (prime) return p;
  }
}

// rows x cols in a buffer of leading dimension ld; the gaps hold NaN so a
// kernel that reads past a row would poison its result.
std::vector<float> RandomMatrix(int64_t rows, int64_t cols, int64_t ld, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(std::max<int64_t>(rows * ld, 1)), kNaN);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) v[i * ld + j] = dist(rng);
  return v;
}

std::vector<bf16> ToBf16(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = F32ToBf16(v[i]);
  return out;
}

struct Reference {
  std::vector<double> value, magnitude;  // [m x n], dense
};

Reference ScalarReference(const Shape& s, const float* a, int64_t lda, const float* b, int64_t ldb,
                          Precision precision) {
  Reference ref;
  ref.value.assign(s.m * s.n, 0.0);
  ref.magnitude.assign(s.m * s.n, 0.0);
  // kHigh's pieces; for Inf/NaN hi, lo and the cross copy are 0 (matmul.h).
  auto split = [](float x, double* hi, double* lo, double* cross) {
    const float h = RoundToBf16(x);
    *hi = h;
    *lo = std::isfinite(h) ? RoundToBf16(x - h) : 0.0f;
    *cross = std::isfinite(h) ? h : 0.0f;
  };
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      double sum = 0, mag = 0;
      for (int64_t k = 0; k < s.k; ++k) {
        const float x = a[i * lda + k], y = b[k * ldb + j];
        switch (precision) {
          case Precision::kDefault: {
            const double t = double{RoundToBf16(x)} * double{RoundToBf16(y)};
            sum += t;
            mag += std::fabs(t);
            break;
          }
          case Precision::kHigh: {
            double xh, xl, xc, yh, yl, yc;
            split(x, &xh, &xl, &xc);
            split(y, &yh, &yl, &yc);
            const double t0 = xh * yh, t1 = xc * yl, t2 = xl * yc;
            sum += t0 + t1 + t2;
            mag += std::fabs(t0) + std::fabs(t1) + std::fabs(t2);
            break;
          }
          case Precision::kHighest: {
            const double t = double{x} * double{y};
            sum += t;
            mag += std::fabs(t);
            break;
          }
        }
      }
      ref.value[i * s.n + j] = sum;
      ref.magnitude[i * s.n + j] = mag;
    }
  }
  return ref;
}

// Compares C (ldc) with the reference; prints the first failures as
// "(i, j): got G, want W, |diff| D > tol T". Returns the number of failures.
int ExpectMatchesReference(const std::vector<float>& c, int64_t ldc, const Shape& s,
                           const Reference& ref, Precision precision, const std::string& what) {
  const double terms = static_cast<double>(precision == Precision::kHigh ? 3 * s.k : s.k);
  int failures = 0;
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      const double got = c[i * ldc + j], want = ref.value[i * s.n + j];
      const double tol = (terms + 2) * kU * ref.magnitude[i * s.n + j] + 1e-30;
      const double diff = std::fabs(got - want);
      if (!(diff <= tol) && ++failures <= 5) {
        ADD_FAILURE() << what << " C(" << i << ", " << j << "): got " << got << ", want " << want
                      << ", |diff| " << diff << " > tol " << tol;
      }
    }
  }
  if (failures > 5) ADD_FAILURE() << what << ": " << failures << " elements out of tolerance";
  return failures;
}

// Columns [n, ldc) of every row of C must still hold `sentinel`.
void ExpectGapsUntouched(const std::vector<float>& c, int64_t m, int64_t n, int64_t ldc,
                         float sentinel, const std::string& what) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = n; j < ldc; ++j) {
      if (std::bit_cast<uint32_t>(c[i * ldc + j]) != std::bit_cast<uint32_t>(sentinel)) {
        ADD_FAILURE() << what << ": wrote C(" << i << ", " << j << ") past n = " << n;
        return;
      }
    }
  }
}

void ExpectBitIdentical(const std::vector<float>& got, const std::vector<float>& want, int64_t m,
                        int64_t n, int64_t ld, const std::string& what) {
  int failures = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const float g = got[i * ld + j], w = want[i * ld + j];
      if (std::bit_cast<uint32_t>(g) != std::bit_cast<uint32_t>(w) && ++failures <= 5) {
        ADD_FAILURE() << what << " C(" << i << ", " << j << "): got " << g << " (0x" << std::hex
                      << std::bit_cast<uint32_t>(g) << "), want " << w << " (0x"
                      << std::bit_cast<uint32_t>(w) << std::dec << ")";
      }
    }
  }
  if (failures > 5) ADD_FAILURE() << what << ": " << failures << " elements differ";
}

// One product through the packed API; C is prefilled with NaN (beta = 0
// must never read it) except its gaps, which hold a sentinel.
struct MatmulRun {
  std::vector<float> c;
  int64_t ldc = 0;
  Status status;
};

constexpr float kSentinel = -1234.5f;

template <typename T>
MatmulRun RunMatmul(const Shape& s, const std::vector<T>& a, int64_t lda, const std::vector<T>& b,
              int64_t ldb, int64_t ldc, MatmulOptions options, int threads = 1) {
  MatmulRun run;
  run.ldc = ldc;
  run.c.assign(static_cast<size_t>(std::max<int64_t>(s.m * ldc, 1)), kSentinel);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) run.c[i * ldc + j] = kNaN;
  StatusOr<PackedMatrix> packed = PackedMatrix::Pack(s.k, s.n, b.data(), ldb, options);
  if (!packed.ok()) {
    run.status = packed.status();
    return run;
  }
  run.status = Matmul(s.m, a.data(), lda, *packed, run.c.data(), ldc, threads);
  return run;
}

bool HaveBf16() { return Avx512Bf16Active(); }

}  // namespace

// gtest prints parameters with these (found by ADL).
void PrintTo(Provider p, std::ostream* os) { *os << ProviderName(p); }
void PrintTo(Precision p, std::ostream* os) { *os << PrecisionName(p); }

namespace {

// ------------------------------------------------- providers vs the reference

using ProviderPrecision = std::tuple<Provider, Precision>;

class MatmulProviderTest : public ::testing::TestWithParam<ProviderPrecision> {
 protected:
  void SetUp() override {
    if (std::get<0>(GetParam()) == Provider::kBf16 && !HaveBf16()) {
      GTEST_SKIP() << "no AVX512_BF16 on this CPU";
    }
  }
};

TEST_P(MatmulProviderTest, F32InputsMatchReferenceAroundTileEdges) {
  const auto [provider, precision] = GetParam();
  const MatmulOptions options{precision, provider};
  uint32_t seed = 1;
  for (const Shape& s : EdgeShapes()) {
    const int64_t lda = PrimeAbove(s.k), ldb = PrimeAbove(s.n), ldc = PrimeAbove(s.n + 2);
    const std::vector<float> a = RandomMatrix(s.m, s.k, lda, seed++);
    const std::vector<float> b = RandomMatrix(s.k, s.n, ldb, seed++);
    const std::string what = std::string(ProviderName(provider)) + "/" +
                             std::string(PrecisionName(precision)) + " " + ShapeName(s);
    const MatmulRun run = RunMatmul(s, a, lda, b, ldb, ldc, options);
    ASSERT_TRUE(run.status.ok()) << what << ": " << run.status.ToString();
    const Reference ref = ScalarReference(s, a.data(), lda, b.data(), ldb, precision);
    ExpectMatchesReference(run.c, ldc, s, ref, precision, what);
    ExpectGapsUntouched(run.c, s.m, s.n, ldc, kSentinel, what);
  }
}

TEST_P(MatmulProviderTest, Bf16InputsEqualTheirF32Values) {
  // bf16 inputs are exact in f32, so the bf16 entry points must give the bits
  // the f32 entry points give for the same values.
  const auto [provider, precision] = GetParam();
  const MatmulOptions options{precision, provider};
  for (const Shape& s : {Shape{15, 33, 257}, Shape{1, 40, 85}, Shape{29, 64, 3}}) {
    const int64_t lda = s.k + 3, ldb = s.n + 1, ldc = s.n;
    std::vector<bf16> a16 = ToBf16(RandomMatrix(s.m, s.k, lda, 7));
    std::vector<bf16> b16 = ToBf16(RandomMatrix(s.k, s.n, ldb, 8));
    std::vector<float> a32(a16.size()), b32(b16.size());
    Bf16ToF32(a16.data(), a32.data(), a16.size());
    Bf16ToF32(b16.data(), b32.data(), b16.size());
    const MatmulRun r16 = RunMatmul(s, a16, lda, b16, ldb, ldc, options);
    const MatmulRun r32 = RunMatmul(s, a32, lda, b32, ldb, ldc, options);
    ASSERT_TRUE(r16.status.ok()) << r16.status.ToString();
    ASSERT_TRUE(r32.status.ok()) << r32.status.ToString();
    ExpectBitIdentical(r16.c, r32.c, s.m, s.n, ldc, "bf16 vs f32 inputs " + ShapeName(s));
    // Mixed: bf16 A with an f32-packed B.
    StatusOr<PackedMatrix> packed = PackedMatrix::Pack(s.k, s.n, b32.data(), ldb, options);
    ASSERT_TRUE(packed.ok());
    std::vector<float> c(s.m * ldc, kNaN);
    ASSERT_TRUE(Matmul(s.m, a16.data(), lda, *packed, c.data(), ldc).ok());
    ExpectBitIdentical(c, r32.c, s.m, s.n, ldc, "bf16 A, f32 B " + ShapeName(s));
  }
}

TEST_P(MatmulProviderTest, BitIdenticalForEveryThreadCount) {
  const auto [provider, precision] = GetParam();
  const MatmulOptions options{precision, provider};
  // Tall (row blocks), short and wide (column blocks), and one with a batch.
  // Products below 4 MFLOP run on one thread, so every shape here is above.
  for (const Shape& s : {Shape{700, 70, 300}, Shape{7, 1500, 301}, Shape{130, 130, 130}}) {
    const int64_t lda = s.k + 1, ldb = s.n, ldc = s.n + 3;
    const std::vector<float> a = RandomMatrix(s.m, s.k, lda, 11);
    const std::vector<float> b = RandomMatrix(s.k, s.n, ldb, 12);
    const MatmulRun one = RunMatmul(s, a, lda, b, ldb, ldc, options, 1);
    ASSERT_TRUE(one.status.ok()) << one.status.ToString();
    for (int threads : {2, 3, 0}) {
      const MatmulRun many = RunMatmul(s, a, lda, b, ldb, ldc, options, threads);
      ASSERT_TRUE(many.status.ok()) << many.status.ToString();
      ExpectBitIdentical(many.c, one.c, s.m, s.n, ldc,
                         ShapeName(s) + " threads " + std::to_string(threads) + " vs 1");
    }
  }
}

TEST_P(MatmulProviderTest, BatchEqualsSeparateCalls) {
  const auto [provider, precision] = GetParam();
  const MatmulOptions options{precision, provider};
  const Shape s{61, 70, 200};  // 3 x 1.7 MFLOP: threads split the batch
  const int64_t lda = s.k + 2, ldc = s.n + 1, ldb = s.n;
  const int64_t stride_a = s.m * lda + 5, stride_c = s.m * ldc + 3;
  const std::vector<float> b = RandomMatrix(s.k, s.n, ldb, 21);
  StatusOr<PackedMatrix> packed = PackedMatrix::Pack(s.k, s.n, b.data(), ldb, options);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  for (int64_t batch : {1, 3, 9}) {  // 9 >= 4 x 2 threads: the grid's batch-only path
    const std::vector<float> a = RandomMatrix(batch, stride_a, stride_a, 22);  // batch rows of stride_a
    for (int threads : {1, 2}) {
      std::vector<float> c(batch * stride_c, kNaN);
      ASSERT_TRUE(MatmulBatch(batch, s.m, a.data(), lda, stride_a, *packed, c.data(), ldc, stride_c,
                              threads)
                      .ok());
      for (int64_t x = 0; x < batch; ++x) {
        std::vector<float> one(s.m * ldc, kNaN);
        ASSERT_TRUE(Matmul(s.m, a.data() + x * stride_a, lda, *packed, one.data(), ldc).ok());
        std::vector<float> got(c.begin() + x * stride_c, c.begin() + x * stride_c + s.m * ldc);
        ExpectBitIdentical(got, one, s.m, s.n, ldc,
                           "batch " + std::to_string(batch) + " entry " + std::to_string(x) +
                               " threads " + std::to_string(threads));
      }
    }
  }
}

TEST_P(MatmulProviderTest, PackTransposedEqualsPackOfTheTranspose) {
  // B given as bt [n, k] (an X K^T product) packs to the same operand as B
  // itself: same C bits, odd K and partial panels included.
  const auto [provider, precision] = GetParam();
  const MatmulOptions options{precision, provider};
  for (const Shape& s : {Shape{15, 33, 257}, Shape{28, 40, 41}, Shape{3, 70, 1}, Shape{9, 20, 1025}}) {
    const int64_t ldbt = s.k + 5, ldc = s.n;
    const std::vector<float> a = RandomMatrix(s.m, s.k, s.k, 41);
    const std::vector<float> bt = RandomMatrix(s.n, s.k, ldbt, 42);
    std::vector<float> b(s.k * s.n);
    for (int64_t kk = 0; kk < s.k; ++kk)
      for (int64_t col = 0; col < s.n; ++col) b[kk * s.n + col] = bt[col * ldbt + kk];
    const MatmulRun want = RunMatmul(s, a, s.k, b, s.n, ldc, options);
    ASSERT_TRUE(want.status.ok());
    StatusOr<PackedMatrix> packed = PackedMatrix::PackTransposed(s.k, s.n, bt.data(), ldbt, options);
    ASSERT_TRUE(packed.ok()) << packed.status().ToString();
    EXPECT_EQ(packed->k(), s.k);
    EXPECT_EQ(packed->n(), s.n);
    std::vector<float> c(s.m * ldc, kNaN);
    ASSERT_TRUE(Matmul(s.m, a.data(), s.k, *packed, c.data(), ldc).ok());
    ExpectBitIdentical(c, want.c, s.m, s.n, ldc, "transposed pack " + ShapeName(s));
  }
  EXPECT_EQ(PackedMatrix::PackTransposed(4, 3, nullptr, 4, options).status().code(), StatusCode::kInvalidArgument);
  const float x[4] = {};
  EXPECT_EQ(PackedMatrix::PackTransposed(4, 1, x, 3, options).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(MatmulProviderTest, BiasEqualsAddingItAfter) {
  // The bias epilogue gives the bits of a separate f32 add per element, on
  // every tile edge, K block and thread split; K = 0 gives the bias alone.
  const auto [provider, precision] = GetParam();
  const MatmulOptions options{precision, provider};
  uint32_t seed = 51;
  for (const Shape& s : {Shape{15, 33, 257}, Shape{1, 40, 85}, Shape{29, 64, 3}, Shape{9, 20, 1025},
                         Shape{700, 70, 300}, Shape{7, 1500, 301}, Shape{3, 17, 0}}) {
    const int64_t ldc = s.n + 3;
    const std::vector<float> a = RandomMatrix(s.m, s.k, std::max<int64_t>(s.k, 1), seed++);
    const std::vector<float> b = RandomMatrix(s.k, s.n, s.n, seed++);
    const std::vector<float> bias = RandomMatrix(1, s.n, s.n, seed++);
    StatusOr<PackedMatrix> packed = PackedMatrix::Pack(s.k, s.n, b.data(), s.n, options);
    ASSERT_TRUE(packed.ok());
    for (int threads : {1, 2}) {
      std::vector<float> want(s.m * ldc, kSentinel), got(s.m * ldc, kSentinel);
      ASSERT_TRUE(Matmul(s.m, a.data(), std::max<int64_t>(s.k, 1), *packed, want.data(), ldc, threads).ok());
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) want[i * ldc + j] += bias[j];
      ASSERT_TRUE(
          Matmul(s.m, a.data(), std::max<int64_t>(s.k, 1), *packed, got.data(), ldc, threads, bias.data()).ok());
      ExpectBitIdentical(got, want, s.m, s.n, ldc, "bias " + ShapeName(s) + " threads " + std::to_string(threads));
      ExpectGapsUntouched(got, s.m, s.n, ldc, kSentinel, "bias " + ShapeName(s));
    }
  }
}

TEST_P(MatmulProviderTest, UnpackedConvenienceEqualsPacked) {
  const auto [provider, precision] = GetParam();
  const MatmulOptions options{precision, provider};
  const Shape s{19, 41, 99};
  const std::vector<float> a = RandomMatrix(s.m, s.k, s.k, 31);
  const std::vector<float> b = RandomMatrix(s.k, s.n, s.n, 32);
  const MatmulRun packed = RunMatmul(s, a, s.k, b, s.n, s.n, options);
  ASSERT_TRUE(packed.status.ok());
  std::vector<float> c(s.m * s.n, kNaN);
  ASSERT_TRUE(Matmul(s.m, s.n, s.k, a.data(), s.k, b.data(), s.n, c.data(), s.n, options).ok());
  ExpectBitIdentical(c, packed.c, s.m, s.n, s.n, "unpacked vs packed");
}

TEST_P(MatmulProviderTest, KZeroWritesZerosAndEmptyShapesWriteNothing) {
  const auto [provider, precision] = GetParam();
  const MatmulOptions options{precision, provider};
  const std::vector<float> a(8, 1.0f), b(8, 1.0f);
  const MatmulRun k0 = RunMatmul(Shape{3, 4, 0}, a, 1, b, 4, 5, options);
  ASSERT_TRUE(k0.status.ok()) << k0.status.ToString();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(k0.c[i * 5 + j], 0.0f) << "C(" << i << ", " << j << ")";
  ExpectGapsUntouched(k0.c, 3, 4, 5, kSentinel, "k = 0");
  const MatmulRun m0 = RunMatmul(Shape{0, 4, 2}, a, 2, b, 4, 4, options);
  EXPECT_TRUE(m0.status.ok());
  const MatmulRun n0 = RunMatmul(Shape{3, 0, 2}, a, 2, b, 1, 1, options);
  EXPECT_TRUE(n0.status.ok());
  for (float x : n0.c) EXPECT_EQ(x, kSentinel);
}

TEST_P(MatmulProviderTest, PackedMatrixSharedByConcurrentCalls) {
  const auto [provider, precision] = GetParam();
  const Shape s{50, 70, 90};
  const std::vector<float> a = RandomMatrix(s.m, s.k, s.k, 41);
  const std::vector<float> b = RandomMatrix(s.k, s.n, s.n, 42);
  StatusOr<PackedMatrix> packed = PackedMatrix::Pack(s.k, s.n, b.data(), s.n, {precision, provider});
  ASSERT_TRUE(packed.ok());
  std::vector<float> c0(s.m * s.n), c1(s.m * s.n), c2(s.m * s.n);
  ASSERT_TRUE(Matmul(s.m, a.data(), s.k, *packed, c0.data(), s.n).ok());
  std::thread t1([&] { Matmul(s.m, a.data(), s.k, *packed, c1.data(), s.n).IgnoreError(); });
  std::thread t2([&] { Matmul(s.m, a.data(), s.k, *packed, c2.data(), s.n, 2).IgnoreError(); });
  t1.join();
  t2.join();
  ExpectBitIdentical(c1, c0, s.m, s.n, s.n, "thread 1");
  ExpectBitIdentical(c2, c0, s.m, s.n, s.n, "thread 2");
}

// Every provider with every precision it implements (kBf16 at kHighest is
// Unimplemented, checked in MatmulErrorTest).
INSTANTIATE_TEST_SUITE_P(
    AllProviders, MatmulProviderTest,
    ::testing::Values(ProviderPrecision{Provider::kHighway, Precision::kDefault},
                      ProviderPrecision{Provider::kHighway, Precision::kHigh},
                      ProviderPrecision{Provider::kHighway, Precision::kHighest},
                      ProviderPrecision{Provider::kBf16, Precision::kDefault},
                      ProviderPrecision{Provider::kBf16, Precision::kHigh},
                      ProviderPrecision{Provider::kBlis, Precision::kDefault},
                      ProviderPrecision{Provider::kBlis, Precision::kHigh},
                      ProviderPrecision{Provider::kBlis, Precision::kHighest},
                      ProviderPrecision{Provider::kAuto, Precision::kDefault},
                      ProviderPrecision{Provider::kAuto, Precision::kHigh},
                      ProviderPrecision{Provider::kAuto, Precision::kHighest}),
    [](const ::testing::TestParamInfo<ProviderPrecision>& info) {
      return std::string(ProviderName(std::get<0>(info.param))) + "_" +
             std::string(PrecisionName(std::get<1>(info.param)));
    });

// ------------------------------------------ kBf16 and kHighway: same bits

TEST(MatmulBitExactTest, Bf16ProviderEqualsHighwayBitForBit) {
  if (!HaveBf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  for (Precision precision : {Precision::kDefault, Precision::kHigh}) {
    uint32_t seed = 100;
    for (const Shape& s : EdgeShapes()) {
      const int64_t lda = PrimeAbove(s.k), ldb = s.n, ldc = PrimeAbove(s.n);
      const std::vector<float> a = RandomMatrix(s.m, s.k, lda, seed++);
      const std::vector<float> b = RandomMatrix(s.k, s.n, ldb, seed++);
      const MatmulRun hw = RunMatmul(s, a, lda, b, ldb, ldc, {precision, Provider::kHighway});
      const MatmulRun raw = RunMatmul(s, a, lda, b, ldb, ldc, {precision, Provider::kBf16});
      ASSERT_TRUE(hw.status.ok() && raw.status.ok());
      ExpectBitIdentical(raw.c, hw.c, s.m, s.n, ldc,
                         std::string(PrecisionName(precision)) + " " + ShapeName(s));
    }
  }
}

TEST(MatmulBitExactTest, KHighIsCloserToF32ThanKDefault) {
  // kHigh drops only a_lo*b_lo and the rounding of x - x_hi (about 2^-16 of
  // |a*b| per term); kDefault keeps 8 bits. Check both against exact a*b.
  const Shape s{9, 13, 300};
  const std::vector<float> a = RandomMatrix(s.m, s.k, s.k, 5), b = RandomMatrix(s.k, s.n, s.n, 6);
  const Reference exact = ScalarReference(s, a.data(), s.k, b.data(), s.n, Precision::kHighest);
  for (Provider provider : {Provider::kAuto, Provider::kHighway, Provider::kBlis}) {
    const MatmulRun high = RunMatmul(s, a, s.k, b, s.n, s.n, {Precision::kHigh, provider});
    const MatmulRun def = RunMatmul(s, a, s.k, b, s.n, s.n, {Precision::kDefault, provider});
    ASSERT_TRUE(high.status.ok() && def.status.ok());
    double worst_high = 0, worst_default = 0;
    for (int64_t i = 0; i < s.m * s.n; ++i) {
      const double scale = exact.magnitude[i];
      worst_high = std::max(worst_high, std::fabs(high.c[i] - exact.value[i]) / scale);
      worst_default = std::max(worst_default, std::fabs(def.c[i] - exact.value[i]) / scale);
    }
    EXPECT_LT(worst_high, std::ldexp(1.0, -15) + 3 * s.k * kU) << ProviderName(provider);
    EXPECT_GT(worst_default, 16 * worst_high) << ProviderName(provider);
  }
}

TEST(MatmulBitExactTest, NanAndInfPropagateOnlyToTheirRow) {
  for (Provider provider : {Provider::kAuto, Provider::kHighway, Provider::kBlis}) {
    for (Precision precision : {Precision::kDefault, Precision::kHigh, Precision::kHighest}) {
      const Shape s{20, 40, 33};
      std::vector<float> a = RandomMatrix(s.m, s.k, s.k, 3), b = RandomMatrix(s.k, s.n, s.n, 4);
      a[2 * s.k + 5] = kNaN;
      a[7 * s.k + 32] = std::numeric_limits<float>::infinity();
      const MatmulRun run = RunMatmul(s, a, s.k, b, s.n, s.n, {precision, provider});
      ASSERT_TRUE(run.status.ok());
      const std::string what = std::string(ProviderName(provider)) + "/" + std::string(PrecisionName(precision));
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          const float x = run.c[i * s.n + j];
          if (i == 2) {
            EXPECT_TRUE(std::isnan(x)) << what << " C(2, " << j << ") = " << x;
          } else if (i == 7) {
            EXPECT_TRUE(std::isinf(x)) << what << " C(7, " << j << ") = " << x;
          } else {
            EXPECT_TRUE(std::isfinite(x)) << what << " C(" << i << ", " << j << ") = " << x;
          }
        }
      }
      // An Inf in B (row 5, column 3) makes column 3 infinite, nothing else.
      a = RandomMatrix(s.m, s.k, s.k, 3);
      b[5 * s.n + 3] = -std::numeric_limits<float>::infinity();
      const MatmulRun col = RunMatmul(s, a, s.k, b, s.n, s.n, {precision, provider});
      ASSERT_TRUE(col.status.ok());
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          const float x = col.c[i * s.n + j];
          EXPECT_EQ(std::isinf(x), j == 3) << what << " C(" << i << ", " << j << ") = " << x;
        }
      }
    }
  }
}

// -------------------------------------------------- every Highway target

class MatmulHighwayTargetTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(MatmulHighwayTargetTest);

TEST_P(MatmulHighwayTargetTest, MatchesReferenceAndBf16Bits) {
  EXPECT_EQ(HighwayTargetName(), hwy::TargetName(GetParam()));
  const std::vector<Shape> shapes = {{1, 1, 1},     {3, 5, 7},      {13, 31, 255}, {15, 33, 257},
                                     {11, 47, 85},  {28, 96, 513},  {5, 17, 127},  {77, 40, 129},
                                     {6, 1, 300},   {200, 24, 30},  {9, 129, 128},
                                     {193, 65, 129}, {205, 37, 383}};  // kHighest: 192-row, 128-k blocks
  uint32_t seed = 500;
  for (Precision precision : {Precision::kDefault, Precision::kHigh, Precision::kHighest}) {
    for (const Shape& s : shapes) {
      const int64_t lda = PrimeAbove(s.k), ldb = PrimeAbove(s.n), ldc = PrimeAbove(s.n);
      const std::vector<float> a = RandomMatrix(s.m, s.k, lda, seed++);
      const std::vector<float> b = RandomMatrix(s.k, s.n, ldb, seed++);
      const std::string what = std::string(hwy::TargetName(GetParam())) + " " +
                               std::string(PrecisionName(precision)) + " " + ShapeName(s);
      const MatmulRun run = RunMatmul(s, a, lda, b, ldb, ldc, {precision, Provider::kHighway});
      ASSERT_TRUE(run.status.ok()) << what;
      ExpectMatchesReference(run.c, ldc, s,
                             ScalarReference(s, a.data(), lda, b.data(), ldb, precision), precision,
                             what);
      ExpectGapsUntouched(run.c, s.m, s.n, ldc, kSentinel, what);
      if (precision != Precision::kHighest && HaveBf16()) {
        // Same terms, same order: every target gives the bits of vdpbf16ps.
        const MatmulRun raw = RunMatmul(s, a, lda, b, ldb, ldc, {precision, Provider::kBf16});
        ASSERT_TRUE(raw.status.ok());
        ExpectBitIdentical(run.c, raw.c, s.m, s.n, ldc, what + " vs bf16 provider");
      }
    }
  }
}

// kHighest is one FMA chain per C element in k order on every target with
// FMAs (AVX2's 6 x 16 tiles, AVX3's 12 x 32): the same bits on each.
TEST(MatmulHighestTest, EveryFmaTargetGivesTheSameBits) {
  const Shape s{37, 70, 301};
  const int64_t lda = PrimeAbove(s.k), ldc = PrimeAbove(s.n);
  const std::vector<float> a = RandomMatrix(s.m, s.k, lda, 61);
  const std::vector<float> b = RandomMatrix(s.k, s.n, s.n, 62);
  std::vector<float> first;
  std::string first_name;
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    if ((target & (HWY_AVX2 | HWY_AVX3 | HWY_AVX3_DL)) == 0) continue;  // no FMA below AVX2
    hwy::SetSupportedTargetsForTest(target);
    const MatmulRun run = RunMatmul(s, a, lda, b, s.n, ldc, {Precision::kHighest, Provider::kHighway});
    ASSERT_TRUE(run.status.ok());
    ASSERT_EQ(HighwayTargetName(), hwy::TargetName(target));
    if (first.empty()) {
      first = run.c;
      first_name = hwy::TargetName(target);
    } else {
      ExpectBitIdentical(run.c, first, s.m, s.n, ldc, std::string(hwy::TargetName(target)) + " vs " + first_name);
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// An A of bf16 numbers with a 0 past an odd K (attention's P) is read in
// place by the Highway driver at kDefault: the bits of the packed path.
TEST_P(MatmulHighwayTargetTest, RoundedAReadInPlaceGivesMatmulBits) {
  const std::vector<Shape> shapes = {{1, 1, 1},   {7, 40, 77},   {30, 40, 600},
                                     {13, 33, 321}, {100, 17, 64}, {6, 129, 333}};
  uint32_t seed = 900;
  for (const Shape& s : shapes) {
    const int64_t lda = PrimeAbove(s.k + 1), ldb = PrimeAbove(s.n), ldc = PrimeAbove(s.n);
    std::vector<float> a = RandomMatrix(s.m, s.k, lda, seed++);
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.k; ++j) a[i * lda + j] = RoundToBf16(a[i * lda + j]);
      a[i * lda + s.k] = 0.0f;  // the pad of an odd K's last pair
    }
    const std::vector<float> b = RandomMatrix(s.k, s.n, ldb, seed++);
    const std::string what = std::string(hwy::TargetName(GetParam())) + " " + ShapeName(s);
    StatusOr<PackedMatrix> packed =
        PackedMatrix::Pack(s.k, s.n, b.data(), ldb, {Precision::kDefault, Provider::kHighway});
    ASSERT_TRUE(packed.ok()) << what;
    std::vector<float> want(static_cast<size_t>(s.m * ldc), kSentinel), got = want;
    ASSERT_TRUE(Matmul(s.m, a.data(), lda, *packed, want.data(), ldc).ok()) << what;
    ASSERT_TRUE(matmul_internal::MatmulRoundedA(s.m, a.data(), lda, *packed, got.data(), ldc).ok()) << what;
    ExpectBitIdentical(got, want, s.m, s.n, ldc, what + " in place vs packed A");
    ExpectGapsUntouched(got, s.m, s.n, ldc, kSentinel, what);
  }
}

// --------------------------------------------------------- errors

TEST(MatmulErrorTest, ShapeChecksNameTheDimension) {
  const std::vector<float> a(64, 1.0f), b(64, 1.0f);
  std::vector<float> c(64);
  auto expect = [](const Status& s, const std::string& needle) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString() << " lacks '" << needle << "'";
  };
  expect(PackedMatrix::Pack(-1, 4, b.data(), 4).status(), "k = -1");
  expect(PackedMatrix::Pack(4, -2, b.data(), 4).status(), "n = -2");
  expect(PackedMatrix::Pack(4, 5, b.data(), 4).status(), "ldb = 4");
  expect(PackedMatrix::Pack(4, 4, static_cast<const float*>(nullptr), 4).status(), "b is null");

  StatusOr<PackedMatrix> packed = PackedMatrix::Pack(4, 6, b.data(), 6);
  ASSERT_TRUE(packed.ok());
  expect(Matmul(-3, a.data(), 4, *packed, c.data(), 6), "m = -3");
  expect(Matmul(2, a.data(), 3, *packed, c.data(), 6), "lda = 3");
  expect(Matmul(2, a.data(), 4, *packed, c.data(), 5), "ldc = 5");
  expect(Matmul(2, a.data(), 4, *packed, c.data(), 6, -1), "threads = -1");
  expect(Matmul(2, static_cast<const float*>(nullptr), 4, *packed, c.data(), 6), "a is null");
  expect(Matmul(2, a.data(), 4, *packed, nullptr, 6), "c is null");
  expect(Matmul(2, a.data(), 4, PackedMatrix(), c.data(), 6), "empty PackedMatrix");
  expect(MatmulBatch(2, 2, a.data(), 4, 8, *packed, c.data(), 6, 10), "batch_stride_c = 10");
  expect(MatmulBatch(2, 2, a.data(), 4, -8, *packed, c.data(), 6, 12), "batch_stride_a = -8");
  // C on top of A.
  std::vector<float> buf(64, 1.0f);
  expect(Matmul(2, buf.data(), 4, *packed, buf.data() + 4, 6), "overlaps");
  expect(Matmul(2, 3, 4, a.data(), 4, b.data(), 2, c.data(), 3), "ldb = 2");
}

// libblis's configuration as tpumesh reports it, on stubbed answers: Debian's
// BLIS 0.9 answers 'generic' on a CPU it does not know (Zen 5).
TEST(BlisConfigTest, ClassifiesTheConfigurationLibblisSelected) {
  const BlisConfig generic = ClassifyBlisConfig("generic", CpuPath::kAvx512Bf16);
  EXPECT_FALSE(generic.optimized);
  EXPECT_EQ(generic.name, "generic");
  EXPECT_EQ(generic.note, "reference kernels: libblis has no configuration for this CPU");
  EXPECT_FALSE(ClassifyBlisConfig("zen5", CpuPath::kAvx512).optimized);  // a name this build does not know
  EXPECT_FALSE(ClassifyBlisConfig("cortexa57", CpuPath::kBaseline).optimized);
  const BlisConfig skx = ClassifyBlisConfig("skx", CpuPath::kAmx);
  EXPECT_TRUE(skx.optimized);
  EXPECT_EQ(skx.path, CpuPath::kAvx512);
  EXPECT_EQ(skx.note, "avx512 kernels");  // amx and avx512bf16 FMAs are avx512's
  const BlisConfig zen3 = ClassifyBlisConfig("zen3", CpuPath::kAvx512Bf16);
  EXPECT_TRUE(zen3.optimized);
  EXPECT_EQ(zen3.path, CpuPath::kAvx2);
  EXPECT_EQ(zen3.note, "avx2 kernels, below this process's avx512bf16 path");
  EXPECT_EQ(ClassifyBlisConfig("haswell", CpuPath::kAvx2).note, "avx2 kernels");
  EXPECT_EQ(ClassifyBlisConfig("penryn", CpuPath::kBaseline).note, "baseline kernels");
  // This process's: the name libblis gives, classified for the active path.
  const BlisConfig& here = ProcessBlisConfig();
  EXPECT_FALSE(here.name.empty());
  EXPECT_EQ(here.note, ClassifyBlisConfig(here.name, ActiveCpuPath()).note);
}

TEST(MatmulErrorTest, UnsupportedCasesAreUnimplemented) {
  const std::vector<float> b(16, 1.0f);
  StatusOr<PackedMatrix> p =
      PackedMatrix::Pack(4, 4, b.data(), 4, {Precision::kHighest, Provider::kBf16});
  EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented) << p.status().ToString();
  if (!HaveBf16()) {
    p = PackedMatrix::Pack(4, 4, b.data(), 4, {Precision::kDefault, Provider::kBf16});
    EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented) << p.status().ToString();
  }
}

TEST(MatmulErrorTest, AutoResolvesToAProviderThatRuns) {
  // Highway's f32 kernel at highest, whatever libblis selected (matmul.h).
  EXPECT_EQ(*ResolveProvider(Provider::kAuto, Precision::kHighest), Provider::kHighway);
  // AMX first where it may run (tests/kernels/matmul_amx_test.cc).
  const Provider mxu = AmxMatmulActive()                      ? Provider::kAmx
                       : HaveBf16() && Bf16DotOutrunsFma() ? Provider::kBf16
                                                           : Provider::kHighway;
  EXPECT_EQ(*ResolveProvider(Provider::kAuto, Precision::kDefault), mxu);
  EXPECT_EQ(*ResolveProvider(Provider::kAuto, Precision::kHigh), mxu);
  const std::vector<float> b(12, 1.0f);
  StatusOr<PackedMatrix> p = PackedMatrix::Pack(3, 4, b.data(), 4);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->provider(), mxu);
  EXPECT_EQ(p->k(), 3);
  EXPECT_EQ(p->n(), 4);
  EXPECT_GT(p->size_bytes(), 0u);
}

TEST(MatmulErrorTest, AutoProviderProbeIsSaneAndFixedForTheProcess) {
  const double ratio = Bf16DotToFmaRatio();
  if (!HaveBf16()) {
    EXPECT_EQ(ratio, 0.0);
    EXPECT_FALSE(Bf16DotOutrunsFma());
  } else {
    // vdpbf16ps does 2 products per lane, an FMA 1: from a quarter of the
    // FMA issue rate to twice it, the ratio is 0.5 .. 4; allow slack for a
    // loaded host.
    EXPECT_GT(ratio, 0.1) << "vdpbf16ps flops / FMA flops";
    EXPECT_LT(ratio, 8.0) << "vdpbf16ps flops / FMA flops";
  }
  const bool first = Bf16DotOutrunsFma();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Bf16DotOutrunsFma(), first);
  const Provider expected = AmxMatmulActive() ? Provider::kAmx : first ? Provider::kBf16 : Provider::kHighway;
  EXPECT_EQ(*ResolveProvider(Provider::kAuto, Precision::kDefault), expected);
  std::printf("vdpbf16ps / FMA flops here: %.2f; kAuto at default: %s\n", ratio,
              std::string(ProviderName(expected)).c_str());
}

// ---------------------------------------------------------- cost model

TEST(MatmulCostTest, HandComputedSmallCases) {
  // One 4x4 array: M=3, N=4, K=4 is one tile: 2*4 + 4 + 3 - 2 = 13 cycles;
  // 48 MACs of 13*16 = 208 slots.
  const SystolicArray one(4, 4, 1, 1e9);
  MatmulCostFigures f = MatmulCost(3, 4, 4, Precision::kDefault, one);
  EXPECT_EQ(f.passes, 1);
  EXPECT_EQ(f.folds, 1);
  EXPECT_EQ(f.cycles_per_fold, 13);
  EXPECT_EQ(f.cycles, 13);
  EXPECT_DOUBLE_EQ(f.flops, 2.0 * 3 * 4 * 4);
  EXPECT_DOUBLE_EQ(f.useful_macs, 48);
  EXPECT_DOUBLE_EQ(f.utilisation, 48.0 / 208.0);
  EXPECT_DOUBLE_EQ(f.seconds, 13e-9);
  EXPECT_DOUBLE_EQ(f.bytes_read, 2.0 * (3 * 4 + 4 * 4));
  EXPECT_DOUBLE_EQ(f.bytes_written, 4.0 * 3 * 4);

  // K=5, N=6 on 4x4: ceil(5/4) * ceil(6/4) = 4 tiles (partial tiles cost a
  // full one), M=10: 8 + 4 + 10 - 2 = 20 cycles each, 80 in all on one array,
  // 40 on two (2 tiles each).
  f = MatmulCost(10, 6, 5, Precision::kDefault, one);
  EXPECT_EQ(f.folds, 4);
  EXPECT_EQ(f.cycles_per_fold, 20);
  EXPECT_EQ(f.cycles, 80);
  EXPECT_DOUBLE_EQ(f.utilisation, 300.0 / (80.0 * 16));
  f = MatmulCost(10, 6, 5, Precision::kDefault, SystolicArray(4, 4, 2, 1e9));
  EXPECT_EQ(f.cycles, 40);
  // 3 arrays: ceil(4/3) = 2 rounds.
  f = MatmulCost(10, 6, 5, Precision::kDefault, SystolicArray(4, 4, 3, 1e9));
  EXPECT_EQ(f.cycles, 40);

  // kHigh triples the tiles and flops; kHighest is 6 passes with f32 operands.
  f = MatmulCost(10, 6, 5, Precision::kHigh, one);
  EXPECT_EQ(f.passes, 3);
  EXPECT_EQ(f.folds, 12);
  EXPECT_EQ(f.cycles, 240);
  EXPECT_DOUBLE_EQ(f.flops, 3 * 2.0 * 300);
  EXPECT_DOUBLE_EQ(f.bytes_read, 4.0 * (10 * 5 + 5 * 6));
  f = MatmulCost(10, 6, 5, Precision::kHighest, one);
  EXPECT_EQ(f.passes, 6);
  EXPECT_EQ(f.folds, 24);

  // Empty.
  f = MatmulCost(0, 6, 5, Precision::kDefault, one);
  EXPECT_EQ(f.cycles, 0);
  EXPECT_EQ(f.flops, 0);
}

// The three dataflows by hand on one 4x4 array, M=10, N=6, K=5:
//   ws: Sr = K = 5, Sc = N = 6, T = M = 10: 2 x 2 folds of 8 + 4 + 10 - 2 = 20
//   os: Sr = M = 10, Sc = N = 6, T = K = 5: 3 x 2 folds of 4 + 4 + 5 - 2 = 11
//       (no weights to load first)
//   is: Sr = K = 5, Sc = M = 10, T = N = 6: 2 x 3 folds of 8 + 4 + 6 - 2 = 16
// The useful work is the same; only the cycles (and so the utilisation) move.
TEST(MatmulCostTest, DataflowsMapDifferentDimensionsOntoTheArray) {
  struct Case {
    Dataflow d;
    int64_t folds, per_fold;
  };
  for (const Case& c : {Case{Dataflow::kWeightStationary, 4, 20}, Case{Dataflow::kOutputStationary, 6, 11},
                        Case{Dataflow::kInputStationary, 6, 16}}) {
    const MatmulCostFigures f = MatmulCost(10, 6, 5, Precision::kDefault, SystolicArray(4, 4, 1, 1e9, c.d));
    EXPECT_EQ(f.folds, c.folds) << DataflowName(c.d);
    EXPECT_EQ(f.cycles_per_fold, c.per_fold) << DataflowName(c.d);
    EXPECT_EQ(f.cycles, c.folds * c.per_fold) << DataflowName(c.d);
    EXPECT_DOUBLE_EQ(f.useful_macs, 300) << DataflowName(c.d);
    EXPECT_DOUBLE_EQ(f.utilisation, 300.0 / (c.folds * c.per_fold * 16.0)) << DataflowName(c.d);
  }
  for (const char* name : {"ws", "os", "is"}) {
    auto d = ParseDataflow(name);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(DataflowName(*d), name);
  }
  auto bad = ParseDataflow("rs");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("ws (weight stationary)"), std::string::npos);
}

// The array's traffic with its on-chip buffer, by hand, for the same
// C[10, 6] = A[10, 5] x B[5, 6] on one 4 x 4 array (2 bytes an operand
// element, 4 an output element; A is 50 elements, B 30, C 60):
//   ws: A once per column fold of N (2): 100, B once: 30, C per row fold of K (2): 120
//   os: A per column fold of N (2): 100, B per row fold of M (3): 90, C once: 60
//   is: A once: 50, B per column fold of M (3): 90, C per row fold of K (2): 120
TEST(MatmulCostTest, BufferTrafficFollowsTheDataflow) {
  struct Case {
    Dataflow d;
    double reads, writes;
  };
  for (const Case& c : {Case{Dataflow::kWeightStationary, 2 * 130.0, 4 * 120.0},
                        Case{Dataflow::kOutputStationary, 2 * 190.0, 4 * 60.0},
                        Case{Dataflow::kInputStationary, 2 * 140.0, 4 * 120.0}}) {
    const SystolicArray array(4, 4, 1, 1e9, c.d);
    const MatmulCostFigures f = MatmulCost(10, 6, 5, Precision::kDefault, array);
    EXPECT_DOUBLE_EQ(f.buffer_read_bytes, c.reads) << DataflowName(c.d);
    EXPECT_DOUBLE_EQ(f.buffer_write_bytes, c.writes) << DataflowName(c.d);
    // Each pass feeds the array again.
    const MatmulCostFigures high = MatmulCost(10, 6, 5, Precision::kHigh, array);
    EXPECT_DOUBLE_EQ(high.buffer_read_bytes, 3 * c.reads) << DataflowName(c.d);
    EXPECT_DOUBLE_EQ(high.buffer_write_bytes, 3 * c.writes) << DataflowName(c.d);
  }
  EXPECT_EQ(MatmulCost(0, 6, 5, Precision::kDefault, SystolicArray(4, 4, 1, 1e9)).buffer_read_bytes, 0);
}

TEST(MatmulCostTest, V5eWorkedExampleFromTheDocs) {
  // docs/kernels.md: 4096 x 320 x 2880 (SD1.5 64x64 conv as im2col) on v5e.
  const MatmulCostFigures f = MatmulCost(4096, 320, 2880, Precision::kDefault, SystolicArray());
  EXPECT_EQ(f.folds, 23 * 3);
  EXPECT_EQ(f.cycles_per_fold, 256 + 128 + 4096 - 2);
  EXPECT_EQ(f.cycles, 18 * 4478);
  EXPECT_NEAR(f.utilisation, 4096.0 * 320 * 2880 / (80604.0 * 4 * 128 * 128), 1e-12);
  EXPECT_NEAR(f.seconds, 80604 / 1.5e9, 1e-15);
  // Large M approaches full use of a full tile: 2R + C - 2 = 382 cycles of overhead.
  const MatmulCostFigures big = MatmulCost(1 << 20, 512, 512, Precision::kDefault, SystolicArray());
  EXPECT_NEAR(big.utilisation, (1 << 20) / double((1 << 20) + 382), 1e-9);
}

// At the workloads' limits on a 1x1 array: 2^48 folds of 2^24 + 1 cycles,
// 2^72 cycles in all, which an int64 wrapped (a "0 MXU cycles, 100%" layer
// and utilisations in the billions of percent); as doubles they are the
// figure rounded to 53 bits, and the utilisation stays at most 1.
TEST(MatmulCostTest, FiguresPastAnInt64AreRoundedNotWrapped) {
  const int64_t d = int64_t{1} << 24;
  const MatmulCostFigures f = MatmulCost(d, d, d, Precision::kDefault, SystolicArray(1, 1, 1, 1e9));
  EXPECT_DOUBLE_EQ(f.folds, 0x1p48);
  EXPECT_DOUBLE_EQ(f.cycles_per_fold, 0x1p24 + 1);
  EXPECT_DOUBLE_EQ(f.cycles, 0x1p48 * (0x1p24 + 1));
  EXPECT_GT(f.utilisation, 0.99);
  EXPECT_LE(f.utilisation, 1.0);
  for (const Precision p : {Precision::kDefault, Precision::kHigh, Precision::kHighest})
    for (const Dataflow df : {Dataflow::kWeightStationary, Dataflow::kOutputStationary, Dataflow::kInputStationary}) {
      const MatmulCostFigures g = MatmulCost(d, 3, d, p, SystolicArray(1, 1, 1, 1e9, df));
      EXPECT_GT(g.cycles, 0) << DataflowName(df);
      EXPECT_LE(g.utilisation, 1.0) << DataflowName(df);
      EXPECT_TRUE(std::isfinite(g.seconds)) << DataflowName(df);
    }
}

}  // namespace
}  // namespace tpumesh::kernels
