// Elementwise and data-movement ops of the UNet/VAE in f32, NCHW, with
// Highway bodies: add/mul of equal shapes, add/mul of a per-channel vector
// broadcast over [outer, C, inner] (a conv bias [C], a time embedding [N, C]
// over [N, C, H, W], a Linear bias over [rows, C] with inner = 1), concat along
// channels, nearest upsample x2.
//
// Contract: every op checks its sizes first (InvalidArgument). BinaryF32 and
// BroadcastChannelF32 may run in place (y == a or y == x); ConcatChannelsF32
// and UpsampleNearest2xF32 must not overlap. Threads as
// kernels/ops_parallel.h: bit-identical for every thread count (no op here
// reduces anything).
#ifndef TPUMESH_KERNELS_ELEMENTWISE_H_
#define TPUMESH_KERNELS_ELEMENTWISE_H_

#include <cstdint>

#include "base/status.h"
#include "kernels/cost.h"

namespace tpumesh::kernels {

enum class BinaryOp { kAdd, kMul };

// y[i] = a[i] op b[i], i < n.
Status BinaryF32(BinaryOp op, int64_t n, const float* a, const float* b,
                 float* y, int num_threads = 1);

// y[o, c, i] = x[o, c, i] op v[o * v_outer_stride + c], for o < outer, c <
// channels, i < inner. v_outer_stride = 0 broadcasts one [C] vector (a bias),
// = channels gives one vector per outer index (a [N, C] time embedding).
Status BroadcastChannelF32(BinaryOp op, int64_t outer, int64_t channels,
                           int64_t inner, const float* x, const float* v,
                           int64_t v_outer_stride, float* y,
                           int num_threads = 1);

// [N, Ca, inner] ++ [N, Cb, inner] -> y [N, Ca + Cb, inner] (torch.cat(dim=1)).
Status ConcatChannelsF32(int64_t batch, int64_t channels_a, int64_t channels_b,
                         int64_t inner, const float* a, const float* b,
                         float* y, int num_threads = 1);

// x [N, C, H, W] -> y [N, C, 2H, 2W], y[n, c, i, j] = x[n, c, i / 2, j / 2]
// (F.interpolate(scale_factor=2, mode="nearest")).
Status UpsampleNearest2xF32(int64_t batch, int64_t channels, int64_t height,
                            int64_t width, const float* x, float* y,
                            int num_threads = 1);

// 1 flop per output; reads both operands (the broadcast vector once), writes y.
OpCost BinaryCost(int64_t n);
OpCost BroadcastChannelCost(int64_t outer, int64_t channels, int64_t inner,
                            int64_t v_outer_stride);
// Pure data movement: 0 flops.
OpCost ConcatChannelsCost(int64_t batch, int64_t channels_a, int64_t channels_b,
                          int64_t inner);
OpCost UpsampleNearest2xCost(int64_t batch, int64_t channels, int64_t height,
                             int64_t width);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_ELEMENTWISE_H_
