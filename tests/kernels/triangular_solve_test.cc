// TriangularSolve{F32,F64,C64,C128}: for every flag combination (left_side,
// lower, unit_diagonal, transpose_a) and a batch, op(a) x (or x op(a)) must
// reproduce b, with NaN in every entry of a the solve must not read (the
// other triangle, and the diagonal when unit_diagonal); same bits for 1, 2
// and the current arena's threads; in place; shape checks; XLA's cost.
//
// Residual bound, per element of b: |op(a) x - b| <= tol (|op(a)| |x|)
// computed in long double from the returned x (|v| of a complex entry in
// the magnitude as |re| + |im|). x is the double solution
// rounded once: f32 gives tol = 2u (u = 2^-24, a rounding of each x), c64
// 3u (a complex rounding moves |x| by sqrt(2) u); f64 / c128 carry the
// double substitution's backward error, (k + 4) 2^-53 with slack.
#include "kernels/triangular_solve.h"

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

struct Flags {
  bool left, lower, unit;
  TriangularTranspose t;
};

std::string Describe(const TriangularSolveShape& s) {
  const char* t[] = {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
  return std::string(s.left_side ? "left" : "right") +
         (s.lower ? " lower" : " upper") + (s.unit_diagonal ? " unit" : "") +
         " " + t[static_cast<int>(s.transpose_a)] + " batch " +
         std::to_string(s.batch) + " m " + std::to_string(s.m) + " n " +
         std::to_string(s.n);
}

// One dtype under test: S the stored scalar, kComplex interleaved pairs.
template <typename S, bool kComplex>
struct Case {
  static constexpr int kReals = kComplex ? 2 : 1;
  static Status Solve(const TriangularSolveShape& s, const S* a, const S* b,
                      S* x, int threads) {
    if constexpr (std::is_same_v<S, float> && !kComplex)
      return TriangularSolveF32(s, a, b, x, threads);
    if constexpr (std::is_same_v<S, double> && !kComplex)
      return TriangularSolveF64(s, a, b, x, threads);
    if constexpr (std::is_same_v<S, float> && kComplex)
      return TriangularSolveC64(s, a, b, x, threads);
    if constexpr (std::is_same_v<S, double> && kComplex)
      return TriangularSolveC128(s, a, b, x, threads);
  }
  static double Tol(int64_t k) {
    if constexpr (std::is_same_v<S, float>) return kComplex ? 3 * kU : 2 * kU;
    return 4.0 * static_cast<double>(k + 4) * kEps64;
  }
  static const char* Name() {
    if constexpr (std::is_same_v<S, float>) return kComplex ? "c64" : "f32";
    return kComplex ? "c128" : "f64";
  }
  static Cl Get(const std::vector<S>& v, int64_t i) {
    return kComplex ? Cl(v[2 * i], v[2 * i + 1]) : Cl(v[i], 0);
  }
};

bool InTriangle(bool lower, int64_t i, int64_t j) {
  return lower ? i >= j : i <= j;
}

// a [batch, k, k]: the `lower` triangle random with a dominant diagonal
// (well conditioned), NaN everywhere the solve must not read.
template <typename S, bool kComplex>
std::vector<S> MakeA(const TriangularSolveShape& s, std::mt19937& rng) {
  using C = Case<S, kComplex>;
  const int64_t k = s.k();
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const S nan = std::numeric_limits<S>::quiet_NaN();
  std::vector<S> a(static_cast<size_t>(s.batch * k * k * C::kReals), nan);
  for (int64_t e = 0; e < s.batch; ++e) {
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        if (!InTriangle(s.lower, i, j) || (i == j && s.unit_diagonal)) continue;
        const int64_t idx = (e * k + i) * k + j;
        for (int r = 0; r < C::kReals; ++r) {
          double v = dist(rng);
          if (i == j && r == 0) v = (v < 0 ? -2.0 : 2.0) + v;  // |d| in [2, 3]
          a[idx * C::kReals + r] = static_cast<S>(v);
        }
      }
    }
  }
  return a;
}

// op(a)[i][j] from a's triangle, with the implied zeros and unit diagonal.
template <typename S, bool kComplex>
Cl OpA(const TriangularSolveShape& s, const std::vector<S>& a, int64_t e,
       int64_t i, int64_t j) {
  using C = Case<S, kComplex>;
  const int64_t k = s.k();
  const bool trans = s.transpose_a != TriangularTranspose::kNoTranspose;
  const int64_t r = trans ? j : i, c = trans ? i : j;
  if (!InTriangle(s.lower, r, c)) return 0;
  if (r == c && s.unit_diagonal) return 1;
  const Cl v = C::Get(a, (e * k + r) * k + c);
  return s.transpose_a == TriangularTranspose::kAdjoint ? std::conj(v) : v;
}

// |re| + |im|: the modulus for reals, within sqrt(2) of it for complex, and
// far cheaper than hypotl.
long double Abs1(Cl v) { return fabsl(v.real()) + fabsl(v.imag()); }

