#include "models/unet.h"

#include <algorithm>
#include <string>

#include "models/parallel.h"

namespace tpumesh::models {

StatusOr<UNetModel> UNetModel::Create(const UNetConfig& config, ParamMap params) {
  if (config.mid_block_scale_factor != 1.0f)
    return UnimplementedError("unet: mid_block_scale_factor " + std::to_string(config.mid_block_scale_factor) +
                              " (only 1)");
  TPUMESH_RETURN_IF_ERROR(params.Check(UNetParams(config), "unet"));
  return UNetModel(config, {std::move(params)});
}

StatusOr<UNetModel> UNetModel::Create(const UNetConfig& config, std::vector<ParamMap> ranks) {
  if (config.mid_block_scale_factor != 1.0f)
    return UnimplementedError("unet: mid_block_scale_factor " + std::to_string(config.mid_block_scale_factor) +
                              " (only 1)");
  TPUMESH_RETURN_IF_ERROR(CheckShards(ranks, UNetParams(config), "unet"));
  return UNetModel(config, std::move(ranks));
}

// ResnetBlock2D: norm1 -> silu -> conv1 (+ time projection) -> norm2 -> silu
// -> conv2, plus the (1x1-projected) input. Split by groups over the model
// axis: conv1, the projection and norm2 on this rank's groups, conv2's
// partial sums added by one psum (models/parallel.h).
StatusOr<Array> UNetModel::Resnet(const Ctx& ctx, const ParamMap& P, const std::string& p, const Array& x,
                                  const Array& temb) const {
  const int g = config_.norm_num_groups;
  const float eps = config_.norm_eps;
  TPUMESH_ASSIGN_OR_RETURN(Array h, GroupNorm(ctx, x, g, P[p + ".norm1.weight"], P[p + ".norm1.bias"], eps, true));
  TPUMESH_ASSIGN_OR_RETURN(h, Conv2d(ctx, h, P[p + ".conv1.weight"], &P[p + ".conv1.bias"], 1, 1));
  TPUMESH_ASSIGN_OR_RETURN(Array t, Linear(ctx, temb, P[p + ".time_emb_proj.weight"], &P[p + ".time_emb_proj.bias"]));
  TPUMESH_RETURN_IF_ERROR(AddPerChannelInPlace(ctx, h, t));
  TPUMESH_ASSIGN_OR_RETURN(h, GroupNorm(ctx, h, static_cast<int>(LocalUnits(P, p + ".norm2.weight", g)),
                                        P[p + ".norm2.weight"], P[p + ".norm2.bias"], eps, true));
  TPUMESH_ASSIGN_OR_RETURN(h, RowConv2d(ctx, P, p + ".conv2", h, 1, 1));
  if (P.all().count(p + ".conv_shortcut.weight")) {
    TPUMESH_ASSIGN_OR_RETURN(Array s, Conv2d(ctx, x, P[p + ".conv_shortcut.weight"], &P[p + ".conv_shortcut.bias"]));
    TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, h, s));
  } else {
    TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, h, x));
  }
  return h;
}

// Transformer2DModel: GroupNorm (eps 1e-6) -> proj_in -> BasicTransformerBlocks
// (self-attention, cross-attention, GEGLU) -> proj_out, plus the input. Over
// the model axis: each attention on this rank's heads and the feed-forward on
// its columns, one psum each; proj_in / proj_out all_gathered.
StatusOr<Array> UNetModel::Transformer(const Ctx& ctx, const ParamMap& P, const std::string& p, const Array& x,
                                       const Array& ehs, int heads, int layers) const {
  const int64_t hgt = x.dim(2), wid = x.dim(3);
  TPUMESH_ASSIGN_OR_RETURN(Array h, GroupNorm(ctx, x, config_.norm_num_groups, P[p + ".norm.weight"],
                                              P[p + ".norm.bias"], 1e-6f));
  // h: [B, HW, C]. proj_in / proj_out are Linear layers
  // (use_linear_projection) or 1x1 convs; on channels-last activations both
  // are the same product, so the conv needs no layout change of its own.
  TPUMESH_ASSIGN_OR_RETURN(h, NchwToNlc(ctx, h));
  TPUMESH_ASSIGN_OR_RETURN(h, GatheredLinear(ctx, P, p + ".proj_in", h));
  for (int l = 0; l < layers; ++l) {
    const std::string b = p + ".transformer_blocks." + std::to_string(l);
    for (const char* attn : {"attn1", "attn2"}) {
      const std::string a = b + "." + attn;
      const std::string norm = b + (attn[4] == '1' ? ".norm1" : ".norm2");
      TPUMESH_ASSIGN_OR_RETURN(Array n, LayerNorm(ctx, h, P[norm + ".weight"], P[norm + ".bias"], 1e-5f));
      const Array& context = attn[4] == '1' ? n : ehs;
      TPUMESH_ASSIGN_OR_RETURN(Array q, Linear(ctx, n, P[a + ".to_q.weight"], nullptr));
      TPUMESH_ASSIGN_OR_RETURN(Array k, Linear(ctx, context, P[a + ".to_k.weight"], nullptr));
      TPUMESH_ASSIGN_OR_RETURN(Array v, Linear(ctx, context, P[a + ".to_v.weight"], nullptr));
      TPUMESH_ASSIGN_OR_RETURN(
          Array o, Attention(ctx, q, k, v, static_cast<int>(LocalUnits(P, a + ".to_q.weight", heads)), false));
      TPUMESH_ASSIGN_OR_RETURN(o, RowLinear(ctx, P, a + ".to_out.0", o));
      TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, h, o));
    }
    TPUMESH_ASSIGN_OR_RETURN(Array n, LayerNorm(ctx, h, P[b + ".norm3.weight"], P[b + ".norm3.bias"], 1e-5f));
    TPUMESH_ASSIGN_OR_RETURN(Array f, Linear(ctx, n, P[b + ".ff.net.0.proj.weight"], &P[b + ".ff.net.0.proj.bias"]));
    TPUMESH_ASSIGN_OR_RETURN(f, GegluSplit(ctx, f));
    TPUMESH_ASSIGN_OR_RETURN(f, RowLinear(ctx, P, b + ".ff.net.2", f));
    TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, h, f));
  }
  TPUMESH_ASSIGN_OR_RETURN(h, GatheredLinear(ctx, P, p + ".proj_out", h));
  TPUMESH_ASSIGN_OR_RETURN(h, NlcToNchw(ctx, h, hgt, wid));
  TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, h, x));
  return h;
}

