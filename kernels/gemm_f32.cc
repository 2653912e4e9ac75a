#include "kernels/gemm_f32.h"

#include <cstring>

#include "blis.h"

namespace tpumesh::kernels {

void GemmF32(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
             int64_t ldb, bool b_transposed, float* c, int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, n * sizeof(float));
    return;
  }
  float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  rntm_t rntm = BLIS_RNTM_INITIALIZER;
  bli_rntm_set_num_threads(1, &rntm);
  // op(B)[kk, j]: row stride and column stride of the K x N view.
  const inc_t rsb = b_transposed ? 1 : ldb;
  const inc_t csb = b_transposed ? ldb : 1;
  bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, const_cast<float*>(a), lda, 1,
               const_cast<float*>(b), rsb, csb, &beta, c, ldc, 1, nullptr, &rntm);
}

}  // namespace tpumesh::kernels
