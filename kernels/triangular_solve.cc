// TriangularSolve*: forward / back substitution in double over blocks of
// right-hand sides, one (batch entry, block) per task.
#include "kernels/triangular_solve.h"

#include <algorithm>
#include <complex>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/linalg_scalars.h"
#include "kernels/ops_parallel.h"

namespace tpumesh::kernels {
namespace {

using linalg::Conj;
using linalg::Load;
using linalg::Store;

// Right-hand sides per task: enough work per task to amortise loading the
// block, and several tasks at batch 1 once b has 128 or more of them.
constexpr int64_t kRhsBlock = 64;

// op(a)[i][j] of one batch entry's a [k, k]; called only inside op(a)'s
// triangle, which maps onto a's `lower` triangle.
template <typename S, typename C>
struct OpA {
  const S* a;
  int64_t k;
  TriangularTranspose t;
  C operator()(int64_t i, int64_t j) const {
    switch (t) {
      case TriangularTranspose::kNoTranspose:
        return Load<S, C>(a, i * k + j);
      case TriangularTranspose::kTranspose:
        return Load<S, C>(a, j * k + i);
      case TriangularTranspose::kAdjoint:
        return Conj(Load<S, C>(a, j * k + i));
    }
    return C(0);
  }
};

// The substitution both sides share: w [k, width] holds `width` systems as
// columns, and g w' = w is solved in place, g k x k triangular (lower when
// g_lower). Row i of the solution is row i of w minus g(i, j) times each
// solved row j (j ascending), then divided by g(i, i) unless unit: an axpy
// over the width per (i, j), so g is read once per task, not per system.
template <typename C, typename G>
void Sweep(const G& g, bool g_lower, bool unit, int64_t k, int64_t width,
           C* w) {
  for (int64_t step = 0; step < k; ++step) {
    const int64_t i = g_lower ? step : k - 1 - step;
    C* wi = w + i * width;
    const int64_t j_begin = g_lower ? 0 : i + 1;
    const int64_t j_end = g_lower ? i : k;
    for (int64_t j = j_begin; j < j_end; ++j) {
      const C gij = g(i, j);
      const C* wj = w + j * width;
      for (int64_t c = 0; c < width; ++c) wi[c] -= gij * wj[c];
    }
    if (!unit) {
      const C d = g(i, i);
      for (int64_t c = 0; c < width; ++c) wi[c] /= d;
    }
  }
}

// op(a) x = b for columns [c0, c1) of b [m, n].
template <typename S, typename C>
void SolveLeft(const TriangularSolveShape& s, const OpA<S, C>& op,
               bool op_lower, const S* b, S* x, int64_t c0, int64_t c1,
               std::vector<C>& w) {
  const int64_t m = s.m, n = s.n, width = c1 - c0;
  w.resize(static_cast<size_t>(m * width));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < width; ++c) {
      w[i * width + c] = Load<S, C>(b, i * n + c0 + c);
    }
  }
  Sweep(op, op_lower, s.unit_diagonal, m, width, w.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < width; ++c) {
      Store<S, C>(x, i * n + c0 + c, w[i * width + c]);
    }
  }
}

// x op(a) = b for rows [r0, r1) of b [m, n], as op(a)^T x^T = b^T: the
// rows are loaded transposed (w [n, rows]) and swept with g(i, j) =
// op(a)[j][i], lower when op(a) is upper. Each x[r][j] is
// (b[r][j] - sum_i x[r][i] op(a)[i][j]) / op(a)[j][j], i in the sweep's
// order.
template <typename S, typename C>
void SolveRight(const TriangularSolveShape& s, const OpA<S, C>& op,
                bool op_lower, const S* b, S* x, int64_t r0, int64_t r1,
                std::vector<C>& w) {
  const int64_t n = s.n, rows = r1 - r0;
  w.resize(static_cast<size_t>(n * rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c)
      w[c * rows + r] = Load<S, C>(b, (r0 + r) * n + c);
  }
  const auto op_t = [&op](int64_t i, int64_t j) { return op(j, i); };
  Sweep(op_t, !op_lower, s.unit_diagonal, n, rows, w.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c)
      Store<S, C>(x, (r0 + r) * n + c, w[c * rows + r]);
  }
}

template <typename S, typename C>
Status Run(const TriangularSolveShape& s, const S* a, const S* b, S* x,
           int num_threads) {
  TPUMESH_RETURN_IF_ERROR(CheckTriangularSolve(s));
  if (s.batch == 0 || s.m == 0 || s.n == 0) return OkStatus();
  constexpr int64_t kReals = std::is_same_v<C, double> ? 1 : 2;
  const int64_t k = s.k();
  const int64_t rhs = s.left_side ? s.n : s.m;
  const int64_t blocks = (rhs + kRhsBlock - 1) / kRhsBlock;
  // op(a) is lower when a is lower and not transposed, or upper and
  // transposed.
  const bool op_lower =
      s.lower == (s.transpose_a == TriangularTranspose::kNoTranspose);
  ParallelForTasks(
      s.batch * blocks, num_threads, [&](int64_t begin, int64_t end) {
        std::vector<C> w;
        for (int64_t t = begin; t < end; ++t) {
          const int64_t e = t / blocks, blk = t % blocks;
          const int64_t lo = blk * kRhsBlock,
                        hi = std::min(rhs, lo + kRhsBlock);
          const OpA<S, C> op{a + e * k * k * kReals, k, s.transpose_a};
          const S* be = b + e * s.m * s.n * kReals;
          S* xe = x + e * s.m * s.n * kReals;
          if (s.left_side) {
            SolveLeft<S, C>(s, op, op_lower, be, xe, lo, hi, w);
          } else {
            SolveRight<S, C>(s, op, op_lower, be, xe, lo, hi, w);
          }
        }
      });
  return OkStatus();
}

}  // namespace

