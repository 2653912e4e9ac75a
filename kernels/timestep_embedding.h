// Sinusoidal timestep embedding, exactly diffusers'
// get_timestep_embedding(timesteps, embedding_dim, flip_sin_to_cos,
// downscale_freq_shift, scale, max_period)
// (src/diffusers/models/embeddings.py), with a Highway body for the sines and
// cosines.
//
// Definition, in f32 as torch computes it: half = dim / 2; for i < half,
// exponent_i = (-ln(max_period) * i) / (half - downscale_freq_shift),
// freq_i = exp(exponent_i), arg[b, i] = scale * (t_b * freq_i);
// y[b] = [sin(arg) | cos(arg)], or [cos | sin] when flip_sin_to_cos; an odd
// dim gets one zero column at the end. SD1.5's UNet uses dim 320,
// flip_sin_to_cos = true, shift = 0.
//
// Contract: timesteps [batch], y [batch, dim]. InvalidArgument when dim < 1 or
// half == downscale_freq_shift (diffusers would divide 0 by 0 there and emit
// NaN). The frequencies are computed in scalar f32 (glibc expf, within 1 ulp
// of torch's), the arguments with the same f32 roundings as torch, sin/cos
// with Highway's (3 ulp, valid for |arg| <= 39000: t <= 1000 is far inside).
// An ulp of difference in freq_i moves arg by up to ~6e-5 at t = 1000, so
// tests compare against the same f32 arguments, not against float64 math.
#ifndef TPUMESH_KERNELS_TIMESTEP_EMBEDDING_H_
#define TPUMESH_KERNELS_TIMESTEP_EMBEDDING_H_

#include <cstdint>

#include "base/status.h"
#include "kernels/cost.h"

namespace tpumesh::kernels {

Status TimestepEmbeddingF32(const float* timesteps, int64_t batch, int64_t dim,
                            bool flip_sin_to_cos, float downscale_freq_shift,
                            float* y, float scale = 1.0f,
                            float max_period = 10000.0f);

// 2 flops per frequency (multiply, divide) plus 2 per (b, i) (t * freq,
// scale); half exps plus 2 transcendentals per (b, i) (sin, cos). Reads
// timesteps, writes y.
OpCost TimestepEmbeddingCost(int64_t batch, int64_t dim);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_TIMESTEP_EMBEDDING_H_
