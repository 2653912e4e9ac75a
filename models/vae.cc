#include "models/vae.h"

#include "models/parallel.h"

namespace tpumesh::models {

namespace {
constexpr float kEps = 1e-6f;  // every VAE GroupNorm
}  // namespace

StatusOr<VaeModel> VaeModel::Create(const VaeConfig& config, ParamMap params) {
  TPUMESH_RETURN_IF_ERROR(params.Check(VaeParams(config), "vae"));
  return VaeModel(config, {std::move(params)});
}

StatusOr<VaeModel> VaeModel::Create(const VaeConfig& config, std::vector<ParamMap> ranks) {
  TPUMESH_RETURN_IF_ERROR(CheckShards(ranks, VaeParams(config), "vae"));
  return VaeModel(config, std::move(ranks));
}

// Split by groups over the model axis as the UNet's (unet.cc).
// The shortcut conv runs first, so that x is freed before conv1: the
// decoder's 256 -> 128 channel block at 512x512 then peaks at 670 MB per
// image instead of 804 (x, the normed copy, conv1's bf16 input and output).
StatusOr<Array> VaeModel::Resnet(const Ctx& ctx, const ParamMap& P, const std::string& p, Array x) const {
  const int g = config_.norm_num_groups;
  Array shortcut = x;
  if (P.all().count(p + ".conv_shortcut.weight")) {
    TPUMESH_ASSIGN_OR_RETURN(shortcut,
                             Conv2d(ctx, x, P[p + ".conv_shortcut.weight"], &P[p + ".conv_shortcut.bias"]));
  }
  TPUMESH_ASSIGN_OR_RETURN(Array h, GroupNorm(ctx, x, g, P[p + ".norm1.weight"], P[p + ".norm1.bias"], kEps, true));
  x = Array();
  TPUMESH_ASSIGN_OR_RETURN(h, Conv2d(ctx, h, P[p + ".conv1.weight"], &P[p + ".conv1.bias"], 1, 1));
  TPUMESH_ASSIGN_OR_RETURN(h, GroupNorm(ctx, h, static_cast<int>(LocalUnits(P, p + ".norm2.weight", g)),
                                        P[p + ".norm2.weight"], P[p + ".norm2.bias"], kEps, true));
  TPUMESH_ASSIGN_OR_RETURN(h, RowConv2d(ctx, P, p + ".conv2", h, 1, 1));
  TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, h, shortcut));
  return h;
}

// resnet -> (group norm -> single-head attention over H*W -> + input) -> resnet
StatusOr<Array> VaeModel::MidBlock(const Ctx& ctx, const ParamMap& P, const std::string& p, const Array& x) const {
  TPUMESH_ASSIGN_OR_RETURN(Array h, Resnet(ctx, P, p + ".resnets.0", x));
  if (config_.mid_block_add_attention) {
    const std::string a = p + ".attentions.0";
    TPUMESH_ASSIGN_OR_RETURN(Array n, GroupNorm(ctx, h, config_.norm_num_groups, P[a + ".group_norm.weight"],
                                                P[a + ".group_norm.bias"], kEps));
    TPUMESH_ASSIGN_OR_RETURN(n, NchwToNlc(ctx, n));
    TPUMESH_ASSIGN_OR_RETURN(Array q, Linear(ctx, n, P[a + ".to_q.weight"], &P[a + ".to_q.bias"]));
    TPUMESH_ASSIGN_OR_RETURN(Array k, Linear(ctx, n, P[a + ".to_k.weight"], &P[a + ".to_k.bias"]));
    TPUMESH_ASSIGN_OR_RETURN(Array v, Linear(ctx, n, P[a + ".to_v.weight"], &P[a + ".to_v.bias"]));
    TPUMESH_ASSIGN_OR_RETURN(Array o, Attention(ctx, q, k, v, 1, false));
    TPUMESH_ASSIGN_OR_RETURN(o, Linear(ctx, o, P[a + ".to_out.0.weight"], &P[a + ".to_out.0.bias"]));
    TPUMESH_ASSIGN_OR_RETURN(o, NlcToNchw(ctx, o, h.dim(2), h.dim(3)));
    TPUMESH_RETURN_IF_ERROR(AddInPlace(ctx, o, h));
    h = o;
  }
  return Resnet(ctx, P, p + ".resnets.1", std::move(h));
}

