#include "kernels/bf16.h"

namespace tpumesh::kernels {

void F32ToBf16(const float* in, bf16* out, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) out[i] = F32ToBf16(in[i]);
}

void Bf16ToF32(const bf16* in, float* out, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) out[i] = Bf16ToF32(in[i]);
}

}  // namespace tpumesh::kernels
