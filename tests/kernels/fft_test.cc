// FftF32 / FftF64 against a naive O(n^2) DFT in long double (its own
// twiddles, cosl / sinl of 2 pi k / n unreduced): every fft_type, 1-D lengths
// from 1 to 4097 (powers of two, mixed radix, primes to Bluestein), 2-D and
// 3-D shapes, batches; round trips; IRFFT's ignored imaginary parts; thread
// counts; shape checks; the cost against XLA's formula.
//
// The error of a transform is max |got - want| / max |want| over its
// outputs (complex modulus). f32: the double computation rounded once to f32
// is within sqrt(2) u of the largest output, u = 2^-24; the bound is 2u.
// f64: 2e-14 (measured worst below 1e-15 relative at n = 4097).
#include "kernels/fft.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tpumesh::kernels {
namespace {

using Cl = std::complex<long double>;

constexpr double kU = 1.0 / (1 << 24);
constexpr double kTolF32 = 2 * kU;
constexpr double kTolF64 = 2e-14;

std::string Dims(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}

std::string Describe(const FftShape& s) {
  return std::string(FftTypeName(s.type)) + " batch " +
         std::to_string(s.batch) + " fft_length " + Dims(s.fft_length);
}

// f32 values in [-1, 1], shared by the f32 and f64 runs (the f64 run sees
// the same values exactly).
std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// The naive DFT of every line of block (dims) along axis, sign -1 forward,
// +1 inverse, unscaled.
void NaiveAxis(std::vector<Cl>& block, const std::vector<int64_t>& dims,
               size_t axis, bool inverse) {
  const int64_t n = dims[axis];
  int64_t inner = 1, outer = 1;
  for (size_t a = axis + 1; a < dims.size(); ++a) inner *= dims[a];
  for (size_t a = 0; a < axis; ++a) outer *= dims[a];
  const long double pi = 3.141592653589793238462643383279502884L;
  std::vector<Cl> w(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const long double t = 2 * pi * static_cast<long double>(k) / n;
    w[k] = Cl(cosl(t), inverse ? sinl(t) : -sinl(t));
  }
  std::vector<Cl> line(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      Cl* p = block.data() + o * n * inner + i;
      for (int64_t k = 0; k < n; ++k) {
        Cl acc = 0;
        for (int64_t j = 0; j < n; ++j) acc += p[j * inner] * w[(j * k) % n];
        line[k] = acc;
      }
      for (int64_t k = 0; k < n; ++k) p[k * inner] = line[k];
    }
  }
}

