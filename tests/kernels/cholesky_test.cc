// Cholesky{F32,F64,C64,C128}: for random Hermitian positive definite a
// (a batch, lower and not), the factor must reproduce a (L L^H or U^H U)
// with NaN in the triangle the factor must not read, the other triangle of
// the result zero and the diagonal real and positive; same bits for 1, 2
// and the current arena's threads, and in place. Then XLA:CPU's answers
// (jaxlib's CPU client running stablehlo.cholesky) on small hand-picked
// inputs: a factor, a complex upper factor, the NaN results of matrices
// that are not positive definite; shape checks; XLA's cost.
//
// Residual bound, per element of a's read triangle: |(L L^H)_ij - a_ij| <=
// tol (|L| |L|^T)_ij computed in long double from the returned factor (|v|
// of a complex entry as |re| + |im|). The factor is the double one rounded
// once: f32 gives tol = 3u (u = 2^-24, two roundings in each product, with
// slack), c64 4u (a complex rounding moves |l| by sqrt(2) u); f64 / c128
// carry the double factorisation's backward error, (n + 4) 2^-53 with
// slack.
#include "kernels/cholesky.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"

namespace tpumesh::kernels {
namespace {

using Cl = std::complex<long double>;
constexpr double kU = 1.0 / (1 << 24);
constexpr double kEps64 = 1.0 / (int64_t{1} << 53);

std::string Describe(const CholeskyShape& s) {
  return std::string(s.lower ? "lower" : "upper") + " batch " +
         std::to_string(s.batch) + " n " + std::to_string(s.n);
}

// One dtype under test: S the stored scalar, kComplex interleaved pairs.
template <typename S, bool kComplex>
struct Case {
  static constexpr int kReals = kComplex ? 2 : 1;
  static Status Factor(const CholeskyShape& s, const S* a, S* out,
                       int threads) {
    if constexpr (std::is_same_v<S, float> && !kComplex)
      return CholeskyF32(s, a, out, threads);
    if constexpr (std::is_same_v<S, double> && !kComplex)
      return CholeskyF64(s, a, out, threads);
    if constexpr (std::is_same_v<S, float> && kComplex)
      return CholeskyC64(s, a, out, threads);
    if constexpr (std::is_same_v<S, double> && kComplex)
      return CholeskyC128(s, a, out, threads);
  }
  static double Tol(int64_t n) {
    if constexpr (std::is_same_v<S, float>) return (kComplex ? 4 : 3) * kU;
    return 2.0 * static_cast<double>(n + 4) * kEps64;
  }
  static const char* Name() {
    if constexpr (std::is_same_v<S, float>) return kComplex ? "c64" : "f32";
    return kComplex ? "c128" : "f64";
  }
  static Cl Get(const std::vector<S>& v, int64_t i) {
    if constexpr (kComplex) return Cl(v[2 * i], v[2 * i + 1]);
    return Cl(v[i], 0);
  }
  static void Set(std::vector<S>& v, int64_t i, Cl x) {
    if constexpr (kComplex) {
      v[2 * i] = static_cast<S>(x.real());
      v[2 * i + 1] = static_cast<S>(x.imag());
    } else {
      v[i] = static_cast<S>(x.real());
    }
  }
};

long double Mag(Cl v) { return std::fabs(v.real()) + std::fabs(v.imag()); }

// a = b b^H + n I per entry (b uniform in [-1, 1]), rounded to S, with NaN
// in the triangle the factor must not read.
template <typename S, bool kComplex>
std::vector<S> MakeA(const CholeskyShape& s, std::mt19937& rng) {
  using C = Case<S, kComplex>;
  const int64_t n = s.n;
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<S> a(static_cast<size_t>(s.batch * n * n * C::kReals));
  std::vector<Cl> b(static_cast<size_t>(n * n));
  for (int64_t e = 0; e < s.batch; ++e) {
    for (Cl& v : b) v = Cl(dist(rng), kComplex ? dist(rng) : 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        Cl v = i == j ? Cl(static_cast<long double>(n), 0) : Cl(0, 0);
        for (int64_t k = 0; k < n; ++k)
          v += b[i * n + k] * std::conj(b[j * n + k]);
        if (i == j) v = Cl(v.real(), 0);
        const bool read = s.lower ? i >= j : i <= j;
        const long double nan = std::numeric_limits<long double>::quiet_NaN();
        C::Set(a, e * n * n + i * n + j, read ? v : Cl(nan, nan));
      }
    }
  }
  return a;
}

// The worst residual over the read triangle as a fraction of
// (|L| |L|^T)_ij; fails on a nonzero other triangle or a diagonal that is
// not real and positive.
template <typename S, bool kComplex>
double CheckFactor(const CholeskyShape& s, const std::vector<S>& a,
                   const std::vector<S>& f) {
  using C = Case<S, kComplex>;
  const int64_t n = s.n;
  double worst = 0;
  for (int64_t e = 0; e < s.batch; ++e) {
    const int64_t base = e * n * n;
    // l(i, k): the lower factor, L or U^H.
    const auto l = [&](int64_t i, int64_t k) {
      return s.lower ? C::Get(f, base + i * n + k)
                     : std::conj(C::Get(f, base + k * n + i));
    };
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const Cl fij = C::Get(f, base + i * n + j);
        const bool read = s.lower ? i >= j : i <= j;
        if (!read) {
          EXPECT_EQ(fij, Cl(0, 0))
              << Describe(s) << " (" << i << ", " << j << ")";
          continue;
        }
        if (i == j) {
          EXPECT_GT(fij.real(), 0) << Describe(s);
          EXPECT_EQ(fij.imag(), 0) << Describe(s);
        }
        // The lower factor's (p, q) = (i, j) when lower, (j, i) otherwise;
        // a_pq = sum_k l(p, k) conj(l(q, k)).
        const int64_t p = s.lower ? i : j, q = s.lower ? j : i;
        Cl sum(0, 0);
        long double mag = 0;
        for (int64_t k = 0; k <= q; ++k) {
          sum += l(p, k) * std::conj(l(q, k));
          mag += Mag(l(p, k)) * Mag(l(q, k));
        }
        const Cl apq = s.lower ? C::Get(a, base + p * n + q)
                               : std::conj(C::Get(a, base + q * n + p));
        const double err = static_cast<double>(Mag(sum - apq) / mag);
        EXPECT_LE(err, C::Tol(n))
            << Describe(s) << " (" << i << ", " << j << ")";
        worst = std::max(worst, err);
      }
    }
  }
  return worst;
}

