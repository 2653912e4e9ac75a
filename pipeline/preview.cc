#include "pipeline/preview.h"

#include <algorithm>
#include <cmath>

#include "mesh/prng.h"

namespace tpumesh::pipeline {

Image LatentPreview::Render(const float* latents, int height, int width, int scale) const {
  Image img;
  img.height = height * scale;
  img.width = width * scale;
  img.rgb.resize(static_cast<size_t>(img.height) * img.width * 3);
  const int c = channels_;
  const int64_t hw = int64_t{height} * width;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      uint8_t px[3];
      for (int k = 0; k < 3; ++k) {
        const double* w = &weights_[k * (c + 1)];
        double v = w[c];
        for (int ch = 0; ch < c; ++ch) v += w[ch] * latents[ch * hw + int64_t{y} * width + x];
        // The decoder's [-1, 1] to [0, 255], as the images.
        v = std::clamp(v / 2 + 0.5, 0.0, 1.0);
        px[k] = static_cast<uint8_t>(std::nearbyint(v * 255));
      }
      for (int dy = 0; dy < scale; ++dy)
        for (int dx = 0; dx < scale; ++dx) {
          uint8_t* d = &img.rgb[((static_cast<size_t>(y) * scale + dy) * img.width + x * scale + dx) * 3];
          d[0] = px[0], d[1] = px[1], d[2] = px[2];
        }
    }
  return img;
}

StatusOr<LatentPreview> FitLatentPreview(const models::VaeModel& vae) {
  // A picture of flat colour blocks (4 x 4 latent pixels each, colours from
  // a fixed key) through the encoder: the latents a run produces look like
  // these, not like N(0, 1) draws. Each latent pixel's target is the colour
  // of the block it lies in (blocks' borders skipped).
  const int c = vae.config().latent_channels;
  const int side = 32, block = 4, f = vae.config().scale_factor(), px = side * f;
  const int blocks = side / block;
  std::vector<float> colours(3 * blocks * blocks);
  const int64_t count[] = {static_cast<int64_t>(colours.size())};
  mesh::Uniform(mesh::KeyFromSeed(0x9e3779b9u), mesh::PrngImpl::kPartitionable, count, -1.0f, 1.0f, colours.data());
  mesh::Array image = mesh::Array::Host(mesh::DType::kF32, {1, 3, px, px});
  for (int k = 0; k < 3; ++k)
    for (int y = 0; y < px; ++y)
      for (int x = 0; x < px; ++x)
        image.mutable_data<float>()[(k * px + y) * px + x] =
            colours[(k * blocks + y / (block * f)) * blocks + x / (block * f)];
  models::Ctx ctx{nullptr, models::Precision::kHighest};
  TPUMESH_ASSIGN_OR_RETURN(mesh::Array mean, vae.EncodeMean(ctx, image));
  const float scaling = vae.config().scaling_factor;
  const int n = c + 1;
  std::vector<double> ata(n * n, 0.0), atb(n * 3, 0.0);
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x) {
      if (y % block == 0 || y % block == block - 1 || x % block == 0 || x % block == block - 1) continue;
      std::vector<double> a(n, 1.0);
      for (int ch = 0; ch < c; ++ch) a[ch] = double{mean.data<float>()[(ch * side + y) * side + x]} * scaling;
      for (int k = 0; k < 3; ++k) {
        const double target = colours[(k * blocks + y / block) * blocks + x / block];
        for (int i = 0; i < n; ++i) atb[i * 3 + k] += a[i] * target;
      }
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) ata[i * n + j] += a[i] * a[j];
    }
  // Gaussian elimination with partial pivoting on [ata | atb], a small ridge
  // keeping it regular.
  for (int i = 0; i < n; ++i) ata[i * n + i] += 1e-6;
  for (int col = 0; col < n; ++col) {
    int piv = col;
    for (int r = col + 1; r < n; ++r)
      if (std::fabs(ata[r * n + col]) > std::fabs(ata[piv * n + col])) piv = r;
    for (int j = 0; j < n; ++j) std::swap(ata[col * n + j], ata[piv * n + j]);
    for (int k = 0; k < 3; ++k) std::swap(atb[col * 3 + k], atb[piv * 3 + k]);
    for (int r = 0; r < n; ++r) {
      if (r == col) continue;
      const double m = ata[r * n + col] / ata[col * n + col];
      for (int j = 0; j < n; ++j) ata[r * n + j] -= m * ata[col * n + j];
      for (int k = 0; k < 3; ++k) atb[r * 3 + k] -= m * atb[col * 3 + k];
    }
  }
  LatentPreview p;
  p.channels_ = c;
  p.weights_.assign(3 * n, 0.0);
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < n; ++i) p.weights_[k * n + i] = atb[i * 3 + k] / ata[i * n + i];
  return p;
}

}  // namespace tpumesh::pipeline