// The reference of one batch entry: in holds the operand's scalars
// (interleaved when complex), the result is the complex (or, for IRFFT,
// real in .real()) output elements.
std::vector<Cl> Reference(const FftShape& s, const float* in) {
  const std::vector<int64_t>& n = s.fft_length;
  const size_t last = n.size() - 1;
  std::vector<int64_t> half = n;
  half[last] = n[last] / 2 + 1;
  long double total = 1;
  for (int64_t x : n) total *= x;
  std::vector<Cl> block;
  switch (s.type) {
    case FftType::kFft:
    case FftType::kIfft: {
      int64_t count = 1;
      for (int64_t x : n) count *= x;
      for (int64_t e = 0; e < count; ++e)
        block.emplace_back(in[2 * e], in[2 * e + 1]);
      const bool inv = s.type == FftType::kIfft;
      for (size_t a = 0; a < n.size(); ++a) NaiveAxis(block, n, a, inv);
      if (inv) {
        for (Cl& v : block) v /= total;
      }
      return block;
    }
    case FftType::kRfft: {
      int64_t count = 1;
      for (int64_t x : n) count *= x;
      for (int64_t e = 0; e < count; ++e) block.emplace_back(in[e], 0.0L);
      for (size_t a = 0; a < n.size(); ++a) NaiveAxis(block, n, a, false);
      std::vector<Cl> cut;
      const int64_t rows = count / n[last];
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t k = 0; k < half[last]; ++k)
          cut.push_back(block[r * n[last] + k]);
      }
      return cut;
    }
    case FftType::kIrfft: {
      int64_t count = 1;
      for (int64_t x : half) count *= x;
      for (int64_t e = 0; e < count; ++e)
        block.emplace_back(in[2 * e], in[2 * e + 1]);
      for (size_t a = 0; a < last; ++a) NaiveAxis(block, half, a, true);
      // Each row by the real inverse formula: x_j = Re X_0 + 2 sum over the
      // bins 1 .. (n-1)/2 of Re(X_k e^(2 pi i j k / n)) + Re X_(n/2) (-1)^j
      // for even n.
      const int64_t len = n[last], h = half[last];
      const int64_t rows = count / h;
      const long double pi = 3.141592653589793238462643383279502884L;
      std::vector<long double> cs(static_cast<size_t>(len)), sn(cs.size());
      for (int64_t k = 0; k < len; ++k) {
        const long double t = 2 * pi * static_cast<long double>(k) / len;
        cs[k] = cosl(t);
        sn[k] = sinl(t);
      }
      std::vector<Cl> out;
      for (int64_t r = 0; r < rows; ++r) {
        const Cl* x = block.data() + r * h;
        for (int64_t j = 0; j < len; ++j) {
          long double acc = x[0].real();
          for (int64_t k = 1; 2 * k < len; ++k) {
            const int64_t jk = (j * k) % len;
            acc += 2 * (x[k].real() * cs[jk] - x[k].imag() * sn[jk]);
          }
          if (len % 2 == 0) acc += x[len / 2].real() * ((j % 2) ? -1 : 1);
          out.emplace_back(acc / total, 0.0L);
        }
      }
      return out;
    }
  }
  return block;
}

bool ComplexOut(FftType t) { return t != FftType::kIrfft; }
bool ComplexIn(FftType t) { return t != FftType::kRfft; }

// Worst errors seen, printed at the end of each test.
struct Worst {
  double f32 = 0, f64 = 0;
  ~Worst() {
    std::printf("[ max error] f32 %.3g (%.2f of its bound), f64 %.3g (%.2f)\n",
                f32, f32 / kTolF32, f64, f64 / kTolF64);
  }
};

// max |got - want| / max |want| of one batch entry.
template <typename T>
double Error(const FftShape& s, const T* got, const std::vector<Cl>& want) {
  long double err = 0, scale = 0;
  for (size_t e = 0; e < want.size(); ++e) {
    const Cl g =
        ComplexOut(s.type) ? Cl(got[2 * e], got[2 * e + 1]) : Cl(got[e], 0.0L);
    err = std::max(err, std::abs(g - want[e]));
    scale = std::max(scale, std::abs(want[e]));
  }
  return scale > 0 ? static_cast<double>(err / scale)
                   : static_cast<double>(err);
}

// Runs s in f32 and f64 on the same seeded operand and checks every batch
// entry against Reference.
void CheckAgainstReference(const FftShape& s, uint32_t seed, Worst& worst) {
  SCOPED_TRACE(Describe(s));
  const int64_t in_n = FftOperandElements(s) * (ComplexIn(s.type) ? 2 : 1);
  const int64_t out_n = FftResultElements(s) * (ComplexOut(s.type) ? 2 : 1);
  const std::vector<float> in = Random(in_n, seed);
  const std::vector<double> in64(in.begin(), in.end());
  std::vector<float> out(static_cast<size_t>(out_n), NAN);
  std::vector<double> out64(static_cast<size_t>(out_n), NAN);
  ASSERT_TRUE(FftF32(s, in.data(), out.data()).ok());
  ASSERT_TRUE(FftF64(s, in64.data(), out64.data()).ok());
  const int64_t in_per = in_n / s.batch, out_per = out_n / s.batch;
  for (int64_t b = 0; b < s.batch; ++b) {
    const std::vector<Cl> want = Reference(s, in.data() + b * in_per);
    const double e32 = Error(s, out.data() + b * out_per, want);
    const double e64 = Error(s, out64.data() + b * out_per, want);
    EXPECT_LE(e32, kTolF32) << "f32 batch entry " << b;
    EXPECT_LE(e64, kTolF64) << "f64 batch entry " << b;
    worst.f32 = std::max(worst.f32, e32);
    worst.f64 = std::max(worst.f64, e64);
  }
}