template <typename S, bool kComplex>
void RandomFactors() {
  using C = Case<S, kComplex>;
  std::mt19937 rng(20261129);
  double worst = 0;
  for (const bool lower : {true, false}) {
    for (const int64_t n : {1, 2, 5, 17, 40}) {
      CholeskyShape s;
      s.batch = 3;
      s.n = n;
      s.lower = lower;
      const std::vector<S> a = MakeA<S, kComplex>(s, rng);
      std::vector<S> f(a.size(), std::numeric_limits<S>::quiet_NaN());
      ASSERT_TRUE(C::Factor(s, a.data(), f.data(), 1).ok()) << Describe(s);
      worst = std::max(worst, CheckFactor<S, kComplex>(s, a, f));
      // Same bits on 2 threads and on the current arena; and in place.
      std::vector<S> f2(a.size()), f0(a.size()), inplace = a;
      ASSERT_TRUE(C::Factor(s, a.data(), f2.data(), 2).ok());
      ASSERT_TRUE(C::Factor(s, a.data(), f0.data(), 0).ok());
      ASSERT_TRUE(C::Factor(s, inplace.data(), inplace.data(), 2).ok());
      const size_t bytes = f.size() * sizeof(S);
      EXPECT_EQ(0, std::memcmp(f.data(), f2.data(), bytes)) << Describe(s);
      EXPECT_EQ(0, std::memcmp(f.data(), f0.data(), bytes)) << Describe(s);
      EXPECT_EQ(0, std::memcmp(f.data(), inplace.data(), bytes)) << Describe(s);
    }
  }
  std::printf(
      "[ max error] %s: residual %.3g of |L||L|^T (%.2f of the bound)\n",
      C::Name(), worst, worst / C::Tol(40));
}

TEST(CholeskyTest, F32RandomFactors) { RandomFactors<float, false>(); }
TEST(CholeskyTest, F64RandomFactors) { RandomFactors<double, false>(); }
TEST(CholeskyTest, C64RandomFactors) { RandomFactors<float, true>(); }
TEST(CholeskyTest, C128RandomFactors) { RandomFactors<double, true>(); }

TEST(CholeskyTest, HandWorkedAsXla) {
  // XLA:CPU: chol([[4, 2, 1], [2, 5, 3], [1, 3, 6]]) = [[2, 0, 0], [1, 2, 0],
  // [0.5, 1.25, sqrt(6 - 0.25 - 1.5625)]]; the 99 above the diagonal is
  // not read. Not lower, the transpose (the 99 now below).
  const double r = std::sqrt(6.0 - 0.25 - 1.5625);
  CholeskyShape s{1, 3, true};
  std::vector<double> a = {4, 99, 1, 2, 5, 3, 1, 3, 6}, l(9);
  ASSERT_TRUE(CholeskyF64(s, a.data(), l.data()).ok());
  EXPECT_EQ(l, (std::vector<double>{2, 0, 0, 1, 2, 0, 0.5, 1.25, r}));
  s.lower = false;
  a = {4, 2, 1, 99, 5, 3, 7, 3, 6};
  ASSERT_TRUE(CholeskyF64(s, a.data(), l.data()).ok());
  EXPECT_EQ(l, (std::vector<double>{2, 1, 0.5, 0, 2, 1.25, 0, 0, r}));
}