StatusOr<Array> UNetModel::Forward(const Ctx& ctx_in, const Array& sample, const std::vector<float>& timesteps,
                                   const Array& ehs, const Tap& tap, const AddedCond* added) const {
  TPUMESH_ASSIGN_OR_RETURN(const ParamMap* rank_params, RankParams(ctx_in, ranks_, "unet"));
  const ParamMap& P = *rank_params;
  Ctx ctx = ctx_in.WithParams(P);
  ctx.scope = "unet";
  auto emit = [&](const std::string& name, const Array& a) {
    if (tap) tap(name, a);
  };
  const UNetConfig& c = config_;
  const int n = static_cast<int>(c.block_out_channels.size());
  const int64_t factor = int64_t{1} << (n - 1);
  if (sample.dtype() != mesh::DType::kF32 || sample.rank() != 4 || sample.dim(1) != c.in_channels ||
      sample.dim(2) % factor != 0 || sample.dim(3) % factor != 0)
    return InvalidArgumentError("unet: sample must be f32 [B, " + std::to_string(c.in_channels) +
                                ", h, w] with h, w multiples of " + std::to_string(factor) + ", got " +
                                sample.ToString());
  const int64_t b = sample.dim(0);
  if (static_cast<int64_t>(timesteps.size()) != b)
    return InvalidArgumentError("unet: " + std::to_string(timesteps.size()) + " timesteps for a batch of " +
                                std::to_string(b));
  if (ehs.rank() != 3 || ehs.dim(0) != b || ehs.dim(2) != c.cross_attention_dim[0])
    return InvalidArgumentError("unet: encoder_hidden_states must be [" + std::to_string(b) + ", L, " +
                                std::to_string(c.cross_attention_dim[0]) + "], got " + ehs.ToString());

  // Every Linear and conv weight, packed once (in parallel on the first call).
  TPUMESH_RETURN_IF_ERROR(P.PackMatmulWeights(ctx));

  // Time embedding: sinusoidal projection -> linear -> silu -> linear.
  const int64_t c0 = c.block_out_channels[0];
  TPUMESH_ASSIGN_OR_RETURN(Array t, TimestepEmbedding(ctx, timesteps, static_cast<int>(c0), c.flip_sin_to_cos,
                                                      static_cast<float>(c.freq_shift)));
  emit("time_proj", t);
  TPUMESH_ASSIGN_OR_RETURN(Array emb, Linear(ctx, t, P["time_embedding.linear_1.weight"], &P["time_embedding.linear_1.bias"]));
  SiluInPlace(ctx, emb);
  TPUMESH_ASSIGN_OR_RETURN(emb, Linear(ctx, emb, P["time_embedding.linear_2.weight"], &P["time_embedding.linear_2.bias"]));
  if (c.text_time_embedding) {
    const int64_t td = c.addition_time_embed_dim, text_dim = c.projection_class_embeddings_input_dim - 6 * td;
    if (added == nullptr || added->text_embeds.rank() != 2 || added->text_embeds.dim(0) != b ||
        added->text_embeds.dim(1) != text_dim || static_cast<int64_t>(added->time_ids.size()) != 6 * b)
      return InvalidArgumentError("unet: addition_embed_type text_time needs text_embeds [" + std::to_string(b) +
                                  ", " + std::to_string(text_dim) + "] and 6 time_ids per sample");
    TPUMESH_ASSIGN_OR_RETURN(Array tt, TimestepEmbedding(ctx, added->time_ids, static_cast<int>(td),
                                                         c.flip_sin_to_cos, static_cast<float>(c.freq_shift)));
    TPUMESH_ASSIGN_OR_RETURN(Array cat, ctx.Alloc({b, text_dim + 6 * td}, "add_embeds"));
    if (!ctx.dry_run) {
      for (int64_t i = 0; i < b; ++i) {
        float* row = cat.mutable_data<float>() + i * (text_dim + 6 * td);
        std::copy_n(added->text_embeds.data<float>() + i * text_dim, text_dim, row);
        std::copy_n(tt.data<float>() + i * 6 * td, 6 * td, row + text_dim);
      }
    }
    TPUMESH_ASSIGN_OR_RETURN(Array aug, Linear(ctx, cat, P["add_embedding.linear_1.weight"], &P["add_embedding.linear_1.bias"]));
    SiluInPlace(ctx, aug);
    TPUMESH_ASSIGN_OR_RETURN(aug, Linear(ctx, aug, P["add_embedding.linear_2.weight"], &P["add_embedding.linear_2.bias"]));
    TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, emb, aug));
  }
  emit("time_embedding", emb);
  // Every resnet applies silu to the embedding before its projection.
  TPUMESH_ASSIGN_OR_RETURN(Array temb, emb.CopyTo(ctx.device, "temb"));
  SiluInPlace(ctx, temb);

  const int pad_in = c.conv_in_kernel / 2;
  TPUMESH_ASSIGN_OR_RETURN(Array x, Conv2d(ctx, sample, P["conv_in.weight"], &P["conv_in.bias"], 1, pad_in));
  emit("conv_in", x);
  std::vector<Array> skips = {x};
  for (int i = 0; i < n; ++i) {
    const std::string p = "down_blocks." + std::to_string(i);
    const bool attn = c.down_block_types[i] == "CrossAttnDownBlock2D";
    for (int j = 0; j < c.layers_per_block; ++j) {
      TPUMESH_ASSIGN_OR_RETURN(x, Resnet(ctx, P, p + ".resnets." + std::to_string(j), x, temb));
      if (attn) {
        TPUMESH_ASSIGN_OR_RETURN(x, Transformer(ctx, P, p + ".attentions." + std::to_string(j), x, ehs,
                                                c.num_attention_heads[i], c.transformer_layers_per_block[i]));
      }
      skips.push_back(x);
    }
    if (i < n - 1) {
      const int pad = c.downsample_padding;
      TPUMESH_ASSIGN_OR_RETURN(x, GatheredConv2d(ctx, P, p + ".downsamplers.0.conv", x, 2, pad, pad, pad, pad));
      skips.push_back(x);
    }
    emit(p, x);
  }
  TPUMESH_ASSIGN_OR_RETURN(x, Resnet(ctx, P, "mid_block.resnets.0", x, temb));
  TPUMESH_ASSIGN_OR_RETURN(x, Transformer(ctx, P, "mid_block.attentions.0", x, ehs, c.num_attention_heads.back(),
                                          c.transformer_layers_per_block.back()));
  TPUMESH_ASSIGN_OR_RETURN(x, Resnet(ctx, P, "mid_block.resnets.1", x, temb));
  emit("mid_block", x);
  for (int i = 0; i < n; ++i) {
    const int r = n - 1 - i;
    const std::string p = "up_blocks." + std::to_string(i);
    const bool attn = c.up_block_types[i] == "CrossAttnUpBlock2D";
    for (int j = 0; j <= c.layers_per_block; ++j) {
      Array skip = skips.back();
      skips.pop_back();
      TPUMESH_ASSIGN_OR_RETURN(x, ConcatChannels(ctx, x, skip));
      TPUMESH_ASSIGN_OR_RETURN(x, Resnet(ctx, P, p + ".resnets." + std::to_string(j), x, temb));
      if (attn) {
        TPUMESH_ASSIGN_OR_RETURN(x, Transformer(ctx, P, p + ".attentions." + std::to_string(j), x, ehs,
                                                c.num_attention_heads[r], c.transformer_layers_per_block[r]));
      }
    }
    if (i < n - 1) {
      TPUMESH_ASSIGN_OR_RETURN(x, UpsampleNearest2x(ctx, x));
      TPUMESH_ASSIGN_OR_RETURN(x, GatheredConv2d(ctx, P, p + ".upsamplers.0.conv", x, 1, 1, 1, 1, 1));
    }
    emit(p, x);
  }
  TPUMESH_ASSIGN_OR_RETURN(x, GroupNorm(ctx, x, c.norm_num_groups, P["conv_norm_out.weight"], P["conv_norm_out.bias"],
                                        c.norm_eps));
  emit("conv_norm_out", x);  // diffusers' conv_norm_out is the norm alone; conv_act follows
  SiluInPlace(ctx, x);
  TPUMESH_ASSIGN_OR_RETURN(x, Conv2d(ctx, x, P["conv_out.weight"], &P["conv_out.bias"], 1, c.conv_out_kernel / 2));
  emit("conv_out", x);
  return x;
}

}  // namespace tpumesh::models
