// Cheap previews of a run's latents (generate --preview-every): a linear map
// from the latent channels to RGB, applied per latent pixel, so a long CPU
// run can be watched at the cost of a few multiply-adds per pixel instead of
// a VAE decode.
//
// The map is fitted to the model's own VAE once (FitLatentPreview): a fixed
// picture of 64 flat colour blocks goes through the VAE encoder, and the
// affine map from each latent pixel (mean times scaling_factor) to the
// colour of its block is solved by least squares (the way the hand-made
// "approximate" factors of SD front-ends were found, here for whatever VAE
// the model has: the embedded default's, SD's, SDXL's). The previews are approximations, labelled as such; the images a
// run writes never come from them.
//
// Contract: FitLatentPreview is deterministic (the same VAE gives the same
// map) and runs on the host (no device, nothing priced). Render is
// thread-safe.
#ifndef TPUMESH_PIPELINE_PREVIEW_H_
#define TPUMESH_PIPELINE_PREVIEW_H_

#include <vector>

#include "base/status.h"
#include "io/png.h"
#include "models/vae.h"

namespace tpumesh::pipeline {

class LatentPreview {
 public:
  // One image's latents [C, h, w] -> an RGB image of h * scale x w * scale
  // (nearest neighbour).
  Image Render(const float* latents, int height, int width, int scale) const;
  int channels() const { return channels_; }

 private:
  friend StatusOr<LatentPreview> FitLatentPreview(const models::VaeModel& vae);
  int channels_ = 0;
  // rgb[k] = sum_c weights[k * (C + 1) + c] * latent[c] + weights[k * (C + 1) + C]
  std::vector<double> weights_;
};

StatusOr<LatentPreview> FitLatentPreview(const models::VaeModel& vae);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_PREVIEW_H_
