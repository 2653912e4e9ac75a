#include "kernels/ops_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace tpumesh::kernels::reference {

void Conv2d(const Conv2dShape& s, const float* x, const float* w,
            const float* bias, float* y) {
  const int64_t ho = s.out_height(), wo = s.out_width();
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t co = 0; co < s.out_channels; ++co)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          double acc = bias ? bias[co] : 0.0;
          for (int64_t ci = 0; ci < s.in_channels; ++ci)
            for (int64_t dy = 0; dy < s.kernel_h; ++dy) {
              const int64_t iy = oy * s.stride + dy - s.pad_top;
              if (iy < 0 || iy >= s.height) continue;
              for (int64_t dx = 0; dx < s.kernel_w; ++dx) {
                const int64_t ix = ox * s.stride + dx - s.pad_left;
                if (ix < 0 || ix >= s.width) continue;
                acc += static_cast<double>(
                           w[((co * s.in_channels + ci) * s.kernel_h + dy) *
                                 s.kernel_w +
                             dx]) *
                       x[((n * s.in_channels + ci) * s.height + iy) * s.width +
                         ix];
              }
            }
          y[((n * s.out_channels + co) * ho + oy) * wo + ox] =
              static_cast<float>(acc);
        }
}

namespace {

double Silu(double v) { return v / (1.0 + std::exp(-v)); }

// Mean and 1/sqrt(var + eps) of n values, two-pass, in double.
void MeanRstd(const float* x, int64_t n, float eps, double& mean,
              double& rstd) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  mean = s / n;
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
  rstd = 1.0 / std::sqrt(ss / n + eps);
}

}  // namespace

void GroupNorm(const GroupNormShape& s, float eps, const float* x,
               const float* gamma, const float* beta, float* y,
               bool fuse_silu) {
  const int64_t cg = s.channels / s.num_groups;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t g = 0; g < s.num_groups; ++g) {
      const int64_t off = (n * s.channels + g * cg) * s.inner;
      double mean, rstd;
      MeanRstd(x + off, cg * s.inner, eps, mean, rstd);
      for (int64_t ch = 0; ch < cg; ++ch) {
        const int64_t c = g * cg + ch;
        for (int64_t i = 0; i < s.inner; ++i) {
          const int64_t e = off + ch * s.inner + i;
          double v = (x[e] - mean) * rstd;
          if (gamma) v = v * gamma[c] + beta[c];
          if (fuse_silu) v = Silu(v);
          y[e] = static_cast<float>(v);
        }
      }
    }
}

void LayerNorm(int64_t rows, int64_t dim, float eps, const float* x,
               const float* gamma, const float* beta, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    double mean, rstd;
    MeanRstd(x + r * dim, dim, eps, mean, rstd);
    for (int64_t i = 0; i < dim; ++i) {
      double v = (x[r * dim + i] - mean) * rstd;
      if (gamma) v = v * gamma[i] + beta[i];
      y[r * dim + i] = static_cast<float>(v);
    }
  }
}

void Softmax(int64_t rows, int64_t dim, const float* x, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const double mx = *std::max_element(xr, xr + dim);
    if (mx == -std::numeric_limits<double>::infinity()) {
      std::fill(y + r * dim, y + (r + 1) * dim, 0.0f);
      continue;
    }
    double sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += std::exp(xr[i] - mx);
    for (int64_t i = 0; i < dim; ++i)
      y[r * dim + i] = static_cast<float>(std::exp(xr[i] - mx) / sum);
  }
}

double ActivationValue(Activation act, double x) {
  switch (act) {
    case Activation::kGeluErf:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh: {
      const double k = std::sqrt(2.0 / M_PI);
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    }
    case Activation::kQuickGelu:
      return x / (1.0 + std::exp(-1.702 * x));
    case Activation::kSilu:
      return Silu(x);
  }
  return 0;
}

void ActivationF32(Activation act, int64_t n, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<float>(ActivationValue(act, x[i]));
}