constexpr FftType kTypes[] = {FftType::kFft, FftType::kIfft, FftType::kRfft,
                              FftType::kIrfft};

TEST(FftTest, OneDimensionalEveryLengthEveryType) {
  Worst worst;
  uint32_t seed = 1;
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 31, 64, 97, 100, 128, 1000,
                    1024, 4097}) {
    for (FftType t : kTypes) {
      CheckAgainstReference({t, n >= 1000 ? 1 : 3, {n}}, seed++, worst);
    }
  }
}

TEST(FftTest, MultiDimensionalEveryType) {
  Worst worst;
  uint32_t seed = 100;
  const std::vector<std::vector<int64_t>> shapes = {
      {3, 5},    {4, 7},    {8, 16},   {1, 6},    {17, 4},   {6, 1},
      {2, 3, 5}, {4, 1, 6}, {3, 4, 7}, {5, 2, 2}, {2, 17, 9}};
  for (const auto& n : shapes) {
    for (FftType t : kTypes) CheckAgainstReference({t, 3, n}, seed++, worst);
  }
}

TEST(FftTest, SpecExample) {
  // docs/spec.md: fft of [1, 0, 0, 0] is [1, 1, 1, 1].
  const float in[8] = {1, 0, 0, 0, 0, 0, 0, 0};
  float out[8];
  ASSERT_TRUE(FftF32({FftType::kFft, 1, {4}}, in, out).ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out[2 * i], 1.0f);
    EXPECT_EQ(out[2 * i + 1], 0.0f);
  }
}

TEST(FftTest, RoundTrips) {
  double worst = 0;
  for (const std::vector<int64_t>& n : std::vector<std::vector<int64_t>>{
           {1}, {2}, {7}, {12}, {97}, {1000}, {4097}, {6, 10}, {5, 3, 4}}) {
    SCOPED_TRACE(Dims(n));
    int64_t count = 1;
    for (int64_t x : n) count *= x;
    const int64_t batch = 2;
    // IFFT(FFT(x)) == x.
    const std::vector<double> x = [&] {
      std::vector<float> f = Random(2 * batch * count, 7);
      return std::vector<double>(f.begin(), f.end());
    }();
    std::vector<double> y(x.size()), z(x.size());
    ASSERT_TRUE(FftF64({FftType::kFft, batch, n}, x.data(), y.data()).ok());
    ASSERT_TRUE(FftF64({FftType::kIfft, batch, n}, y.data(), z.data()).ok());
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(z[i], x[i], 1e-14) << "complex, scalar " << i;
      worst = std::max(worst, std::abs(z[i] - x[i]));
    }
    // IRFFT(RFFT(x)) == x.
    const FftShape r{FftType::kRfft, batch, n};
    std::vector<double> xr(x.begin(), x.begin() + batch * count);
    std::vector<double> spec(2 * FftResultElements(r)), back(xr.size());
    ASSERT_TRUE(FftF64(r, xr.data(), spec.data()).ok());
    ASSERT_TRUE(
        FftF64({FftType::kIrfft, batch, n}, spec.data(), back.data()).ok());
    for (size_t i = 0; i < xr.size(); ++i) {
      EXPECT_NEAR(back[i], xr[i], 1e-14) << "real, element " << i;
      worst = std::max(worst, std::abs(back[i] - xr[i]));
    }
    // And in f32: within a few u of inputs in [-1, 1].
    const std::vector<float> xf(xr.begin(), xr.end());
    std::vector<float> specf(spec.size()), backf(xf.size());
    ASSERT_TRUE(FftF32(r, xf.data(), specf.data()).ok());
    ASSERT_TRUE(
        FftF32({FftType::kIrfft, batch, n}, specf.data(), backf.data()).ok());
    double scale = 1;
    for (int64_t x : n) scale *= x;
    for (size_t i = 0; i < xf.size(); ++i) {
      // Rounding the spectrum (|X| up to count) to f32 moves each output by
      // at most u sqrt(count) in rms terms; 4 u sqrt(count) bounds it.
      EXPECT_NEAR(backf[i], xf[i], 4 * kU * std::sqrt(scale))
          << "f32 real, element " << i;
    }
  }
  std::printf("[ max error] round trips in f64: %.3g absolute\n", worst);
}