Status CheckTriangularSolve(const TriangularSolveShape& s) {
  if (s.transpose_a != TriangularTranspose::kNoTranspose &&
      s.transpose_a != TriangularTranspose::kTranspose &&
      s.transpose_a != TriangularTranspose::kAdjoint) {
    return UnimplementedError("triangular_solve: unknown transpose_a " +
                              std::to_string(static_cast<int>(s.transpose_a)));
  }
  if (s.batch < 0 || s.m < 0 || s.n < 0) {
    return InvalidArgumentError("triangular_solve: batch " +
                                std::to_string(s.batch) + ", m " +
                                std::to_string(s.m) + " and n " +
                                std::to_string(s.n) + " must be >= 0");
  }
  // a's and b's scalar counts (complex: 2 per element) must fit int64.
  const int64_t k = s.k();
  int64_t a_count = 0, b_count = 0;
  if (__builtin_mul_overflow(s.batch, k, &a_count) ||
      __builtin_mul_overflow(a_count, k, &a_count) ||
      __builtin_mul_overflow(a_count, 2, &a_count) ||
      __builtin_mul_overflow(s.batch, s.m, &b_count) ||
      __builtin_mul_overflow(b_count, s.n, &b_count) ||
      __builtin_mul_overflow(b_count, 2, &b_count)) {
    return InvalidArgumentError(
        "triangular_solve: the element count overflows int64");
  }
  return OkStatus();
}

StatusOr<TriangularSolveShape> MakeTriangularSolveShape(
    std::span<const int64_t> a_dims, std::span<const int64_t> b_dims,
    bool left_side, bool lower, bool unit_diagonal,
    TriangularTranspose transpose_a) {
  const size_t r = a_dims.size();
  if (r < 2 || b_dims.size() != r) {
    return InvalidArgumentError(
        "triangular_solve: a has rank " + std::to_string(r) + " and b rank " +
        std::to_string(b_dims.size()) + "; both must be the same and >= 2");
  }
  TriangularSolveShape s;
  s.left_side = left_side;
  s.lower = lower;
  s.unit_diagonal = unit_diagonal;
  s.transpose_a = transpose_a;
  s.batch = 1;
  for (size_t d = 0; d < r; ++d) {
    if (a_dims[d] < 0 || b_dims[d] < 0) {
      return InvalidArgumentError("triangular_solve: dim " + std::to_string(d) +
                                  " is negative");
    }
  }
  for (size_t d = 0; d + 2 < r; ++d) {
    if (a_dims[d] != b_dims[d]) {
      return InvalidArgumentError("triangular_solve: batch dim " +
                                  std::to_string(d) + " is " +
                                  std::to_string(a_dims[d]) + " in a and " +
                                  std::to_string(b_dims[d]) + " in b");
    }
    if (__builtin_mul_overflow(s.batch, a_dims[d], &s.batch)) {
      return InvalidArgumentError(
          "triangular_solve: the batch overflows int64");
    }
  }
  if (a_dims[r - 2] != a_dims[r - 1]) {
    return InvalidArgumentError(
        "triangular_solve: a is " + std::to_string(a_dims[r - 2]) + " x " +
        std::to_string(a_dims[r - 1]) + "; it must be square");
  }
  s.m = b_dims[r - 2];
  s.n = b_dims[r - 1];
  if (a_dims[r - 1] != s.k()) {
    return InvalidArgumentError(
        "triangular_solve: a's order " + std::to_string(a_dims[r - 1]) +
        " must equal b's dim " + std::to_string(left_side ? r - 2 : r - 1) +
        " (" + std::to_string(s.k()) + ")" +
        (left_side ? " when left_side" : " when not left_side"));
  }
  TPUMESH_RETURN_IF_ERROR(CheckTriangularSolve(s));
  return s;
}

Status TriangularSolveF32(const TriangularSolveShape& s, const float* a,
                          const float* b, float* x, int num_threads) {
  return Run<float, double>(s, a, b, x, num_threads);
}
Status TriangularSolveF64(const TriangularSolveShape& s, const double* a,
                          const double* b, double* x, int num_threads) {
  return Run<double, double>(s, a, b, x, num_threads);
}
Status TriangularSolveC64(const TriangularSolveShape& s, const float* a,
                          const float* b, float* x, int num_threads) {
  return Run<float, std::complex<double>>(s, a, b, x, num_threads);
}
Status TriangularSolveC128(const TriangularSolveShape& s, const double* a,
                           const double* b, double* x, int num_threads) {
  return Run<double, std::complex<double>>(s, a, b, x, num_threads);
}

OpCost TriangularSolveCost(const TriangularSolveShape& s,
                           int bytes_per_element) {
  const double k = static_cast<double>(s.k());
  const double b_elems = static_cast<double>(s.batch) *
                         static_cast<double>(s.m) * static_cast<double>(s.n);
  const double a_elems = static_cast<double>(s.batch) * k * k;
  OpCost c;
  c.flops = 2.0 * k * b_elems;
  c.bytes_read = (a_elems / 2.0 + b_elems) * bytes_per_element;
  c.bytes_written = b_elems * bytes_per_element;
  return c;
}

}  // namespace tpumesh::kernels
