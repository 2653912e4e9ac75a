// FluxTransformer2DModel as diffusers computes it (FLUX.1-dev and -schnell):
// x_embedder on the packed latent tokens, context_embedder on the T5 states,
// the conditioning vector temb = timestep MLP (+ guidance MLP when
// guidance_embeds) + the pooled CLIP text through its projection; then
// num_layers double-stream blocks (each stream its AdaLayerNormZero, one
// joint attention over [text; image] with RMSNorm on q and k and rotary
// position embeddings, each stream its GELU-tanh feed-forward, gated
// residuals), num_single_layers single-stream blocks over the joined
// sequence (attention and MLP side by side, one output projection), and
// AdaLayerNormContinuous + proj_out on the image tokens.
//
// Positions: the text tokens' ids are (0, 0, 0), image token (r, c)'s are
// (0, r, c); each axis of axes_dims_rope rotates its share of every head
// (theta 10000), as FluxPosEmbed.
#ifndef TPUMESH_MODELS_FLUX_H_
#define TPUMESH_MODELS_FLUX_H_

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "models/configs.h"
#include "models/nn.h"
#include "models/params.h"

namespace tpumesh::models {

// The rotary table [L, 2, head_dim] (cos then sin, each angle repeated for
// both members of its pair) of `text` text tokens followed by an h x w grid
// of image tokens, row-major: FluxPosEmbed of the pipeline's txt_ids/img_ids.
std::vector<float> FluxRopeTable(const std::vector<int>& axes_dims, int64_t text, int64_t h, int64_t w);

class FluxTransformerModel {
 public:
  // One map per model rank (ShardParams / ShardManifest, models/params.h):
  // the transformer runs tensor-parallel over a Ctx::model axis of that
  // size (attention by heads, MLPs by columns; blocks.h).
  static StatusOr<FluxTransformerModel> Create(const FluxTransformerConfig& config, std::vector<ParamMap> ranks);
  const FluxTransformerConfig& config() const { return config_; }
  const std::vector<ParamMap>& ranks() const { return ranks_; }

  struct Inputs {
    const Array* hidden = nullptr;   // [B, h*w, in_channels], packed latents
    int64_t h = 0, w = 0;            // the token grid (latent pixels / 2)
    const Array* context = nullptr;  // [B, L, joint_attention_dim], T5's last_hidden_state
    const Array* pooled = nullptr;   // [B, pooled_projection_dim], CLIP's pooled output
    std::vector<float> timesteps;    // [B], the pipeline's t / 1000 (the sigma)
    std::vector<float> guidance;     // [B] with guidance_embeds, else empty
  };
  // Returns [B, h*w, out_channels] (the predicted velocity, packed).
  StatusOr<Array> Forward(const Ctx& ctx, const Inputs& in) const;

 private:
  FluxTransformerModel(const FluxTransformerConfig& c, std::vector<ParamMap> r) : config_(c), ranks_(std::move(r)) {}
  // TimestepEmbedding (linear_1, SiLU, linear_2) of Timesteps(256) of v * 1000.
  StatusOr<Array> Embed(const Ctx& ctx, const ParamMap& P, const std::string& p, const std::vector<float>& v) const;
  // q, k, v of one attention ([B, L, D] each) after RMSNorm of q and k.
  Status Qkv(const Ctx& ctx, const ParamMap& P, const std::string& p, const Array& x, bool added, Array* q, Array* k,
             Array* v) const;

  FluxTransformerConfig config_;
  std::vector<ParamMap> ranks_;
};

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_FLUX_H_
