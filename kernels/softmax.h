// Softmax over the last dimension in f32, numerically stable, with a
// Highway body: y[r, i] = exp(x[r, i] - max_r) / sum_j exp(x[r, j] - max_r).
//
// Contract: x, y [rows, dim]; y may equal x (in place), otherwise no overlap.
// -inf entries are allowed and give 0 (a masked score); a row of only -inf
// has no defined softmax and yields 0 everywhere instead of NaN (what a
// fully masked attention row should contribute). The sum is accumulated as in
// kernels/ops_math-inl.h (f32 chunks folded into a double); exp is Highway's
// (1 ulp). Threads as kernels/ops_parallel.h: bit-identical for every count.
#ifndef TPUMESH_KERNELS_SOFTMAX_H_
#define TPUMESH_KERNELS_SOFTMAX_H_

#include <cstdint>

#include "base/status.h"
#include "kernels/cost.h"

namespace tpumesh::kernels {

Status SoftmaxF32(int64_t rows, int64_t dim, const float* x, float* y,
                  int num_threads = 1);

// Per element: max (1), subtract (1), sum (1), scale (1) = 4 flops and 1 exp;
// one reciprocal per row. Reads x once, writes y once.
OpCost SoftmaxCost(int64_t rows, int64_t dim);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_SOFTMAX_H_
