// T5 encoder, as transformers' T5EncoderModel (Flux's text_encoder_2, T5
// v1.1): token embeddings (no scaling, no position embeddings), pre-norm
// blocks with RMS layer norms, self-attention without 1/sqrt(d) scaling plus
// a relative position bias (bidirectional buckets, the first block's table
// shared by every block), a gated-GELU (tanh) feed-forward, a final RMS norm.
// No attention mask: FluxPipeline passes none (every token, padding included,
// attends and is attended to).
#ifndef TPUMESH_MODELS_T5_H_
#define TPUMESH_MODELS_T5_H_

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "models/configs.h"
#include "models/nn.h"
#include "models/params.h"

namespace tpumesh::models {

// transformers' T5Attention._relative_position_bucket(relative_position =
// key - query, bidirectional=True): half the buckets per direction, the
// first half of those exact, the rest log-spaced up to max_distance.
int T5RelativeBucket(int64_t relative_position, int num_buckets, int max_distance);

class T5EncoderModel {
 public:
  // One map per model rank; T5 is not split over a model axis (every rank
  // holds and runs all of it: under 1% of a Flux run).
  static StatusOr<T5EncoderModel> Create(const T5EncoderConfig& config, std::vector<ParamMap> ranks);
  const T5EncoderConfig& config() const { return config_; }
  const std::vector<ParamMap>& ranks() const { return ranks_; }

  // ids [B, L] int32, each < vocab_size -> last_hidden_state [B, L, d_model].
  StatusOr<Array> Forward(const Ctx& ctx, const Array& ids) const;

 private:
  T5EncoderModel(const T5EncoderConfig& c, std::vector<ParamMap> r) : config_(c), ranks_(std::move(r)) {}
  T5EncoderConfig config_;
  std::vector<ParamMap> ranks_;
};

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_T5_H_
