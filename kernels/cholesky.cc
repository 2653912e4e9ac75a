// Cholesky*: a left-looking factorisation in double, one batch entry per
// task, written to the output once the entry is done (so out may equal a).
#include "kernels/cholesky.h"

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
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

double Re(double v) { return v; }
double Re(std::complex<double> v) { return v.real(); }

// One entry: l [n, n] gets the lower factor of g, g(i, j) = a[i][j] when
// lower, conj(a[j][i]) otherwise (the lower factor of a^H), read only at
// i >= j. Returns false when a column's root is NaN.
template <typename S, typename C>
bool FactorEntry(const S* a, int64_t n, bool lower, std::vector<C>& l) {
  l.assign(static_cast<size_t>(n * n), C(0));
  const auto g = [&](int64_t i, int64_t j) {
    return lower ? Load<S, C>(a, i * n + j) : Conj(Load<S, C>(a, j * n + i));
  };
  bool ok = true;
  for (int64_t j = 0; j < n; ++j) {
    const C* lj = l.data() + j * n;
    // v[i] for i >= j, stored in place in column j.
    for (int64_t i = j; i < n; ++i) {
      const C* li = l.data() + i * n;
      C v = g(i, j);
      for (int64_t k = 0; k < j; ++k) v -= li[k] * Conj(lj[k]);
      l[i * n + j] = v;
    }
    const double root = std::sqrt(Re(l[j * n + j]));
    if (std::isnan(root)) ok = false;
    for (int64_t i = j; i < n; ++i) l[i * n + j] /= root;
  }
  return ok;
}

template <typename S, typename C>
Status Run(const CholeskyShape& s, const S* a, S* out, int num_threads) {
  TPUMESH_RETURN_IF_ERROR(CheckCholesky(s));
  if (s.batch == 0 || s.n == 0) return OkStatus();
  constexpr int64_t kReals = std::is_same_v<C, double> ? 1 : 2;
  const int64_t n = s.n;
  ParallelForTasks(s.batch, num_threads, [&](int64_t begin, int64_t end) {
    std::vector<C> l;
    for (int64_t e = begin; e < end; ++e) {
      const S* ae = a + e * n * n * kReals;
      S* oe = out + e * n * n * kReals;
      if (!FactorEntry<S, C>(ae, n, s.lower, l)) {
        const C nan(std::numeric_limits<double>::quiet_NaN());
        for (int64_t i = 0; i < n * n; ++i) Store<S, C>(oe, i, nan);
        continue;
      }
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          // Lower: L as computed; otherwise U = L^H.
          const C v = s.lower ? (j <= i ? l[i * n + j] : C(0))
                              : (j >= i ? Conj(l[j * n + i]) : C(0));
          Store<S, C>(oe, i * n + j, v);
        }
      }
    }
  });
  return OkStatus();
}

}  // namespace

Status CheckCholesky(const CholeskyShape& s) {
  if (s.batch < 0 || s.n < 0) {
    return InvalidArgumentError("cholesky: batch " + std::to_string(s.batch) +
                                " and n " + std::to_string(s.n) +
                                " must be >= 0");
  }
  // a's scalar count (complex: 2 per element) must fit int64.
  int64_t count = 0;
  if (__builtin_mul_overflow(s.batch, s.n, &count) ||
      __builtin_mul_overflow(count, s.n, &count) ||
      __builtin_mul_overflow(count, 2, &count)) {
    return InvalidArgumentError("cholesky: the element count overflows int64");
  }
  return OkStatus();
}

StatusOr<CholeskyShape> MakeCholeskyShape(std::span<const int64_t> a_dims,
                                          bool lower) {
  const size_t r = a_dims.size();
  if (r < 2) {
    return InvalidArgumentError("cholesky: a has rank " + std::to_string(r) +
                                "; it must be >= 2");
  }
  CholeskyShape s;
  s.lower = lower;
  s.batch = 1;
  for (size_t d = 0; d < r; ++d) {
    if (a_dims[d] < 0) {
      return InvalidArgumentError("cholesky: dim " + std::to_string(d) +
                                  " is negative");
    }
  }
  for (size_t d = 0; d + 2 < r; ++d) {
    if (__builtin_mul_overflow(s.batch, a_dims[d], &s.batch)) {
      return InvalidArgumentError("cholesky: the batch overflows int64");
    }
  }
  if (a_dims[r - 2] != a_dims[r - 1]) {
    return InvalidArgumentError(
        "cholesky: a is " + std::to_string(a_dims[r - 2]) + " x " +
        std::to_string(a_dims[r - 1]) + "; it must be square");
  }
  s.n = a_dims[r - 1];
  TPUMESH_RETURN_IF_ERROR(CheckCholesky(s));
  return s;
}

Status CholeskyF32(const CholeskyShape& s, const float* a, float* out,
                   int num_threads) {
  return Run<float, double>(s, a, out, num_threads);
}
Status CholeskyF64(const CholeskyShape& s, const double* a, double* out,
                   int num_threads) {
  return Run<double, double>(s, a, out, num_threads);
}
Status CholeskyC64(const CholeskyShape& s, const float* a, float* out,
                   int num_threads) {
  return Run<float, std::complex<double>>(s, a, out, num_threads);
}
Status CholeskyC128(const CholeskyShape& s, const double* a, double* out,
                    int num_threads) {
  return Run<double, std::complex<double>>(s, a, out, num_threads);
}

OpCost CholeskyCost(const CholeskyShape& s, int bytes_per_element) {
  // XLA's int64 arithmetic: n x elements(a), then / 3 (floor).
  const int64_t elems = s.batch * s.n * s.n;
  OpCost c;
  c.flops = static_cast<double>(s.n * elems / 3);
  c.bytes_read = static_cast<double>(elems) / 2.0 * bytes_per_element;
  c.bytes_written = c.bytes_read;
  return c;
}

}  // namespace tpumesh::kernels
