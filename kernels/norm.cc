// GroupNormF32 and LayerNormF32: Highway bodies, one task per group or per
// block of rows. See norm.h for the definition and contract.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/norm.h"
#include "kernels/ops_parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/norm.cc"
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

struct RowStats {
  float mean;
  float rstd;
};

// Two-pass mean and 1/sqrt(biased variance + eps) of x[0, n).
template <class D>
HWY_INLINE RowStats Stats(D d, const float* HWY_RESTRICT x, int64_t n,
                          float eps) {
  const double mean = SumChunked(d, x, n, [](hn::Vec<D> v) { return v; }) /
                      static_cast<double>(n);
  const auto m = hn::Set(d, static_cast<float>(mean));
  const double ss = SumChunked(d, x, n, [m](hn::Vec<D> v) {
    const auto t = hn::Sub(v, m);
    return hn::Mul(t, t);
  });
  const double var = ss / static_cast<double>(n);
  return {static_cast<float>(mean),
          static_cast<float>(1.0 / std::sqrt(var + eps))};
}

// y = (x - mean) * a + b over n elements, then SiLU when kSilu.
template <bool kSilu>
void NormalizeScalarAffine(const float* HWY_RESTRICT x, float* y, int64_t n,
                           float mean, float a, float b) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto vm = hn::Set(d, mean), va = hn::Set(d, a), vb = hn::Set(d, b);
  auto f = [&](hn::Vec<decltype(d)> v) {
    v = hn::MulAdd(hn::Sub(v, vm), va, vb);
    if constexpr (kSilu) v = Silu(d, v);
    return v;
  };
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(f(hn::LoadU(d, x + i)), d, y + i);
  if (i < n) {
    const size_t r = static_cast<size_t>(n - i);
    StoreTail(d, f(LoadTail(d, x + i, r, 0.0f)), y + i, r);
  }
}

void GroupNormTasksF32(const GroupNormShape& s, float eps, const float* x,
                       const float* gamma, const float* beta, float* y,
                       bool fuse_silu, int64_t begin, int64_t end) {
  const hn::ScalableTag<float> d;
  const int64_t cg = s.channels / s.num_groups;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t n = t / s.num_groups, g = t % s.num_groups;
    const int64_t off = (n * s.channels + g * cg) * s.inner;
    const RowStats st = Stats(d, x + off, cg * s.inner, eps);
    for (int64_t ch = 0; ch < cg; ++ch) {
      const int64_t c = g * cg + ch;
      const float a = gamma ? gamma[c] * st.rstd : st.rstd;
      const float b = beta ? beta[c] : 0.0f;
      const float* xc = x + off + ch * s.inner;
      float* yc = y + off + ch * s.inner;
      if (fuse_silu) {
        NormalizeScalarAffine<true>(xc, yc, s.inner, st.mean, a, b);
      } else {
        NormalizeScalarAffine<false>(xc, yc, s.inner, st.mean, a, b);
      }
    }
  }
}

