// Elementwise activations in f32 with a Highway body: GELU (exact erf form
// and tanh approximation), quick-GELU, SiLU, and diffusers' GEGLU.
//
// Definitions (PyTorch's): kGeluErf 0.5 x (1 + erf(x / sqrt 2)); kGeluTanh
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); kQuickGelu x * sigmoid(1.702
// x) (CLIP); kSilu x * sigmoid(x). GegluF32: diffusers' GEGLU after its
// projection: x [rows, 2F] is split into hidden = x[:, :F], gate = x[:, F:],
// y [rows, F] = hidden * gelu_erf(gate) (hidden_states, gate =
// proj(x).chunk(2, dim=-1); hidden_states * F.gelu(gate)).
//
// Contract: ActivationF32 may run in place (y == x), otherwise no overlap;
// GegluF32's y must not overlap x. Accuracy as kernels/ops_math-inl.h.
// Threads as kernels/ops_parallel.h: bit-identical for every thread count.
#ifndef TPUMESH_KERNELS_ACTIVATION_H_
#define TPUMESH_KERNELS_ACTIVATION_H_

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "kernels/cost.h"

namespace tpumesh::kernels {

enum class Activation { kGeluErf, kGeluTanh, kQuickGelu, kSilu };
// "gelu", "gelu_tanh", "quick_gelu", "silu".
std::string_view ActivationName(Activation a);

Status ActivationF32(Activation act, int64_t n, const float* x, float* y,
                     int num_threads = 1);
Status GegluF32(int64_t rows, int64_t f, const float* x, float* y,
                int num_threads = 1);

// Flops per element, as the formulas read (an FMA is 2; the erf, tanh or exp
// is the 1 transcendental per element): gelu 4 (x/sqrt2, x/2, FMA); gelu_tanh
// 8 (x^3: 2, FMA, scale, x/2, FMA); quick_gelu 4 (scale, 1+e, divide, times
// x); silu 3. Reads x once, writes y once.
OpCost ActivationCost(Activation act, int64_t n);
// gelu on rows*f gates plus one multiply per output; reads 2F, writes F per
// row.
OpCost GegluCost(int64_t rows, int64_t f);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_ACTIVATION_H_