// The worst |residual| / (|op(a)| |x|) over every element; checks each.
template <typename S, bool kComplex>
double CheckResidual(const TriangularSolveShape& s, const std::vector<S>& a,
                     const std::vector<S>& b, const std::vector<S>& x) {
  using C = Case<S, kComplex>;
  const int64_t m = s.m, n = s.n, k = s.k();
  double worst = 0;
  int failures = 0;
  for (int64_t e = 0; e < s.batch; ++e) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < n; ++c) {
        Cl sum = 0;
        long double mag = 0;
        for (int64_t l = 0; l < k; ++l) {
          // left: (op(a) x)[i][c] = sum_l op(a)[i][l] x[l][c];
          // right: (x op(a))[i][c] = sum_l x[i][l] op(a)[l][c].
          const Cl av = s.left_side ? OpA<S, kComplex>(s, a, e, i, l)
                                    : OpA<S, kComplex>(s, a, e, l, c);
          const Cl xv = s.left_side ? C::Get(x, (e * m + l) * n + c)
                                    : C::Get(x, (e * m + i) * n + l);
          sum += av * xv;
          mag += Abs1(av) * Abs1(xv);
        }
        const long double res = std::abs(sum - C::Get(b, (e * m + i) * n + c));
        const double ratio = mag > 0 ? static_cast<double>(res / mag) : 0;
        worst = std::max(worst, ratio);
        if (!(ratio <= C::Tol(k)) && failures++ < 5) {
          ADD_FAILURE() << C::Name() << " " << Describe(s) << " at [" << e
                        << ", " << i << ", " << c << "]: residual " << res
                        << " over |op(a)||x| " << mag << " = " << ratio << " > "
                        << C::Tol(k);
        }
      }
    }
  }
  return worst;
}

std::vector<Flags> AllFlags() {
  std::vector<Flags> f;
  for (bool left : {true, false}) {
    for (bool lower : {true, false}) {
      for (bool unit : {false, true}) {
        for (TriangularTranspose t :
             {TriangularTranspose::kNoTranspose,
              TriangularTranspose::kTranspose, TriangularTranspose::kAdjoint}) {
          f.push_back({left, lower, unit, t});
        }
      }
    }
  }
  return f;
}

template <typename S, bool kComplex>
void EveryFlagCombination() {
  using C = Case<S, kComplex>;
  std::mt19937 rng(5);
  double worst = 0;
  // m x n pairs: small, square, 1 x 1, 40 x 40, and three 64-wide blocks
  // of right-hand sides (left: n = 130 columns; right: m = 130 rows).
  const std::vector<std::pair<int64_t, int64_t>> sizes = {
      {7, 5}, {6, 6}, {1, 1}, {1, 9}, {9, 1}, {40, 40}, {5, 130}, {130, 5}};
  for (const Flags& f : AllFlags()) {
    for (auto [m, n] : sizes) {
      TriangularSolveShape s;
      s.batch = 3;
      s.m = m;
      s.n = n;
      s.left_side = f.left;
      s.lower = f.lower;
      s.unit_diagonal = f.unit;
      s.transpose_a = f.t;
      const std::vector<S> a = MakeA<S, kComplex>(s, rng);
      std::uniform_real_distribution<double> dist(-1.0, 1.0);
      std::vector<S> b(static_cast<size_t>(s.batch * m * n * C::kReals));
      for (S& v : b) v = static_cast<S>(dist(rng));
      std::vector<S> x(b.size(), std::numeric_limits<S>::quiet_NaN());
      ASSERT_TRUE(C::Solve(s, a.data(), b.data(), x.data(), 1).ok())
          << Describe(s);
      worst = std::max(worst, CheckResidual<S, kComplex>(s, a, b, x));
      // Same bits on 2 threads and on the current arena; and in place.
      std::vector<S> x2(b.size()), x0(b.size()), inplace = b;
      ASSERT_TRUE(C::Solve(s, a.data(), b.data(), x2.data(), 2).ok());
      ASSERT_TRUE(C::Solve(s, a.data(), b.data(), x0.data(), 0).ok());
      ASSERT_TRUE(
          C::Solve(s, a.data(), inplace.data(), inplace.data(), 2).ok());
      const size_t bytes = x.size() * sizeof(S);
      EXPECT_EQ(0, std::memcmp(x.data(), x2.data(), bytes)) << Describe(s);
      EXPECT_EQ(0, std::memcmp(x.data(), x0.data(), bytes)) << Describe(s);
      EXPECT_EQ(0, std::memcmp(x.data(), inplace.data(), bytes)) << Describe(s);
    }
  }
  std::printf(
      "[ max error] %s: residual %.3g of |op(a)||x| (%.2f of the bound)\n",
      C::Name(), worst, worst / C::Tol(40));
}