void LayerNormRowsF32(int64_t dim, float eps, const float* x,
                      const float* gamma, const float* beta, float* y,
                      int64_t row_begin, int64_t row_end) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const RowStats st = Stats(d, xr, dim, eps);
    if (gamma == nullptr) {
      NormalizeScalarAffine<false>(xr, yr, dim, st.mean, st.rstd, 0.0f);
      continue;
    }
    const auto vm = hn::Set(d, st.mean), vr = hn::Set(d, st.rstd);
    int64_t i = 0;
    for (; i + lanes <= dim; i += lanes) {
      const auto t = hn::Mul(hn::Sub(hn::LoadU(d, xr + i), vm), vr);
      hn::StoreU(hn::MulAdd(t, hn::LoadU(d, gamma + i), hn::LoadU(d, beta + i)),
                 d, yr + i);
    }
    if (i < dim) {
      const size_t n = static_cast<size_t>(dim - i);
      const auto t = hn::Mul(hn::Sub(LoadTail(d, xr + i, n, 0.0f), vm), vr);
      StoreTail(d,
                hn::MulAdd(t, LoadTail(d, gamma + i, n, 0.0f),
                           LoadTail(d, beta + i, n, 0.0f)),
                yr + i, n);
    }
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace tpumesh::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpumesh::kernels {

HWY_EXPORT(GroupNormTasksF32);
HWY_EXPORT(LayerNormRowsF32);

namespace {

// Rows per layer-norm task: enough work (>= 16 x 320 elements) to amortise
// scheduling, fine enough to balance 4096 rows over a few threads.
constexpr int64_t kLayerNormRowsPerTask = 16;

Status CheckAffine(const char* op, float eps, const float* gamma,
                   const float* beta) {
  if (!(eps >= 0.0f))
    return InvalidArgumentError(std::string(op) + ": eps must be >= 0");
  if ((gamma == nullptr) != (beta == nullptr))
    return InvalidArgumentError(
        std::string(op) + ": gamma and beta must both be given or both null");
  return OkStatus();
}

}  // namespace

Status CheckGroupNorm(const GroupNormShape& s, float eps, const float* gamma,
                      const float* beta) {
  if (s.batch < 1 || s.channels < 1 || s.inner < 1 || s.num_groups < 1) {
    return InvalidArgumentError(
        "group_norm: batch " + std::to_string(s.batch) + ", channels " +
        std::to_string(s.channels) + ", inner " + std::to_string(s.inner) +
        ", groups " + std::to_string(s.num_groups) + " must all be >= 1");
  }
  if (s.channels % s.num_groups != 0) {
    return InvalidArgumentError("group_norm: " + std::to_string(s.num_groups) +
                                " groups do not divide " +
                                std::to_string(s.channels) + " channels");
  }
  return CheckAffine("group_norm", eps, gamma, beta);
}

Status GroupNormF32(const GroupNormShape& s, float eps, const float* x,
                    const float* gamma, const float* beta, float* y,
                    bool fuse_silu, int num_threads) {
  TPUMESH_RETURN_IF_ERROR(CheckGroupNorm(s, eps, gamma, beta));
  const auto impl = &HWY_DYNAMIC_DISPATCH(GroupNormTasksF32);
  ParallelForTasks(s.batch * s.num_groups, num_threads,
                   [&](int64_t begin, int64_t end) {
                     impl(s, eps, x, gamma, beta, y, fuse_silu, begin, end);
                   });
  return OkStatus();
}

Status CheckLayerNorm(int64_t rows, int64_t dim, float eps, const float* gamma,
                      const float* beta) {
  if (rows < 0 || dim < 1) {
    return InvalidArgumentError("layer_norm: rows " + std::to_string(rows) +
                                " must be >= 0 and dim " + std::to_string(dim) +
                                " >= 1");
  }
  return CheckAffine("layer_norm", eps, gamma, beta);
}

Status LayerNormF32(int64_t rows, int64_t dim, float eps, const float* x,
                    const float* gamma, const float* beta, float* y,
                    int num_threads) {
  TPUMESH_RETURN_IF_ERROR(CheckLayerNorm(rows, dim, eps, gamma, beta));
  const auto impl = &HWY_DYNAMIC_DISPATCH(LayerNormRowsF32);
  const int64_t tasks =
      (rows + kLayerNormRowsPerTask - 1) / kLayerNormRowsPerTask;
  ParallelForTasks(tasks, num_threads, [&](int64_t begin, int64_t end) {
    impl(dim, eps, x, gamma, beta, y, begin * kLayerNormRowsPerTask,
         std::min(rows, end * kLayerNormRowsPerTask));
  });
  return OkStatus();
}

OpCost GroupNormCost(const GroupNormShape& s, bool affine, bool fuse_silu) {
  const double n = static_cast<double>(s.batch) * s.channels * s.inner;
  OpCost c;
  c.flops = n * (1 + 3 + (affine ? 4 : 2) + (fuse_silu ? 3 : 0));
  c.transcendentals =
      static_cast<double>(s.batch) * s.num_groups + (fuse_silu ? n : 0);
  c.bytes_read = 4.0 * (n + (affine ? 2.0 * s.channels : 0));
  c.bytes_written = 4.0 * n;
  return c;
}

OpCost LayerNormCost(int64_t rows, int64_t dim, bool affine) {
  const double n = static_cast<double>(rows) * dim;
  OpCost c;
  c.flops = n * (1 + 3 + (affine ? 4 : 2));
  c.transcendentals = static_cast<double>(rows);
  c.bytes_read = 4.0 * (n + (affine ? 2.0 * dim : 0));
  c.bytes_written = 4.0 * n;
  return c;
}

}  // namespace tpumesh::kernels
#endif  // HWY_ONCE
