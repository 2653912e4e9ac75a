// TimestepEmbeddingF32: scalar frequency table, Highway sin/cos per row.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/timestep_embedding.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/timestep_embedding.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/ops_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tpumesh::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
// Everything here is local to this file (no ODR clash with other
// per-target code in tpumesh::kernels::HWY_NAMESPACE).
namespace {

// y[b, sin_off + i] = sin(scale * (t_b * freq_i)), y[b, cos_off + i] =
// cos(...).
void TimestepRowsF32(const float* timesteps, int64_t batch, int64_t half,
                     const float* freq, float scale, int64_t sin_off,
                     int64_t cos_off, int64_t dim, float* y) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto vs = hn::Set(d, scale);
  for (int64_t b = 0; b < batch; ++b) {
    const auto t = hn::Set(d, timesteps[b]);
    float* row = y + b * dim;
    for (int64_t i = 0; i < half; i += lanes) {
      const size_t n = static_cast<size_t>(half - i < lanes ? half - i : lanes);
      const auto f = n == static_cast<size_t>(lanes)
                         ? hn::LoadU(d, freq + i)
                         : LoadTail(d, freq + i, n, 0.0f);
      // Two roundings, as torch: (t * freq), then scale * that.
      const auto arg = hn::Mul(vs, hn::Mul(t, f));
      const auto s = hn::Sin(d, arg), c = hn::Cos(d, arg);
      if (n == static_cast<size_t>(lanes)) {
        hn::StoreU(s, d, row + sin_off + i);
        hn::StoreU(c, d, row + cos_off + i);
      } else {
        StoreTail(d, s, row + sin_off + i, n);
        StoreTail(d, c, row + cos_off + i, n);
      }
    }
    if (dim % 2 == 1) row[dim - 1] = 0.0f;
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace tpumesh::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpumesh::kernels {

HWY_EXPORT(TimestepRowsF32);

Status TimestepEmbeddingF32(const float* timesteps, int64_t batch, int64_t dim,
                            bool flip_sin_to_cos, float downscale_freq_shift,
                            float* y, float scale, float max_period) {
  if (batch < 0 || dim < 1) {
    return InvalidArgumentError(
        "timestep_embedding: batch " + std::to_string(batch) +
        " must be >= 0 and dim " + std::to_string(dim) + " >= 1");
  }
  const int64_t half = dim / 2;
  // torch: half_dim - downscale_freq_shift is a Python number, used as f32.
  const float denom =
      static_cast<float>(static_cast<double>(half) - downscale_freq_shift);
  if (half > 0 && denom == 0.0f) {
    return InvalidArgumentError(
        "timestep_embedding: dim / 2 = " + std::to_string(half) +
        " equals downscale_freq_shift; the frequencies would divide by 0");
  }
  if (!(max_period > 0.0f))
    return InvalidArgumentError("timestep_embedding: max_period must be > 0");
  // -math.log(max_period) is a Python float; torch multiplies the f32 arange by
  // it in f32.
  const float neg_log =
      static_cast<float>(-std::log(static_cast<double>(max_period)));
  std::vector<float> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    freq[i] = std::exp((neg_log * static_cast<float>(i)) / denom);
  const int64_t sin_off = flip_sin_to_cos ? half : 0,
                cos_off = flip_sin_to_cos ? 0 : half;
  HWY_DYNAMIC_DISPATCH(TimestepRowsF32)
  (timesteps, batch, half, freq.data(), scale, sin_off, cos_off, dim, y);
  return OkStatus();
}

OpCost TimestepEmbeddingCost(int64_t batch, int64_t dim) {
  const double half = static_cast<double>(dim / 2),
               n = static_cast<double>(batch) * half;
  OpCost c;
  c.flops = 2.0 * half + 2.0 * n;
  c.transcendentals = half + 2.0 * n;
  c.bytes_read = 4.0 * batch;
  c.bytes_written = 4.0 * batch * dim;
  return c;
}

}  // namespace tpumesh::kernels
#endif  // HWY_ONCE