TEST(CholeskyTest, ComplexDiagonalAsXla) {
  // XLA:CPU on [[4+3i, 1+1i], [5-1i, 3-2i]]: not lower gives
  // [[2+1.5i, 0.5+0.5i], [0, (2.5-2i) / sqrt(2.5)]] (each column divided by
  // the root of its diagonal's real part); lower meets re = 3 - 6.5 < 0 on
  // the second column and gives NaN + 0i everywhere.
  const std::vector<double> a = {4, 3, 1, 1, 5, -1, 3, -2};
  std::vector<double> f(8);
  CholeskyShape s{1, 2, false};
  ASSERT_TRUE(CholeskyC128(s, a.data(), f.data()).ok());
  const double r = std::sqrt(2.5);
  EXPECT_EQ(f[0], 2);
  EXPECT_EQ(f[1], 1.5);
  EXPECT_EQ(f[2], 0.5);
  EXPECT_EQ(f[3], 0.5);
  EXPECT_EQ(f[4], 0);
  EXPECT_EQ(f[5], 0);
  EXPECT_NEAR(f[6], 2.5 / r, 1e-15);
  EXPECT_NEAR(f[7], -2 / r, 1e-15);
  s.lower = true;
  ASSERT_TRUE(CholeskyC128(s, a.data(), f.data()).ok());
  for (int i = 0; i < 8; i += 2) {
    EXPECT_TRUE(std::isnan(f[i]));
    EXPECT_EQ(f[i + 1], 0);
  }
}

TEST(CholeskyTest, NotPositiveDefiniteAsXla) {
  // XLA:CPU: a NaN root anywhere makes the whole entry NaN, entry by entry
  // in a batch; a zero root only the 0 / 0 on its diagonal.
  CholeskyShape s{2, 2, true};
  const std::vector<float> a = {1, 0, 0, -1, 4, 2, 2, 5};
  std::vector<float> l(8);
  ASSERT_TRUE(CholeskyF32(s, a.data(), l.data(), 2).ok());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(l[i])) << i;
  EXPECT_EQ(std::vector<float>(l.begin() + 4, l.end()),
            (std::vector<float>{2, 0, 1, 2}));
  s.batch = 1;
  std::vector<double> d = {1, 0, 0, 0}, ld(4);
  ASSERT_TRUE(CholeskyF64(s, d.data(), ld.data()).ok());
  EXPECT_EQ(ld[0], 1);
  EXPECT_EQ(ld[1], 0);
  EXPECT_EQ(ld[2], 0);
  EXPECT_TRUE(std::isnan(ld[3]));
  // [[0, 0], [0, 1]]: 0 / 0 below the first root, then a NaN root.
  d = {0, 0, 0, 1};
  ASSERT_TRUE(CholeskyF64(s, d.data(), ld.data()).ok());
  for (double v : ld) EXPECT_TRUE(std::isnan(v));
  // The unread triangle's NaN does not matter.
  d = {1, std::nan(""), 0, 1};
  ASSERT_TRUE(CholeskyF64(s, d.data(), ld.data()).ok());
  EXPECT_EQ(ld, (std::vector<double>{1, 0, 0, 1}));
}

TEST(CholeskyTest, ShapesFromOperandDims) {
  const int64_t batched[] = {2, 3, 4, 4};
  auto s = MakeCholeskyShape(batched, false);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->batch, 6);
  EXPECT_EQ(s->n, 4);
  EXPECT_FALSE(s->lower);
  const int64_t empty[] = {0, 3, 3};
  ASSERT_TRUE(MakeCholeskyShape(empty, true).ok());
  EXPECT_TRUE(
      CholeskyF32(*MakeCholeskyShape(empty, true), nullptr, nullptr).ok());
  const int64_t rank1[] = {4};
  EXPECT_FALSE(MakeCholeskyShape(rank1, true).ok());
  const int64_t oblong[] = {3, 4};
  auto bad = MakeCholeskyShape(oblong, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("square"), std::string::npos);
  const int64_t negative[] = {-1, 2, 2};
  EXPECT_FALSE(MakeCholeskyShape(negative, true).ok());
}

TEST(CholeskyTest, CostIsXlas) {
  // n x elements(a) / 3 in int64: 4 x 32 / 3 = 42; half of a read and half
  // written.
  const OpCost c = CholeskyCost(CholeskyShape{2, 4, true}, 8);
  EXPECT_EQ(c.flops, 42);
  EXPECT_EQ(c.bytes_read, 16 * 8);
  EXPECT_EQ(c.bytes_written, 16 * 8);
  EXPECT_EQ(c.transcendentals, 0);
}

}  // namespace
}  // namespace tpumesh::kernels
