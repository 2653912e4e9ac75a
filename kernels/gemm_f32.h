// f32 GEMM through BLIS: C[M,N] = A[M,K] x op(B) (+ C when accumulating).
// The f32 provider (precision=highest) and the reference path the models use
// until the MXU kernels are wired in.
//
// Contract: row-major A (lda) and C (ldc); B is either [K,N] row-major (ldb)
// or, with b_transposed, [N,K] row-major — PyTorch's Linear weight layout.
// beta = 0 (accumulate=false) means C is overwritten and never read. One BLIS
// thread per call, so a call inside a device's arena never starts its own
// pool, and the result does not depend on the host's thread count.
#ifndef TPUMESH_KERNELS_GEMM_F32_H_
#define TPUMESH_KERNELS_GEMM_F32_H_

#include <cstdint>

namespace tpumesh::kernels {

void GemmF32(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
             int64_t ldb, bool b_transposed, float* c, int64_t ldc, bool accumulate = false);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_GEMM_F32_H_
