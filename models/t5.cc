#include "models/t5.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/bf16.h"
#include "models/parallel.h"

namespace tpumesh::models {

int T5RelativeBucket(int64_t relative_position, int num_buckets, int max_distance) {
  const int half = num_buckets / 2;
  int bucket = relative_position > 0 ? half : 0;
  const int64_t n = relative_position < 0 ? -relative_position : relative_position;
  const int max_exact = half / 2;
  if (n < max_exact) return bucket + static_cast<int>(n);
  // torch: (log(n.float() / max_exact) / math.log(max_distance / max_exact)
  // * (num_buckets - max_exact)).to(long), in f32, truncated.
  const float large = std::log(static_cast<float>(n) / static_cast<float>(max_exact)) /
                      static_cast<float>(std::log(static_cast<double>(max_distance) / max_exact)) *
                      static_cast<float>(half - max_exact);
  const int v = max_exact + static_cast<int>(large);
  return bucket + std::min(v, half - 1);
}

StatusOr<T5EncoderModel> T5EncoderModel::Create(const T5EncoderConfig& config, std::vector<ParamMap> ranks) {
  TPUMESH_RETURN_IF_ERROR(CheckShards(ranks, T5EncoderParams(config), "text_encoder_2"));
  return T5EncoderModel(config, std::move(ranks));
}

StatusOr<Array> T5EncoderModel::Forward(const Ctx& ctx_in, const Array& ids) const {
  TPUMESH_ASSIGN_OR_RETURN(const ParamMap* rank_params, RankParams(ctx_in, ranks_, "text_encoder_2"));
  const ParamMap& P = *rank_params;
  Ctx ctx = ctx_in.WithParams(P);
  if (*ctx.scope == '\0') ctx.scope = "text_encoder_2";
  const T5EncoderConfig& c = config_;
  if (ids.dtype() != mesh::DType::kI32 || ids.rank() != 2)
    return InvalidArgumentError("text_encoder_2: input_ids must be int32 [B, L], got " + ids.ToString());
  const int64_t b = ids.dim(0), l = ids.dim(1), d = c.d_model, heads = c.num_heads;
  TPUMESH_RETURN_IF_ERROR(P.PackMatmulWeights(ctx));
  TPUMESH_ASSIGN_OR_RETURN(Array x, ctx.Alloc({b, l, d}, "embeddings"));
  // The position bias [H, L, L] from the first block's table: a gather the
  // compiler folds into a constant of the sequence length; not recorded.
  TPUMESH_ASSIGN_OR_RETURN(Array bias, ctx.Alloc({heads, l, l}, "position bias"));
  if (!ctx.dry_run) {
    const Array& table = P["shared.weight"];
    for (int64_t i = 0; i < b * l; ++i) {
      const int32_t id = ids.data<int32_t>()[i];
      if (id < 0 || id >= c.vocab_size)
        return InvalidArgumentError("text_encoder_2: token id " + std::to_string(id) + " at position " +
                                    std::to_string(i) + " is outside the vocabulary of " +
                                    std::to_string(c.vocab_size));
      float* row = x.mutable_data<float>() + i * d;
      for (int64_t j = 0; j < d; ++j)
        row[j] = table.dtype() == mesh::DType::kBF16 ? kernels::Bf16ToF32(table.data<kernels::bf16>()[id * d + j])
                                                     : table.data<float>()[id * d + j];
    }
    const float* rb = P["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"].data<float>();
    for (int64_t q = 0; q < l; ++q)
      for (int64_t k = 0; k < l; ++k) {
        const int bucket = T5RelativeBucket(k - q, c.relative_attention_num_buckets, c.relative_attention_max_distance);
        for (int64_t h = 0; h < heads; ++h) bias.mutable_data<float>()[(h * l + q) * l + k] = rb[bucket * heads + h];
      }
  }
  const float eps = c.layer_norm_epsilon;
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const std::string p = "encoder.block." + std::to_string(layer) + ".layer.";
    const std::string a = p + "0.SelfAttention.";
    TPUMESH_ASSIGN_OR_RETURN(Array n, RmsNorm(ctx, x, P[p + "0.layer_norm.weight"], eps));
    TPUMESH_ASSIGN_OR_RETURN(Array q, Linear(ctx, n, P[a + "q.weight"], nullptr));
    TPUMESH_ASSIGN_OR_RETURN(Array k, Linear(ctx, n, P[a + "k.weight"], nullptr));
    TPUMESH_ASSIGN_OR_RETURN(Array v, Linear(ctx, n, P[a + "v.weight"], nullptr));
    TPUMESH_ASSIGN_OR_RETURN(Array o, BiasedAttention(ctx, q, k, v, static_cast<int>(heads), bias));
    TPUMESH_ASSIGN_OR_RETURN(o, Linear(ctx, o, P[a + "o.weight"], nullptr));
    TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, x, o));
    const std::string f = p + "1.DenseReluDense.";
    TPUMESH_ASSIGN_OR_RETURN(n, RmsNorm(ctx, x, P[p + "1.layer_norm.weight"], eps));
    TPUMESH_ASSIGN_OR_RETURN(Array gate, Linear(ctx, n, P[f + "wi_0.weight"], nullptr));
    GeluTanhInPlace(ctx, gate);
    TPUMESH_ASSIGN_OR_RETURN(Array up, Linear(ctx, n, P[f + "wi_1.weight"], nullptr));
    TPUMESH_RETURN_IF_ERROR(MulInPlace(ctx, gate, up));
    TPUMESH_ASSIGN_OR_RETURN(Array down, Linear(ctx, gate, P[f + "wo.weight"], nullptr));
    TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, x, down));
  }
  return RmsNorm(ctx, x, P["encoder.final_layer_norm.weight"], eps);
}

}  // namespace tpumesh::models
