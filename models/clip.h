// CLIP text encoder, as transformers' CLIPTextModel: token + position
// embeddings, pre-LN encoder layers with a causal mask, quick_gelu or gelu,
// a final layer norm. Output: last_hidden_state.
#ifndef TPUMESH_MODELS_CLIP_H_
#define TPUMESH_MODELS_CLIP_H_

#include "base/status.h"
#include "models/configs.h"
#include "models/nn.h"
#include "models/params.h"

namespace tpumesh::models {

class ClipTextModel {
 public:
  static StatusOr<ClipTextModel> Create(const ClipTextConfig& config, ParamMap params);
  const ClipTextConfig& config() const { return config_; }
  const ParamMap& params() const { return params_; }

  // ids: [B, L] int32, L <= max_position_embeddings, every id < vocab_size
  // (InvalidArgument otherwise). Returns last_hidden_state [B, L, H].
  StatusOr<Array> Forward(const Ctx& ctx, const Array& ids) const;

 private:
  ClipTextModel(const ClipTextConfig& c, ParamMap p) : config_(c), params_(std::move(p)) {}
  ClipTextConfig config_;
  ParamMap params_;
};

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_CLIP_H_
