// Group norm and layer norm in f32, as torch.nn.GroupNorm / nn.LayerNorm
// (diffusers' ResnetBlock2D, Transformer2DModel, CLIP), with a Highway body.
//
// GroupNormF32: x [N, C, inner] (inner = H*W for NCHW), C split into
// num_groups groups of C/G consecutive channels; per (n, g) the mean and the
// biased variance are taken over those C/G * inner elements and
// y = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c]; then, when
// fuse_silu, y = silu(y) (diffusers always follows the norm with SiLU in
// ResnetBlock2D: one pass over y instead of two). LayerNormF32: x [rows, dim],
// statistics per row, gamma/beta [dim]. gamma and beta may both be null
// (elementwise_affine=False); not one alone.
//
// Contract: checks run before compute (InvalidArgument: G must divide C,
// positive sizes, eps >= 0). y may equal x (in place); otherwise they must not
// overlap. Statistics: two passes (mean, then sum of squared deviations —
// never E[x^2] - mean^2), f32 vector partial sums folded into a double every
// 1024 elements; rstd = 1/sqrt(var + eps) in double. Threads as
// kernels/ops_parallel.h (one task per (n, g) / per block of rows):
// bit-identical for every thread count.
#ifndef TPUMESH_KERNELS_NORM_H_
#define TPUMESH_KERNELS_NORM_H_

#include <cstdint>

#include "base/status.h"
#include "kernels/cost.h"

namespace tpumesh::kernels {

struct GroupNormShape {
  int64_t batch = 1;
  int64_t channels = 0;
  int64_t inner = 1;  // H * W
  int64_t num_groups = 32;
};

Status CheckGroupNorm(const GroupNormShape& s, float eps, const float* gamma,
                      const float* beta);
Status GroupNormF32(const GroupNormShape& s, float eps, const float* x,
                    const float* gamma, const float* beta, float* y,
                    bool fuse_silu = false, int num_threads = 1);

Status CheckLayerNorm(int64_t rows, int64_t dim, float eps, const float* gamma,
                      const float* beta);
Status LayerNormF32(int64_t rows, int64_t dim, float eps, const float* x,
                    const float* gamma, const float* beta, float* y,
                    int num_threads = 1);

// Per element: 1 flop for the mean, 3 for the variance (sub, mul, add), 4 to
// normalise (sub, mul rstd, mul gamma, add beta; 2 without affine), plus SiLU's
// 3 flops and 1 exp when fused. One rsqrt per (n, g) / per row. Reads x (and
// gamma, beta) once, writes y once.
OpCost GroupNormCost(const GroupNormShape& s, bool affine = true,
                     bool fuse_silu = false);
OpCost LayerNormCost(int64_t rows, int64_t dim, bool affine = true);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_NORM_H_
