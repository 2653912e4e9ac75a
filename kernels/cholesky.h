// StableHLO's `cholesky` (spec: docs/spec.md "cholesky"): for each batch
// entry of a [..., n, n], the factor L with a = L L^H (lower) or U with
// a = U^H U (not lower), in f32, f64, complex64 and complex128.
//
// Definition, as XLA:CPU's stablehlo.cholesky (checked against
// jaxlib's CPU client running the op; the spec leaves the rest
// implementation-defined): only the `lower` triangle of a is read (lower:
// i >= j, else i <= j), diagonal included; the other triangle of the
// result is zero. Not lower is the lower factor of a^H, conjugate-
// transposed. Column j of the lower factor is
//   v = a[j:, j] - L[j:, :j] conj(L[j, :j])   (each sum over k ascending)
//   L[j:, j] = v / sqrt(re(v[0]))
// so a diagonal of Hermitian a comes out real and positive, and a complex
// diagonal keeps its imaginary part divided by the same root. When any
// column's root is NaN (a not positive definite: re(v[0]) < 0, or a NaN met
// on the way) the whole entry's result is NaN (complex: NaN + 0i), as
// XLA's; a zero root alone is not a failure and gives 0 / 0 = NaN on that
// diagonal element only (XLA: [[1, 0], [0, 0]] -> [[1, 0], [0, NaN]]).
// XLA blocks above order 128 (a triangular solve by the complex diagonal
// block); for Hermitian positive definite a both are the factor.
//
// Layouts, row-major: a and the result [batch, n, n]; complex buffers are
// interleaved (re, im) pairs. out may equal a (in place); otherwise no
// overlap.
//
// Precision: computed in double (std::complex<double> for the complex
// types) and rounded once to the output type, so f32 results carry the
// rounding of the answer plus cond(a) times double's, not f32's.
// tests/kernels/cholesky_test.cc checks L L^H against a.
//
// Threads as kernels/ops_parallel.h: one task per batch entry (a batch of
// 1 runs on one thread); an entry's arithmetic does not depend on the
// split, so results are bit-identical for every thread count.
#ifndef TPUMESH_KERNELS_CHOLESKY_H_
#define TPUMESH_KERNELS_CHOLESKY_H_

#include <cstdint>
#include <span>

#include "base/status.h"
#include "kernels/cost.h"

namespace tpumesh::kernels {

struct CholeskyShape {
  int64_t batch = 1;  // product of the leading dims of a
  int64_t n = 0;      // the order of a
  bool lower = true;
};

// From StableHLO's operand dims: checks rank(a) >= 2 and a square;
// InvalidArgument names the dim.
StatusOr<CholeskyShape> MakeCholeskyShape(std::span<const int64_t> a_dims,
                                          bool lower);

// InvalidArgument unless batch, n >= 0 and the element count fits int64.
Status CheckCholesky(const CholeskyShape& s);

Status CholeskyF32(const CholeskyShape& s, const float* a, float* out,
                   int num_threads = 1);
Status CholeskyF64(const CholeskyShape& s, const double* a, double* out,
                   int num_threads = 1);
// complex64: interleaved float pairs.
Status CholeskyC64(const CholeskyShape& s, const float* a, float* out,
                   int num_threads = 1);
// complex128: interleaved double pairs.
Status CholeskyC128(const CholeskyShape& s, const double* a, double* out,
                    int num_threads = 1);

// XLA's count (xla/service/hlo_cost_analysis.cc, HandleCholesky):
// flops = n x elements(a) / 3 in int64 (floor of batch n^3 / 3), real and
// complex alike; bytes read = half of a, bytes written = half of a
// (bytes_per_element 4, 8 or 16); no transcendentals.
OpCost CholeskyCost(const CholeskyShape& s, int bytes_per_element);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_CHOLESKY_H_