void Geglu(int64_t rows, int64_t f, const float* x, float* y) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < f; ++i) {
      const double hidden = x[r * 2 * f + i], gate = x[r * 2 * f + f + i];
      y[r * f + i] = static_cast<float>(
          hidden * ActivationValue(Activation::kGeluErf, gate));
    }
}

void Binary(BinaryOp op, int64_t n, const float* a, const float* b, float* y) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = op == BinaryOp::kAdd ? a[i] + b[i] : a[i] * b[i];
}

void BroadcastChannel(BinaryOp op, int64_t outer, int64_t channels,
                      int64_t inner, const float* x, const float* v,
                      int64_t v_outer_stride, float* y) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const float s = v[o * v_outer_stride + c];
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t e = (o * channels + c) * inner + i;
        y[e] = op == BinaryOp::kAdd ? x[e] + s : x[e] * s;
      }
    }
}

void ConcatChannels(int64_t batch, int64_t channels_a, int64_t channels_b,
                    int64_t inner, const float* a, const float* b, float* y) {
  const int64_t c = channels_a + channels_b;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i)
        y[(n * c + ch) * inner + i] =
            ch < channels_a ? a[(n * channels_a + ch) * inner + i]
                            : b[(n * channels_b + ch - channels_a) * inner + i];
}

void UpsampleNearest2x(int64_t batch, int64_t channels, int64_t height,
                       int64_t width, const float* x, float* y) {
  for (int64_t p = 0; p < batch * channels; ++p)
    for (int64_t i = 0; i < 2 * height; ++i)
      for (int64_t j = 0; j < 2 * width; ++j)
        y[(p * 2 * height + i) * 2 * width + j] =
            x[(p * height + i / 2) * width + j / 2];
}

void TimestepEmbedding(const float* timesteps, int64_t batch, int64_t dim,
                       bool flip_sin_to_cos, float downscale_freq_shift,
                       float* y, float scale, float max_period) {
  const int64_t half = dim / 2;
  // The f32 steps of diffusers' get_timestep_embedding, one per line.
  const float neg_log =
      static_cast<float>(-std::log(static_cast<double>(max_period)));
  const float denom =
      static_cast<float>(static_cast<double>(half) - downscale_freq_shift);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < half; ++i) {
      const float exponent = (neg_log * static_cast<float>(i)) / denom;
      const float freq = std::exp(exponent);
      const float arg = scale * (timesteps[b] * freq);
      const float sn = static_cast<float>(std::sin(static_cast<double>(arg)));
      const float cs = static_cast<float>(std::cos(static_cast<double>(arg)));
      y[b * dim + (flip_sin_to_cos ? half + i : i)] = sn;
      y[b * dim + (flip_sin_to_cos ? i : half + i)] = cs;
    }
    if (dim % 2 == 1) y[b * dim + dim - 1] = 0.0f;
  }
}

void Attention(const AttentionShape& s, const float* q, const float* k,
               const float* v, float* out, std::optional<float> scale,
               bool causal) {
  const int64_t hd = s.hidden(), dh = s.head_dim;
  const double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(dh));
  std::vector<double> p(static_cast<size_t>(s.kv_len));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.q_len; ++i) {
        const float* qi = q + (b * s.q_len + i) * hd + h * dh;
        const int64_t visible = causal ? std::min(s.kv_len, i + 1) : s.kv_len;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          const float* kj = k + (b * s.kv_len + j) * hd + h * dh;
          double dot = 0;
          for (int64_t dd = 0; dd < dh; ++dd)
            dot += static_cast<double>(qi[dd]) * kj[dd];
          p[j] = dot * sc;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < visible; ++j)
          sum += (p[j] = std::exp(p[j] - mx));
        for (int64_t dd = 0; dd < dh; ++dd) {
          double acc = 0;
          for (int64_t j = 0; j < visible; ++j)
            acc += p[j] * v[(b * s.kv_len + j) * hd + h * dh + dd];
          out[(b * s.q_len + i) * hd + h * dh + dd] =
              static_cast<float>(acc / sum);
        }
      }
}

}  // namespace tpumesh::kernels::reference
