// Scalar references for the ops of conv2d.h, norm.h, softmax.h,
// activation.h, elementwise.h, timestep_embedding.h and attention.h: the
// definitions written as plain loops, for tests (and for anyone who wants to
// read what an op computes without its blocking).
//
// Contract: same layouts and arguments as the fast ops, no checks (callers
// pass valid shapes), no threads, no SIMD. Every sum is accumulated in
// double and every function evaluated in double, then rounded once to f32,
// so a reference is the true value to within an f32 rounding, and a test's
// tolerance measures only the fast op's error (an f32 reordering, an
// approximated exp/erf/sin). Exception, on purpose: TimestepEmbedding forms
// its frequencies and arguments with diffusers' own f32 roundings (as the
// fast op does), since that is what diffusers computes; only sin/cos are in
// double.
#ifndef TPUMESH_KERNELS_OPS_REFERENCE_H_
#define TPUMESH_KERNELS_OPS_REFERENCE_H_

#include <cstdint>
#include <optional>

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/conv2d.h"
#include "kernels/elementwise.h"
#include "kernels/norm.h"

namespace tpumesh::kernels::reference {

// Direct convolution: y[n, co, oy, ox] = bias[co] + sum w[co, ci, dy, dx]
// x[...].
void Conv2d(const Conv2dShape& s, const float* x, const float* w,
            const float* bias, float* y);
void GroupNorm(const GroupNormShape& s, float eps, const float* x,
               const float* gamma, const float* beta, float* y,
               bool fuse_silu = false);
void LayerNorm(int64_t rows, int64_t dim, float eps, const float* x,
               const float* gamma, const float* beta, float* y);
void Softmax(int64_t rows, int64_t dim, const float* x, float* y);
double ActivationValue(Activation act, double x);  // in double
void ActivationF32(Activation act, int64_t n, const float* x, float* y);
void Geglu(int64_t rows, int64_t f, const float* x, float* y);
void Binary(BinaryOp op, int64_t n, const float* a, const float* b, float* y);
void BroadcastChannel(BinaryOp op, int64_t outer, int64_t channels,
                      int64_t inner, const float* x, const float* v,
                      int64_t v_outer_stride, float* y);
void ConcatChannels(int64_t batch, int64_t channels_a, int64_t channels_b,
                    int64_t inner, const float* a, const float* b, float* y);
void UpsampleNearest2x(int64_t batch, int64_t channels, int64_t height,
                       int64_t width, const float* x, float* y);
void TimestepEmbedding(const float* timesteps, int64_t batch, int64_t dim,
                       bool flip_sin_to_cos, float downscale_freq_shift,
                       float* y, float scale = 1.0f,
                       float max_period = 10000.0f);
// Full softmax over each row of scores (Lk doubles per row at a time).
void Attention(const AttentionShape& s, const float* q, const float* k,
               const float* v, float* out,
               std::optional<float> scale = std::nullopt, bool causal = false);

}  // namespace tpumesh::kernels::reference

#endif  // TPUMESH_KERNELS_OPS_REFERENCE_H_
