// AutoencoderKL as diffusers computes it: the decoder (post_quant_conv,
// conv_in, mid block with single-head attention, UpDecoderBlock2Ds,
// GroupNorm + SiLU + conv_out) and the encoder (conv_in, DownEncoderBlock2Ds
// with asymmetric-padded stride-2 downsampling, mid block, conv_out,
// quant_conv) returning the latent distribution's mean.
#ifndef TPUMESH_MODELS_VAE_H_
#define TPUMESH_MODELS_VAE_H_

#include <functional>
#include <string>

#include <vector>

#include "base/status.h"
#include "models/configs.h"
#include "models/nn.h"
#include "models/params.h"

namespace tpumesh::models {

class VaeModel {
 public:
  static StatusOr<VaeModel> Create(const VaeConfig& config, ParamMap params);
  // One map per model rank (ShardParams / ShardManifest, models/params.h):
  // the model runs tensor-parallel over a Ctx::model axis of that size.
  static StatusOr<VaeModel> Create(const VaeConfig& config, std::vector<ParamMap> ranks);
  const VaeConfig& config() const { return config_; }
  const ParamMap& params() const { return ranks_[0]; }  // rank 0's (the whole model when unsplit)
  const std::vector<ParamMap>& ranks() const { return ranks_; }

  using Tap = std::function<void(const std::string& module, const Array& output)>;
  // latents [B, latent_channels, h, w], already divided by scaling_factor ->
  // sample [B, out_channels, h * f, w * f] (f = scale_factor()).
  // Taps: "post_quant_conv", "decoder.conv_in", "decoder.mid_block",
  // "decoder.up_blocks.i", "decoder.conv_norm_out", "decoder.conv_out".
  StatusOr<Array> Decode(const Ctx& ctx, const Array& latents, const Tap& tap = {}) const;
  // sample [B, in_channels, H, W] (H, W multiples of f) -> latent mean
  // [B, latent_channels, H / f, W / f].
  StatusOr<Array> EncodeMean(const Ctx& ctx, const Array& sample) const;
  // The encoder's whole output: moments [B, 2 latent_channels, H / f, W / f],
  // the posterior's mean then its log-variance (diffusers'
  // DiagonalGaussianDistribution parameters, not yet clamped).
  StatusOr<Array> EncodeMoments(const Ctx& ctx, const Array& sample) const;

 private:
  VaeModel(const VaeConfig& c, std::vector<ParamMap> r) : config_(c), ranks_(std::move(r)) {}
  // x by value: moved in, it is freed as soon as the block is done with it.
  StatusOr<Array> Resnet(const Ctx& ctx, const ParamMap& P, const std::string& p, Array x) const;
  StatusOr<Array> MidBlock(const Ctx& ctx, const ParamMap& P, const std::string& p, const Array& x) const;

  VaeConfig config_;
  std::vector<ParamMap> ranks_;
};

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_VAE_H_
