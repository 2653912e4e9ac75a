// UNet2DConditionModel as diffusers computes it (the SD 1.x / 2.x / SDXL
// subset: positional time embedding, SDXL's text_time added conditioning, DownBlock2D / CrossAttnDownBlock2D,
// UNetMidBlock2DCrossAttn, UpBlock2D / CrossAttnUpBlock2D, ResnetBlock2D,
// Transformer2DModel with conv or linear projections, GEGLU feed-forward).
// Every size comes from the config; attention_head_dim is read as diffusers
// reads it (the number of heads).
#ifndef TPUMESH_MODELS_UNET_H_
#define TPUMESH_MODELS_UNET_H_

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/configs.h"
#include "models/nn.h"
#include "models/params.h"

namespace tpumesh::models {

class UNetModel {
 public:
  // Checks the parameters against the config's manifest; Unimplemented for
  // a mid_block_scale_factor other than 1.
  static StatusOr<UNetModel> Create(const UNetConfig& config, ParamMap params);
  // One map per model rank (ShardParams / ShardManifest, models/params.h):
  // the model runs tensor-parallel over a Ctx::model axis of that size.
  static StatusOr<UNetModel> Create(const UNetConfig& config, std::vector<ParamMap> ranks);
  const UNetConfig& config() const { return config_; }
  const ParamMap& params() const { return ranks_[0]; }  // rank 0's (the whole model when unsplit)
  const std::vector<ParamMap>& ranks() const { return ranks_; }

  // sample [B, C_in, h, w] f32 (h, w multiples of 2^(blocks-1)); timesteps:
  // one per sample; encoder_hidden_states [B, L, cross_attention_dim].
  // Returns the model output [B, C_out, h, w].
  // tap, when set, sees each stage's output by its diffusers module name
  // ("time_proj", "time_embedding", "conv_in", "down_blocks.0", ...,
  // "mid_block", "up_blocks.0", ..., "conv_norm_out", "conv_out").
  using Tap = std::function<void(const std::string& module, const Array& output)>;
  // SDXL's added conditioning (addition_embed_type "text_time"): the pooled
  // text embedding [B, projection_class_embeddings_input_dim - 6 x
  // addition_time_embed_dim] and six size/crop values per sample (B x 6,
  // row-major): emb += add_embedding(concat(text_embeds,
  // timestep_embedding(time_ids, addition_time_embed_dim))). Required for
  // such a UNet; ignored otherwise.
  struct AddedCond {
    Array text_embeds;
    std::vector<float> time_ids;
  };
  StatusOr<Array> Forward(const Ctx& ctx, const Array& sample, const std::vector<float>& timesteps,
                          const Array& encoder_hidden_states, const Tap& tap = {},
                          const AddedCond* added = nullptr) const;

 private:
  UNetModel(const UNetConfig& c, std::vector<ParamMap> r) : config_(c), ranks_(std::move(r)) {}
  StatusOr<Array> Resnet(const Ctx& ctx, const ParamMap& P, const std::string& p, const Array& x,
                         const Array& temb) const;
  StatusOr<Array> Transformer(const Ctx& ctx, const ParamMap& P, const std::string& p, const Array& x,
                              const Array& ehs, int heads, int layers) const;

  UNetConfig config_;
  std::vector<ParamMap> ranks_;
};

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_UNET_H_
