#include "models/flux.h"

#include <cmath>
#include <cstring>
#include <string>

#include "models/parallel.h"

namespace tpumesh::models {
namespace {

constexpr float kEps = 1e-6f;  // every norm of the model

}  // namespace

std::vector<float> FluxRopeTable(const std::vector<int>& axes_dims, int64_t text, int64_t h, int64_t w) {
  int64_t hd = 0;
  for (int d : axes_dims) hd += d;
  const int64_t l = text + h * w;
  std::vector<float> t(static_cast<size_t>(l * 2 * hd));
  for (int64_t i = 0; i < l; ++i) {
    const int64_t img = i - text;
    const double pos[3] = {0, img < 0 ? 0.0 : static_cast<double>(img / w), img < 0 ? 0.0 : static_cast<double>(img % w)};
    int64_t col = 0;
    for (size_t a = 0; a < axes_dims.size() && a < 3; ++a) {
      const int dim = axes_dims[a];
      for (int j = 0; j < dim / 2; ++j) {
        // get_1d_rotary_pos_embed in float64: 1 / theta^(2j / dim), times the
        // position, cos and sin rounded to f32, each repeated twice.
        const double freq = 1.0 / std::pow(10000.0, static_cast<double>(2 * j) / dim);
        const double angle = pos[a] * freq;
        const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
        float* row = t.data() + i * 2 * hd;
        row[col + 2 * j] = row[col + 2 * j + 1] = c;
        row[hd + col + 2 * j] = row[hd + col + 2 * j + 1] = s;
      }
      col += dim;
    }
  }
  return t;
}

StatusOr<FluxTransformerModel> FluxTransformerModel::Create(const FluxTransformerConfig& config,
                                                            std::vector<ParamMap> ranks) {
  TPUMESH_RETURN_IF_ERROR(CheckShards(ranks, FluxTransformerParams(config), "transformer"));
  return FluxTransformerModel(config, std::move(ranks));
}

StatusOr<Array> FluxTransformerModel::Embed(const Ctx& ctx, const ParamMap& P, const std::string& p,
                                            const std::vector<float>& v) const {
  std::vector<float> scaled(v.size());
  for (size_t i = 0; i < v.size(); ++i) scaled[i] = v[i] * 1000.0f;
  TPUMESH_ASSIGN_OR_RETURN(Array e, TimestepEmbedding(ctx, scaled, 256, /*flip_sin_to_cos=*/true, 0.0f));
  TPUMESH_ASSIGN_OR_RETURN(e, Linear(ctx, e, P[p + ".linear_1.weight"], &P[p + ".linear_1.bias"]));
  SiluInPlace(ctx, e);
  return Linear(ctx, e, P[p + ".linear_2.weight"], &P[p + ".linear_2.bias"]);
}

Status FluxTransformerModel::Qkv(const Ctx& ctx, const ParamMap& P, const std::string& p, const Array& x, bool added,
                                 Array* q, Array* k, Array* v) const {
  const std::string a = p + ".attn.";
  const char* names[3] = {added ? "add_q_proj" : "to_q", added ? "add_k_proj" : "to_k",
                          added ? "add_v_proj" : "to_v"};
  Array* out[3] = {q, k, v};
  for (int i = 0; i < 3; ++i) {
    TPUMESH_ASSIGN_OR_RETURN(*out[i], Linear(ctx, x, P[a + names[i] + ".weight"], &P[a + names[i] + ".bias"]));
  }
  TPUMESH_ASSIGN_OR_RETURN(*q, RmsNorm(ctx, *q, P[a + (added ? "norm_added_q" : "norm_q") + ".weight"], kEps));
  TPUMESH_ASSIGN_OR_RETURN(*k, RmsNorm(ctx, *k, P[a + (added ? "norm_added_k" : "norm_k") + ".weight"], kEps));
  return OkStatus();
}

StatusOr<Array> FluxTransformerModel::Forward(const Ctx& ctx_in, const Inputs& in) const {
  TPUMESH_ASSIGN_OR_RETURN(const ParamMap* rank_params, RankParams(ctx_in, ranks_, "transformer"));
  const ParamMap& P = *rank_params;
  Ctx ctx = ctx_in.WithParams(P);
  if (*ctx.scope == '\0') ctx.scope = "transformer";
  const FluxTransformerConfig& c = config_;
  const int64_t heads = c.num_attention_heads;
  if (in.hidden == nullptr || in.context == nullptr || in.pooled == nullptr)
    return InvalidArgumentError("transformer: hidden states, context and pooled text are required");
  const Array& hs = *in.hidden;
  const int64_t b = hs.rank() == 3 ? hs.dim(0) : 0, li = in.h * in.w;
  if (hs.rank() != 3 || hs.dim(1) != li || hs.dim(2) != c.in_channels || in.context->rank() != 3 ||
      in.context->dim(0) != b || in.context->dim(2) != c.joint_attention_dim ||
      in.pooled->shape() != mesh::Shape{b, c.pooled_projection_dim} ||
      static_cast<int64_t>(in.timesteps.size()) != b ||
      static_cast<int64_t>(in.guidance.size()) != (c.guidance_embeds ? b : 0))
    return InvalidArgumentError("transformer: hidden " + hs.ToString() + " (grid " + std::to_string(in.h) + "x" +
                                std::to_string(in.w) + "), context " + in.context->ToString() + ", pooled " +
                                in.pooled->ToString() + ", " + std::to_string(in.timesteps.size()) +
                                " timesteps and " + std::to_string(in.guidance.size()) +
                                " guidance values do not fit the config (in_channels " +
                                std::to_string(c.in_channels) + ", joint_attention_dim " +
                                std::to_string(c.joint_attention_dim) + ", pooled_projection_dim " +
                                std::to_string(c.pooled_projection_dim) +
                                (c.guidance_embeds ? ", guidance per sample)" : ", no guidance)"));
  const int64_t lt = in.context->dim(1), l = lt + li;
  TPUMESH_RETURN_IF_ERROR(P.PackMatmulWeights(ctx));

  // The conditioning vector, and its SiLU that every AdaLayerNorm projects.
  TPUMESH_ASSIGN_OR_RETURN(Array temb, Embed(ctx, P, "time_text_embed.timestep_embedder", in.timesteps));
  if (c.guidance_embeds) {
    TPUMESH_ASSIGN_OR_RETURN(Array g, Embed(ctx, P, "time_text_embed.guidance_embedder", in.guidance));
    TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, temb, g));
  }
  {
    const std::string p = "time_text_embed.text_embedder";
    TPUMESH_ASSIGN_OR_RETURN(Array t, Linear(ctx, *in.pooled, P[p + ".linear_1.weight"], &P[p + ".linear_1.bias"]));
    SiluInPlace(ctx, t);
    TPUMESH_ASSIGN_OR_RETURN(t, Linear(ctx, t, P[p + ".linear_2.weight"], &P[p + ".linear_2.bias"]));
    TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, temb, t));
  }
  SiluInPlace(ctx, temb);
  const Array& cond = temb;

  TPUMESH_ASSIGN_OR_RETURN(Array enc, Linear(ctx, *in.context, P["context_embedder.weight"], &P["context_embedder.bias"]));
  TPUMESH_ASSIGN_OR_RETURN(Array x, Linear(ctx, hs, P["x_embedder.weight"], &P["x_embedder.bias"]));
  // The rotary table of [text; image]: host data of the sizes alone (a
  // constant of the compiled program), counted in HBM, not recorded.
  TPUMESH_ASSIGN_OR_RETURN(Array rope, ctx.Alloc({l, 2, c.attention_head_dim}, "rope"));
  if (!ctx.dry_run) {
    const std::vector<float> t = FluxRopeTable(c.axes_dims_rope, lt, in.h, in.w);
    std::memcpy(rope.mutable_data<float>(), t.data(), t.size() * sizeof(float));
  }
  // Over a model axis each rank holds its share of the heads (to_q's split)
  // and of the MLP columns: its attention and MLP run on those, and the
  // output projections' psums (RowLinear) combine the shares.
  auto attend = [&](const std::string& p, Array& q, Array& k, const Array& v) -> StatusOr<Array> {
    TPUMESH_RETURN_IF_ERROR(RopeInPlace(ctx, q, rope));
    TPUMESH_RETURN_IF_ERROR(RopeInPlace(ctx, k, rope));
    const int local = static_cast<int>(LocalUnits(P, p + ".attn.to_q.weight", heads));
    return Attention(ctx, q, k, v, local, /*causal=*/false);
  };
  auto mlp = [&](const std::string& p, const Array& n) -> StatusOr<Array> {
    TPUMESH_ASSIGN_OR_RETURN(Array f, Linear(ctx, n, P[p + ".net.0.proj.weight"], &P[p + ".net.0.proj.bias"]));
    GeluTanhInPlace(ctx, f);
    return RowLinear(ctx, P, p + ".net.2", f);
  };

  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "transformer_blocks." + std::to_string(i);
    // AdaLayerNormZero: shift, scale, gate of the attention, then of the MLP.
    TPUMESH_ASSIGN_OR_RETURN(Array m, Linear(ctx, cond, P[p + ".norm1.linear.weight"], &P[p + ".norm1.linear.bias"]));
    TPUMESH_ASSIGN_OR_RETURN(Array mc, Linear(ctx, cond, P[p + ".norm1_context.linear.weight"],
                                              &P[p + ".norm1_context.linear.bias"]));
    TPUMESH_ASSIGN_OR_RETURN(Array nx, ModulatedLayerNorm(ctx, x, m, 0, 1, kEps));
    TPUMESH_ASSIGN_OR_RETURN(Array nc, ModulatedLayerNorm(ctx, enc, mc, 0, 1, kEps));
    Array q, k, v, cq, ck, cv;
    TPUMESH_RETURN_IF_ERROR(Qkv(ctx, P, p, nx, false, &q, &k, &v));
    TPUMESH_RETURN_IF_ERROR(Qkv(ctx, P, p, nc, true, &cq, &ck, &cv));
    TPUMESH_ASSIGN_OR_RETURN(Array jq, Concat(ctx, cq, q, 1));
    TPUMESH_ASSIGN_OR_RETURN(Array jk, Concat(ctx, ck, k, 1));
    TPUMESH_ASSIGN_OR_RETURN(Array jv, Concat(ctx, cv, v, 1));
    TPUMESH_ASSIGN_OR_RETURN(Array a, attend(p, jq, jk, jv));
    TPUMESH_ASSIGN_OR_RETURN(Array ca, SliceRows(ctx, a, 0, lt));
    TPUMESH_ASSIGN_OR_RETURN(Array ia, SliceRows(ctx, a, lt, li));
    TPUMESH_ASSIGN_OR_RETURN(ia, RowLinear(ctx, P, p + ".attn.to_out.0", ia));
    TPUMESH_ASSIGN_OR_RETURN(ca, RowLinear(ctx, P, p + ".attn.to_add_out", ca));
    TPUMESH_RETURN_IF_ERROR(GatedAddInPlace(ctx, x, ia, m, 2));
    TPUMESH_ASSIGN_OR_RETURN(nx, ModulatedLayerNorm(ctx, x, m, 3, 4, kEps));
    TPUMESH_ASSIGN_OR_RETURN(Array f, mlp(p + ".ff", nx));
    TPUMESH_RETURN_IF_ERROR(GatedAddInPlace(ctx, x, f, m, 5));
    TPUMESH_RETURN_IF_ERROR(GatedAddInPlace(ctx, enc, ca, mc, 2));
    TPUMESH_ASSIGN_OR_RETURN(nc, ModulatedLayerNorm(ctx, enc, mc, 3, 4, kEps));
    TPUMESH_ASSIGN_OR_RETURN(Array fc, mlp(p + ".ff_context", nc));
    TPUMESH_RETURN_IF_ERROR(GatedAddInPlace(ctx, enc, fc, mc, 5));
  }

  TPUMESH_ASSIGN_OR_RETURN(Array h, Concat(ctx, enc, x, 1));
  for (int i = 0; i < c.num_single_layers; ++i) {
    const std::string p = "single_transformer_blocks." + std::to_string(i);
    // AdaLayerNormZeroSingle: shift, scale, gate.
    TPUMESH_ASSIGN_OR_RETURN(Array m, Linear(ctx, cond, P[p + ".norm.linear.weight"], &P[p + ".norm.linear.bias"]));
    TPUMESH_ASSIGN_OR_RETURN(Array n, ModulatedLayerNorm(ctx, h, m, 0, 1, kEps));
    TPUMESH_ASSIGN_OR_RETURN(Array f, Linear(ctx, n, P[p + ".proj_mlp.weight"], &P[p + ".proj_mlp.bias"]));
    GeluTanhInPlace(ctx, f);
    Array q, k, v;
    TPUMESH_RETURN_IF_ERROR(Qkv(ctx, P, p, n, false, &q, &k, &v));
    TPUMESH_ASSIGN_OR_RETURN(Array a, attend(p, q, k, v));
    TPUMESH_ASSIGN_OR_RETURN(Array cat, Concat(ctx, a, f, 2));
    TPUMESH_ASSIGN_OR_RETURN(Array o, RowLinear(ctx, P, p + ".proj_out", cat));
    TPUMESH_RETURN_IF_ERROR(GatedAddInPlace(ctx, h, o, m, 2));
  }
  TPUMESH_ASSIGN_OR_RETURN(x, SliceRows(ctx, h, lt, li));
  // AdaLayerNormContinuous: scale, then shift.
  TPUMESH_ASSIGN_OR_RETURN(Array m, Linear(ctx, cond, P["norm_out.linear.weight"], &P["norm_out.linear.bias"]));
  TPUMESH_ASSIGN_OR_RETURN(x, ModulatedLayerNorm(ctx, x, m, /*shift=*/1, /*scale=*/0, kEps));
  return Linear(ctx, x, P["proj_out.weight"], &P["proj_out.bias"]);
}

}  // namespace tpumesh::models