StatusOr<Array> VaeModel::Decode(const Ctx& ctx_in, const Array& latents, const Tap& tap) const {
  TPUMESH_ASSIGN_OR_RETURN(const ParamMap* rank_params, RankParams(ctx_in, ranks_, "vae"));
  const ParamMap& P = *rank_params;
  Ctx ctx = ctx_in.WithParams(P);
  ctx.scope = "vae";
  const VaeConfig& c = config_;
  auto emit = [&](const std::string& name, const Array& a) {
    if (tap) tap(name, a);
  };
  if (latents.dtype() != mesh::DType::kF32 || latents.rank() != 4 || latents.dim(1) != c.latent_channels)
    return InvalidArgumentError("vae_decoder: latents must be f32 [B, " + std::to_string(c.latent_channels) +
                                ", h, w], got " + latents.ToString());
  // The decoder's weights, packed once.
  TPUMESH_RETURN_IF_ERROR(P.PackMatmulWeights(ctx, [](const std::string& name) {
    return name.rfind("decoder.", 0) == 0 || name.rfind("post_quant_conv.", 0) == 0;
  }));
  Array z = latents;
  if (c.use_post_quant_conv) {
    TPUMESH_ASSIGN_OR_RETURN(z, Conv2d(ctx, z, P["post_quant_conv.weight"], &P["post_quant_conv.bias"]));
    emit("post_quant_conv", z);
  }
  TPUMESH_ASSIGN_OR_RETURN(Array x, Conv2d(ctx, z, P["decoder.conv_in.weight"], &P["decoder.conv_in.bias"], 1, 1));
  emit("decoder.conv_in", x);
  TPUMESH_ASSIGN_OR_RETURN(x, MidBlock(ctx, P, "decoder.mid_block", x));
  emit("decoder.mid_block", x);
  const int n = static_cast<int>(c.block_out_channels.size());
  for (int i = 0; i < n; ++i) {
    const std::string p = "decoder.up_blocks." + std::to_string(i);
    for (int j = 0; j <= c.layers_per_block; ++j) {
      TPUMESH_ASSIGN_OR_RETURN(x, Resnet(ctx, P, p + ".resnets." + std::to_string(j), std::move(x)));
    }
    if (i < n - 1) {
      TPUMESH_ASSIGN_OR_RETURN(x, UpsampleNearest2x(ctx, x));
      TPUMESH_ASSIGN_OR_RETURN(x, GatheredConv2d(ctx, P, p + ".upsamplers.0.conv", x, 1, 1, 1, 1, 1));
    }
    emit(p, x);
  }
  TPUMESH_ASSIGN_OR_RETURN(x, GroupNorm(ctx, x, c.norm_num_groups, P["decoder.conv_norm_out.weight"],
                                        P["decoder.conv_norm_out.bias"], kEps));
  emit("decoder.conv_norm_out", x);
  SiluInPlace(ctx, x);
  TPUMESH_ASSIGN_OR_RETURN(x, Conv2d(ctx, x, P["decoder.conv_out.weight"], &P["decoder.conv_out.bias"], 1, 1));
  emit("decoder.conv_out", x);
  return x;
}

StatusOr<Array> VaeModel::EncodeMean(const Ctx& ctx, const Array& sample) const {
  TPUMESH_ASSIGN_OR_RETURN(Array x, EncodeMoments(ctx, sample));
  // moments [B, 2L, h, w]: the mean is the first L channels.
  const int64_t b = x.dim(0), l = config_.latent_channels, hw = x.dim(2) * x.dim(3);
  TPUMESH_ASSIGN_OR_RETURN(Array mean, ctx.Alloc({b, l, x.dim(2), x.dim(3)}, "latent_mean"));
  if (!ctx.dry_run)
    for (int64_t i = 0; i < b; ++i)
      std::copy(x.data<float>() + i * 2 * l * hw, x.data<float>() + i * 2 * l * hw + l * hw,
                mean.mutable_data<float>() + i * l * hw);
  return mean;
}

StatusOr<Array> VaeModel::EncodeMoments(const Ctx& ctx_in, const Array& sample) const {
  TPUMESH_ASSIGN_OR_RETURN(const ParamMap* rank_params, RankParams(ctx_in, ranks_, "vae"));
  const ParamMap& P = *rank_params;
  Ctx ctx = ctx_in.WithParams(P);
  ctx.scope = "vae";
  const VaeConfig& c = config_;
  const int64_t f = c.scale_factor();
  if (sample.dtype() != mesh::DType::kF32 || sample.rank() != 4 || sample.dim(1) != c.in_channels ||
      sample.dim(2) % f != 0 || sample.dim(3) % f != 0)
    return InvalidArgumentError("vae_encoder: sample must be f32 [B, " + std::to_string(c.in_channels) +
                                ", H, W] with H, W multiples of " + std::to_string(f) + ", got " + sample.ToString());
  // The encoder's weights, packed once.
  TPUMESH_RETURN_IF_ERROR(P.PackMatmulWeights(ctx, [](const std::string& name) {
    return name.rfind("encoder.", 0) == 0 || name.rfind("quant_conv.", 0) == 0;
  }));
  TPUMESH_ASSIGN_OR_RETURN(Array x, Conv2d(ctx, sample, P["encoder.conv_in.weight"], &P["encoder.conv_in.bias"], 1, 1));
  const int n = static_cast<int>(c.block_out_channels.size());
  for (int i = 0; i < n; ++i) {
    const std::string p = "encoder.down_blocks." + std::to_string(i);
    for (int j = 0; j < c.layers_per_block; ++j) {
      TPUMESH_ASSIGN_OR_RETURN(x, Resnet(ctx, P, p + ".resnets." + std::to_string(j), std::move(x)));
    }
    if (i < n - 1) {
      // diffusers pads (0, 1, 0, 1) and convolves with stride 2, padding 0.
      TPUMESH_ASSIGN_OR_RETURN(x, GatheredConv2d(ctx, P, p + ".downsamplers.0.conv", x, 2, 0, 0, 1, 1));
    }
  }
  TPUMESH_ASSIGN_OR_RETURN(x, MidBlock(ctx, P, "encoder.mid_block", x));
  TPUMESH_ASSIGN_OR_RETURN(x, GroupNorm(ctx, x, c.norm_num_groups, P["encoder.conv_norm_out.weight"],
                                        P["encoder.conv_norm_out.bias"], kEps, true));
  TPUMESH_ASSIGN_OR_RETURN(x, Conv2d(ctx, x, P["encoder.conv_out.weight"], &P["encoder.conv_out.bias"], 1, 1));
  if (c.use_quant_conv) {
    TPUMESH_ASSIGN_OR_RETURN(x, Conv2d(ctx, x, P["quant_conv.weight"], &P["quant_conv.bias"]));
  }
  return x;
}

}  // namespace tpumesh::models
