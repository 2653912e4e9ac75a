// CLIP text encoder, as transformers' CLIPTextModel and
// CLIPTextModelWithProjection: token + position embeddings, pre-LN encoder
// layers with a causal mask, quick_gelu or gelu, a final layer norm; the
// pooled output at the end-of-text token and, with a projection, its
// text_projection (SDXL's second encoder).
//
// Outputs as the pipelines use them: SD 1.x / 2.x take last_hidden_state;
// SDXL takes each encoder's penultimate hidden state (hidden_states[-2], the
// second-to-last layer's output, before the final LayerNorm) and the second
// encoder's text_embeds.
#ifndef TPUMESH_MODELS_CLIP_H_
#define TPUMESH_MODELS_CLIP_H_

#include <vector>

#include "base/status.h"
#include "models/configs.h"
#include "models/nn.h"
#include "models/params.h"

namespace tpumesh::models {

class ClipTextModel {
 public:
  static StatusOr<ClipTextModel> Create(const ClipTextConfig& config, ParamMap params);
  // One map per model rank (ShardParams / ShardManifest, models/params.h):
  // the model runs tensor-parallel over a Ctx::model axis of that size.
  static StatusOr<ClipTextModel> Create(const ClipTextConfig& config, std::vector<ParamMap> ranks);
  const ClipTextConfig& config() const { return config_; }
  const ParamMap& params() const { return ranks_[0]; }  // rank 0's (the whole model when unsplit)
  const std::vector<ParamMap>& ranks() const { return ranks_; }

  struct Outputs {
    Array last_hidden_state;  // [B, L, H], after the final LayerNorm
    Array penultimate;        // [B, L, H], hidden_states[-2]
    Array pooled;             // [B, H], last_hidden_state at the EOS token
    Array text_embeds;        // [B, projection_dim]; with_projection only
  };
  // ids: [B, L] int32, L <= max_position_embeddings, every id < vocab_size
  // (InvalidArgument otherwise). Every layer runs (as transformers runs them
  // with output_hidden_states); the pooled rows and the projection are
  // recorded in Ctx::ops like any layer.
  StatusOr<Outputs> Encode(const Ctx& ctx, const Array& ids) const;
  // Encode's last_hidden_state.
  StatusOr<Array> Forward(const Ctx& ctx, const Array& ids) const;

 private:
  ClipTextModel(const ClipTextConfig& c, std::vector<ParamMap> r) : config_(c), ranks_(std::move(r)) {}
  ClipTextConfig config_;
  std::vector<ParamMap> ranks_;
};

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_CLIP_H_