TEST(TriangularSolveTest, F32EveryFlagCombination) {
  EveryFlagCombination<float, false>();
}
TEST(TriangularSolveTest, F64EveryFlagCombination) {
  EveryFlagCombination<double, false>();
}
TEST(TriangularSolveTest, C64EveryFlagCombination) {
  EveryFlagCombination<float, true>();
}
TEST(TriangularSolveTest, C128EveryFlagCombination) {
  EveryFlagCombination<double, true>();
}

TEST(TriangularSolveTest, HandWorkedLowerLeft) {
  // [[2, 0], [1, 4]] x = [[2], [9]]: x = [1, 2]. The upper entry is
  // garbage and ignored.
  const float a[] = {2, 123, 1, 4}, b[] = {2, 9};
  float x[2];
  TriangularSolveShape s;
  s.m = 2;
  s.n = 1;
  ASSERT_TRUE(TriangularSolveF32(s, a, b, x).ok());
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], 2.0f);
  // unit_diagonal: [[1, 0], [1, 1]] x = [2, 9]: x = [2, 7].
  s.unit_diagonal = true;
  ASSERT_TRUE(TriangularSolveF32(s, a, b, x).ok());
  EXPECT_EQ(x[0], 2.0f);
  EXPECT_EQ(x[1], 7.0f);
  // ADJOINT of complex: conj([[2i, 0], [1, 1]])^T = [[-2i, 1], [0, 1]];
  // [[-2i, 1], [0, 1]] x = [1 - 2i, 1]: x = [1, 1].
  const double ca[] = {0, 2, 9, 9, 1, 0, 1, 0}, cb[] = {1, -2, 1, 0};
  double cx[4];
  TriangularSolveShape c;
  c.m = 2;
  c.n = 1;
  c.transpose_a = TriangularTranspose::kAdjoint;
  ASSERT_TRUE(TriangularSolveC128(c, ca, cb, cx).ok());
  EXPECT_DOUBLE_EQ(cx[0], 1);
  EXPECT_DOUBLE_EQ(cx[1], 0);
  EXPECT_DOUBLE_EQ(cx[2], 1);
  EXPECT_DOUBLE_EQ(cx[3], 0);
}

TEST(TriangularSolveTest, ShapesFromOperandDims) {
  const int64_t a[] = {2, 3, 4, 4}, b[] = {2, 3, 4, 7};
  auto s = MakeTriangularSolveShape(a, b, true, true, false,
                                    TriangularTranspose::kNoTranspose);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->batch, 6);
  EXPECT_EQ(s->m, 4);
  EXPECT_EQ(s->n, 7);
  EXPECT_EQ(s->k(), 4);
  // Right side needs a's order == b's last dim.
  auto bad = MakeTriangularSolveShape(a, b, false, true, false,
                                      TriangularTranspose::kNoTranspose);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("not left_side"), std::string::npos)
      << bad.status().message();
  const int64_t not_square[] = {2, 3, 4, 5}, other_batch[] = {2, 2, 4, 7};
  EXPECT_FALSE(MakeTriangularSolveShape(not_square, b, true, true, false,
                                        TriangularTranspose::kNoTranspose)
                   .ok());
  EXPECT_FALSE(MakeTriangularSolveShape(a, other_batch, true, true, false,
                                        TriangularTranspose::kNoTranspose)
                   .ok());
  const int64_t rank1[] = {4};
  EXPECT_FALSE(MakeTriangularSolveShape(rank1, rank1, true, true, false,
                                        TriangularTranspose::kNoTranspose)
                   .ok());
  TriangularSolveShape neg;
  neg.m = -1;
  EXPECT_EQ(CheckTriangularSolve(neg).code(), StatusCode::kInvalidArgument);
  TriangularSolveShape odd;
  odd.transpose_a = static_cast<TriangularTranspose>(5);
  EXPECT_EQ(CheckTriangularSolve(odd).code(), StatusCode::kUnimplemented);
  // Empty: nothing read or written.
  TriangularSolveShape empty;
  empty.batch = 4;
  empty.m = 0;
  empty.n = 3;
  EXPECT_TRUE(TriangularSolveF32(empty, nullptr, nullptr, nullptr).ok());
}

TEST(TriangularSolveTest, CostIsXlas) {
  // HandleTriangularSolve: 2 * a's last dim * elements(b); half of a read.
  TriangularSolveShape s;
  s.batch = 2;
  s.m = 4;
  s.n = 3;
  const OpCost c = TriangularSolveCost(s, 4);
  EXPECT_EQ(c.flops, 2 * 4 * 24);
  EXPECT_EQ(c.bytes_read, (2 * 16 * 4) / 2.0 + 24 * 4);
  EXPECT_EQ(c.bytes_written, 24 * 4);
  s.left_side = false;  // k = n = 3
  EXPECT_EQ(TriangularSolveCost(s, 8).flops, 2 * 3 * 24);
}

}  // namespace
}  // namespace tpumesh::kernels
