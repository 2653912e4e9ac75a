// StableHLO's `triangular_solve` (spec: docs/spec.md "triangular_solve"):
// for each batch entry, x with op(a) x = b (left_side) or x op(a) = b
// (right side), a triangular, in f32, f64, complex64 and complex128.
//
// Definition: op(a) is a (NO_TRANSPOSE), a^T (TRANSPOSE) or a^H (ADJOINT;
// for real types the same as TRANSPOSE). Only the triangle of a that `lower`
// names is read (lower: i >= j, else i <= j), diagonal included unless
// unit_diagonal, which takes it as 1 without reading it: the other entries
// may hold anything, as for LAPACK's trsm and XLA. A zero on a read diagonal
// gives inf / NaN, as trsm does (no check: the spec leaves a singular a
// undefined).
//
// Layouts, row-major: a [batch, k, k], b and x [batch, m, n], k = m when
// left_side, n otherwise. Complex buffers are interleaved (re, im) pairs.
// x may equal b (in place); otherwise no overlap.
//
// Precision: the substitution is a plain sweep (rows of x in order, 64
// right-hand sides at a time; the right side as op(a)^T x^T = b^T, each
// element's sum in the order of the triangle) computed in double
// (std::complex<double> for the complex types), rounded once to the output
// type, so f32 results carry the rounding of the answer plus cond(a) times
// double's, not f32's (XLA:CPU's Eigen trsm works in f32).
// tests/kernels/triangular_solve_test.cc checks op(a) x against b;
// tests/kernels/jax_parity_test.cc checks x against JAX's.
//
// Threads as kernels/ops_parallel.h: tasks are (batch entry, block of 64
// right-hand sides: columns of b for the left side, rows for the right),
// independent systems whose arithmetic does not depend on the blocking, so
// results are bit-identical for every thread count.
#ifndef TPUMESH_KERNELS_TRIANGULAR_SOLVE_H_
#define TPUMESH_KERNELS_TRIANGULAR_SOLVE_H_

#include <cstdint>
#include <span>

#include "base/status.h"
#include "kernels/cost.h"

namespace tpumesh::kernels {

// StableHLO's transpose_a values.
enum class TriangularTranspose { kNoTranspose = 0, kTranspose, kAdjoint };

struct TriangularSolveShape {
  int64_t batch = 1;  // product of the leading dims of a and b
  int64_t m = 0;      // rows of b
  int64_t n = 0;      // columns of b
  bool left_side = true;
  bool lower = true;
  bool unit_diagonal = false;
  TriangularTranspose transpose_a = TriangularTranspose::kNoTranspose;

  // The order of a: m when left_side, n otherwise.
  int64_t k() const { return left_side ? m : n; }
};

// From StableHLO's operand dims: checks rank(a) == rank(b) >= 2, equal batch
// dims, a square, its order equal to b's dim -2 (left_side) or -1
// (otherwise); InvalidArgument names the dim.
StatusOr<TriangularSolveShape> MakeTriangularSolveShape(
    std::span<const int64_t> a_dims, std::span<const int64_t> b_dims,
    bool left_side, bool lower, bool unit_diagonal,
    TriangularTranspose transpose_a);

// InvalidArgument unless batch, m, n >= 0 and the element counts fit int64;
// Unimplemented for a transpose_a outside the enum.
Status CheckTriangularSolve(const TriangularSolveShape& s);

Status TriangularSolveF32(const TriangularSolveShape& s, const float* a,
                          const float* b, float* x, int num_threads = 1);
Status TriangularSolveF64(const TriangularSolveShape& s, const double* a,
                          const double* b, double* x, int num_threads = 1);
// complex64: interleaved float pairs.
Status TriangularSolveC64(const TriangularSolveShape& s, const float* a,
                          const float* b, float* x, int num_threads = 1);
// complex128: interleaved double pairs.
Status TriangularSolveC128(const TriangularSolveShape& s, const double* a,
                           const double* b, double* x, int num_threads = 1);

// XLA's count (xla/service/hlo_cost_analysis.cc, HandleTriangularSolve):
// flops = 2 (FMA) x k x elements(b) = 2 batch k m n, for real and complex
// alike; bytes read = half of a plus b, bytes written = x (bytes_per_element
// 4, 8 or 16); no transcendentals.
OpCost TriangularSolveCost(const TriangularSolveShape& s,
                           int bytes_per_element);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_TRIANGULAR_SOLVE_H_
