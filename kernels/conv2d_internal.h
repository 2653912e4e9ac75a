// Internal to the packed-weight conv (conv2d_packed.cc, conv2d_bf16.cc): the
// implicit-GEMM path on bf16 pair panels (AVX512-BF16, or AMX tiles). Not part of the public API; conv2d.h and
// docs/kernels.md ("The conv") describe the layouts.
#ifndef TPUMESH_KERNELS_CONV2D_INTERNAL_H_
#define TPUMESH_KERNELS_CONV2D_INTERNAL_H_

#include "base/status.h"
#include "kernels/conv2d.h"

namespace tpumesh::kernels::conv_internal {

// y = conv(x, W) + bias (bias may be null) with wt = W^T [(dy, dx, c), C_out]
// packed for provider kBf16 or kAmx at kDefault; the shape and pointers
// already checked (Conv2dPacked). Only call when Avx512Bf16Active() (kBf16)
// or AmxMatmulActive() (kAmx). ResourceExhausted if the channels-last copy of
// x cannot be allocated.
Status Bf16Conv2d(const Conv2dShape& s, const float* x, const PackedMatrix& wt,
                  const float* bias, float* y, int num_threads);

}  // namespace tpumesh::kernels::conv_internal

#endif  // TPUMESH_KERNELS_CONV2D_INTERNAL_H_
