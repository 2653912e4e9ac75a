#include "models/clip.h"

#include <cstring>

#include "kernels/bf16.h"
#include "models/parallel.h"

namespace tpumesh::models {

StatusOr<ClipTextModel> ClipTextModel::Create(const ClipTextConfig& config, ParamMap params) {
  TPUMESH_RETURN_IF_ERROR(params.Check(ClipTextParams(config), "text_encoder"));
  return ClipTextModel(config, {std::move(params)});
}

StatusOr<ClipTextModel> ClipTextModel::Create(const ClipTextConfig& config, std::vector<ParamMap> ranks) {
  TPUMESH_RETURN_IF_ERROR(CheckShards(ranks, ClipTextParams(config), "text_encoder"));
  return ClipTextModel(config, std::move(ranks));
}

StatusOr<Array> ClipTextModel::Forward(const Ctx& ctx, const Array& ids) const {
  TPUMESH_ASSIGN_OR_RETURN(Outputs out, Encode(ctx, ids));
  return std::move(out.last_hidden_state);
}

StatusOr<ClipTextModel::Outputs> ClipTextModel::Encode(const Ctx& ctx_in, const Array& ids) const {
  TPUMESH_ASSIGN_OR_RETURN(const ParamMap* rank_params, RankParams(ctx_in, ranks_, "text_encoder"));
  const ParamMap& P = *rank_params;
  Ctx ctx = ctx_in.WithParams(P);
  if (*ctx.scope == '\0') ctx.scope = "text_encoder";
  const ClipTextConfig& c = config_;
  if (ids.dtype() != mesh::DType::kI32 || ids.rank() != 2 || ids.dim(1) > c.max_position_embeddings)
    return InvalidArgumentError("text_encoder: input_ids must be int32 [B, L<=" +
                                std::to_string(c.max_position_embeddings) + "], got " + ids.ToString());
  const int64_t b = ids.dim(0), l = ids.dim(1), h = c.hidden_size;
  // The encoder layers' Linear weights, packed once (not the embeddings).
  TPUMESH_RETURN_IF_ERROR(P.PackMatmulWeights(
      ctx, [](const std::string& name) { return name.rfind("text_model.encoder.layers.", 0) == 0; }));
  // x: [B, L, H] = token_embedding[ids] + position_embedding[0..L)
  TPUMESH_ASSIGN_OR_RETURN(Array x, ctx.Alloc({b, l, h}, "embeddings"));
  // The tables are f32, or bf16 as stored (widened exactly, row by row).
  auto row_of = [](const Array& table, int64_t r) {
    const int64_t w = table.dim(1);
    return [&table, r, w](int64_t j) {
      return table.dtype() == mesh::DType::kBF16
                 ? kernels::Bf16ToF32(table.data<kernels::bf16>()[r * w + j])
                 : table.data<float>()[r * w + j];
    };
  };
  const Array& tok = P["text_model.embeddings.token_embedding.weight"];
  const Array& pos = P["text_model.embeddings.position_embedding.weight"];
  for (int64_t i = 0; i < b * l; ++i) {
    const int32_t id = ids.data<int32_t>()[i];
    if (id < 0 || id >= c.vocab_size)
      return InvalidArgumentError("text_encoder: token id " + std::to_string(id) + " at position " +
                                  std::to_string(i) + " is outside the vocabulary of " + std::to_string(c.vocab_size));
    float* row = x.mutable_data<float>() + i * h;
    const auto t = row_of(tok, id), p = row_of(pos, i % l);
    for (int64_t j = 0; j < h; ++j) row[j] = t(j) + p(j);
  }
  Outputs out;
  // hidden_states[-2]: the embeddings when there is one layer, else the
  // output of layer num_hidden_layers - 2.
  auto keep_penultimate = [&]() -> Status {
    TPUMESH_ASSIGN_OR_RETURN(out.penultimate, ctx.Alloc(x.shape(), "penultimate"));
    if (!ctx.dry_run) std::memcpy(out.penultimate.mutable_data<float>(), x.data<float>(), x.size_bytes());
    return OkStatus();
  };
  if (c.num_hidden_layers == 1) TPUMESH_RETURN_IF_ERROR(keep_penultimate());
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string p = "text_model.encoder.layers." + std::to_string(layer);
    TPUMESH_ASSIGN_OR_RETURN(Array n1, LayerNorm(ctx, x, P[p + ".layer_norm1.weight"], P[p + ".layer_norm1.bias"],
                                                 c.layer_norm_eps));
    TPUMESH_ASSIGN_OR_RETURN(Array q, Linear(ctx, n1, P[p + ".self_attn.q_proj.weight"], &P[p + ".self_attn.q_proj.bias"]));
    TPUMESH_ASSIGN_OR_RETURN(Array k, Linear(ctx, n1, P[p + ".self_attn.k_proj.weight"], &P[p + ".self_attn.k_proj.bias"]));
    TPUMESH_ASSIGN_OR_RETURN(Array v, Linear(ctx, n1, P[p + ".self_attn.v_proj.weight"], &P[p + ".self_attn.v_proj.bias"]));
    // This rank's heads (all of them without a model axis), then one psum.
    const int heads = static_cast<int>(LocalUnits(P, p + ".self_attn.q_proj.weight", c.num_attention_heads));
    TPUMESH_ASSIGN_OR_RETURN(Array a, Attention(ctx, q, k, v, heads, /*causal=*/true));
    TPUMESH_ASSIGN_OR_RETURN(Array o, RowLinear(ctx, P, p + ".self_attn.out_proj", a));
    TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, x, o));
    TPUMESH_ASSIGN_OR_RETURN(Array n2, LayerNorm(ctx, x, P[p + ".layer_norm2.weight"], P[p + ".layer_norm2.bias"],
                                                 c.layer_norm_eps));
    TPUMESH_ASSIGN_OR_RETURN(Array f1, Linear(ctx, n2, P[p + ".mlp.fc1.weight"], &P[p + ".mlp.fc1.bias"]));
    if (c.hidden_act == Activation::kGelu) GeluInPlace(ctx, f1);
    else QuickGeluInPlace(ctx, f1);
    TPUMESH_ASSIGN_OR_RETURN(Array f2, RowLinear(ctx, P, p + ".mlp.fc2", f1));
    TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, x, f2));
    if (layer == c.num_hidden_layers - 2) TPUMESH_RETURN_IF_ERROR(keep_penultimate());
  }
  TPUMESH_ASSIGN_OR_RETURN(out.last_hidden_state,
                           LayerNorm(ctx, x, P["text_model.final_layer_norm.weight"],
                                     P["text_model.final_layer_norm.bias"], c.layer_norm_eps));
  // The pooled row per sample: the highest id (eos_token_id 2, CLIP's legacy
  // rule) or the first position holding eos_token_id; argmax's first hit.
  TPUMESH_ASSIGN_OR_RETURN(out.pooled, ctx.Alloc({b, h}, "pooled"));
  if (!ctx.dry_run) {
    for (int64_t i = 0; i < b; ++i) {
      const int32_t* row = ids.data<int32_t>() + i * l;
      int64_t at = 0;
      if (c.eos_token_id == 2) {
        for (int64_t j = 1; j < l; ++j)
          if (row[j] > row[at]) at = j;
      } else {
        for (int64_t j = 0; j < l; ++j)
          if (row[j] == c.eos_token_id) {
            at = j;
            break;
          }
      }
      std::memcpy(out.pooled.mutable_data<float>() + i * h, out.last_hidden_state.data<float>() + (i * l + at) * h,
                  h * sizeof(float));
    }
  }
  if (c.with_projection) {
    TPUMESH_ASSIGN_OR_RETURN(out.text_embeds, Linear(ctx, out.pooled, P["text_projection.weight"], nullptr));
  }
  return out;
}

}  // namespace tpumesh::models