// IRFFT reads only the real parts of bin 0 and, for even n, bin n / 2: any
// imaginary part there leaves the result bit-identical.
TEST(FftTest, IrfftIgnoresImaginaryPartsOfDcAndNyquist) {
  for (int64_t n : {1, 2, 5, 8, 17, 100}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const int64_t h = n / 2 + 1, batch = 3;
    std::vector<float> in = Random(2 * batch * h, 11);
    std::vector<float> clean = in;
    for (int64_t b = 0; b < batch; ++b) {
      clean[2 * (b * h) + 1] = 0;
      if (n % 2 == 0) clean[2 * (b * h + n / 2) + 1] = 0;
      in[2 * (b * h) + 1] = 1e3f;  // garbage
      if (n % 2 == 0) in[2 * (b * h + n / 2) + 1] = -7.5f;
    }
    std::vector<float> got(batch * n), want(batch * n);
    const FftShape s{FftType::kIrfft, batch, {n}};
    ASSERT_TRUE(FftF32(s, in.data(), got.data()).ok());
    ASSERT_TRUE(FftF32(s, clean.data(), want.data()).ok());
    EXPECT_EQ(got, want);
  }
  // 2-D: the leading dim is inverse-transformed first (the spec's order), so
  // only the bins where every index is 0 or an even length's half keep
  // their imaginary parts out of the result: [0, 0], [0, 3], [2, 0], [2, 3]
  // of a 4 x 6 IRFFT (operand 4 x 4).
  const std::vector<float> in = Random(2 * 4 * 4, 12);
  std::vector<float> garbage = in, clean = in;
  for (int64_t i : {0, 2}) {
    for (int64_t k : {0, 3}) {
      garbage[2 * (i * 4 + k) + 1] = 3.25f;
      clean[2 * (i * 4 + k) + 1] = 0;
    }
  }
  std::vector<float> got(24), want(24);
  const FftShape s{FftType::kIrfft, 1, {4, 6}};
  ASSERT_TRUE(FftF32(s, garbage.data(), got.data()).ok());
  ASSERT_TRUE(FftF32(s, clean.data(), want.data()).ok());
  // The same to within rounding (the corners' imaginary parts go through
  // the leading inverse transform as exact 0 x or 1 x, then are dropped).
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

TEST(FftTest, SameBitsForEveryThreadCount) {
  for (FftType t : kTypes) {
    for (const std::vector<int64_t>& n :
         std::vector<std::vector<int64_t>>{{97}, {12, 10}, {3, 4, 17}}) {
      const FftShape s{t, 7, n};
      SCOPED_TRACE(Describe(s));
      const int64_t in_n = FftOperandElements(s) * (ComplexIn(t) ? 2 : 1);
      const int64_t out_n = FftResultElements(s) * (ComplexOut(t) ? 2 : 1);
      const std::vector<float> in = Random(in_n, 21);
      std::vector<float> one(out_n), two(out_n), cur(out_n);
      ASSERT_TRUE(FftF32(s, in.data(), one.data(), 1).ok());
      ASSERT_TRUE(FftF32(s, in.data(), two.data(), 2).ok());
      ASSERT_TRUE(FftF32(s, in.data(), cur.data(), 0).ok());
      EXPECT_EQ(0, std::memcmp(one.data(), two.data(), out_n * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(one.data(), cur.data(), out_n * sizeof(float)));
    }
  }
}

TEST(FftTest, EmptyShapesDoNothing) {
  float in[4] = {1, 2, 3, 4}, out[4] = {9, 9, 9, 9};
  EXPECT_TRUE(FftF32({FftType::kFft, 0, {4}}, in, out).ok());
  EXPECT_TRUE(FftF32({FftType::kRfft, 2, {0}}, in, out).ok());
  EXPECT_TRUE(FftF32({FftType::kIrfft, 2, {3, 0}}, in, out).ok());
  EXPECT_EQ(out[0], 9);
}

TEST(FftTest, MakeFftShapeFromOperandDims) {
  const int64_t dims[] = {2, 3, 8, 5};
  auto s = MakeFftShape(FftType::kIrfft, dims, std::vector<int64_t>{8, 8});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->batch, 6);
  EXPECT_EQ(FftOperandElements(*s), 6 * 8 * 5);
  EXPECT_EQ(FftResultElements(*s), 6 * 8 * 8);
  const int64_t real_dims[] = {4, 9};
  auto r = MakeFftShape(FftType::kRfft, real_dims, std::vector<int64_t>{9});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(FftResultElements(*r), 4 * 5);

  // Errors name what is wrong.
  auto bad = MakeFftShape(FftType::kFft, dims, std::vector<int64_t>{8, 6});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("dim 3"), std::string::npos)
      << bad.status().message();
  EXPECT_EQ(
      MakeFftShape(FftType::kFft, dims, std::vector<int64_t>{}).status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeFftShape(FftType::kFft, dims, std::vector<int64_t>{1, 1, 1, 1})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  const int64_t low_rank[] = {5};
  EXPECT_EQ(MakeFftShape(FftType::kFft, low_rank, std::vector<int64_t>{1, 5})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckFft({FftType::kFft, -1, {4}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckFft({FftType::kFft, 1, {-4}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckFft({static_cast<FftType>(7), 1, {4}}).code(),
            StatusCode::kUnimplemented);
  float x[2];
  EXPECT_FALSE(FftF32({FftType::kFft, 1, {int64_t{1} << 62}}, x, x).ok());
}

TEST(FftTest, CostIsXlas) {
  // HandleFft: 2 * 4 * prod floor(log2 n) * operand elements.
  const OpCost c = FftCost({FftType::kFft, 2, {8, 6}}, 4);
  EXPECT_EQ(c.flops, 2 * 4 * (3 * 2) * (2 * 8 * 6));
  EXPECT_EQ(c.bytes_read, 2 * 8 * 6 * 8);
  EXPECT_EQ(c.bytes_written, 2 * 8 * 6 * 8);
  EXPECT_EQ(c.transcendentals, 0);
  const OpCost r = FftCost({FftType::kRfft, 1, {16}}, 4);
  EXPECT_EQ(r.flops, 8 * 4 * 16);
  EXPECT_EQ(r.bytes_read, 16 * 4);
  EXPECT_EQ(r.bytes_written, 9 * 8);
  const OpCost i = FftCost({FftType::kIrfft, 1, {16}}, 8);
  EXPECT_EQ(i.flops, 8 * 4 * 9);
  EXPECT_EQ(i.bytes_read, 9 * 16);
  EXPECT_EQ(i.bytes_written, 16 * 8);
  EXPECT_EQ(FftCost({FftType::kFft, 1, {1}}, 4).flops, 0);  // log2 1 = 0
  EXPECT_EQ(FftCost({FftType::kFft, 1, {1000}}, 4).flops, 8 * 9 * 1000);
  EXPECT_DOUBLE_EQ(FftTextbookFlops({FftType::kFft, 3, {1024}}),
                   3 * 5.0 * 1024 * 10);
  EXPECT_DOUBLE_EQ(FftTextbookFlops({FftType::kRfft, 1, {1024}}),
                   2.5 * 1024 * 10);
}

}  // namespace
}  // namespace tpumesh::kernels
