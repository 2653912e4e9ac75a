// Matrix-unit FLOP counts of one forward pass of each component, from its
// config and input sizes alone (no weights, nothing executed): the figure a
// measured time is divided by to get GFLOP/s (docs/models.md).
//
// Counted: 2 M N K for every Linear ([rows, in] x [in, out]), every
// convolution as its im2col product (w [C_out, C_in kh kw] x col [C_in kh kw,
// N Ho Wo], stride and padding included), and both products of every
// attention, Q K^T and P V (2 Lq Lk D each, per batch entry and head; the
// head count does not change the sum). Not counted: biases, norms, softmax,
// activations and residual adds (vector work, under 1% of SD's flops). The
// count visits the same block declarations the parameter manifests come
// from (blocks.h), which mirror the Forward of clip.cc, unet.cc and vae.cc
// module by module; tests/models/flops_test.cc checks it against diffusers' own modules (SD
// 1.5, counted with PyTorch forward hooks) and against the ops the models
// record in a dry run (Ctx::ops).
#ifndef TPUMESH_MODELS_FLOPS_H_
#define TPUMESH_MODELS_FLOPS_H_

#include <cstdint>

#include "models/configs.h"

namespace tpumesh::models {

struct MatmulFlops {
  double conv = 0;       // Conv2d layers
  double linear = 0;     // Linear layers (attention projections, FFN, time MLPs)
  double attention = 0;  // Q K^T and P V
  double total() const { return conv + linear + attention; }
};

// CLIPTextModel on [batch, seq_len] token ids (last_hidden_state; the
// projection of CLIPTextModelWithProjection is not counted).
MatmulFlops ClipTextMatmulFlops(const ClipTextConfig& c, int64_t batch, int64_t seq_len = 77);
// UNet2DConditionModel on sample [batch, C_in, height, width] (latent pixels)
// with encoder_hidden_states of context_len tokens; SDXL's added embedding
// included when the config has it.
MatmulFlops UNetMatmulFlops(const UNetConfig& c, int64_t batch, int64_t height, int64_t width,
                            int64_t context_len = 77);
// AutoencoderKL: Decode of latents [batch, latent_channels, height, width]
// (post_quant_conv included) and EncodeMean of images [batch, in_channels,
// height, width] (quant_conv included).
MatmulFlops VaeDecoderMatmulFlops(const VaeConfig& c, int64_t batch, int64_t height, int64_t width);
MatmulFlops VaeEncoderMatmulFlops(const VaeConfig& c, int64_t batch, int64_t height, int64_t width);
// T5EncoderModel on [batch, seq_len] token ids.
MatmulFlops T5EncoderMatmulFlops(const T5EncoderConfig& c, int64_t batch, int64_t seq_len);
// FluxTransformer2DModel on latents of height x width latent pixels (packed
// into height/2 x width/2 tokens) with context_len text tokens.
MatmulFlops FluxTransformerMatmulFlops(const FluxTransformerConfig& c, int64_t batch, int64_t height, int64_t width,
                                       int64_t context_len);

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_FLOPS_H_
