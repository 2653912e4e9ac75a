// Elementwise ops: Highway bodies; see elementwise.h.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/elementwise.h"
#include "kernels/ops_parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/elementwise.cc"
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

template <class D>
HWY_INLINE hn::Vec<D> Apply(BinaryOp op, hn::Vec<D> a, hn::Vec<D> b) {
  return op == BinaryOp::kAdd ? hn::Add(a, b) : hn::Mul(a, b);
}

template <BinaryOp kOp>
void BinaryRow(const float* a, const float* b, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(
        Apply<decltype(d)>(kOp, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d,
        y + i);
  for (; i < n; ++i) y[i] = kOp == BinaryOp::kAdd ? a[i] + b[i] : a[i] * b[i];
}

// y[i] = x[i] op s, i < n.
template <BinaryOp kOp>
void ScalarRow(const float* x, float s, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto vs = hn::Set(d, s);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(Apply<decltype(d)>(kOp, hn::LoadU(d, x + i), vs), d, y + i);
  for (; i < n; ++i) y[i] = kOp == BinaryOp::kAdd ? x[i] + s : x[i] * s;
}

void BinaryRangeF32(BinaryOp op, const float* a, const float* b, float* y,
                    int64_t begin, int64_t end) {
  if (op == BinaryOp::kAdd) {
    BinaryRow<BinaryOp::kAdd>(a + begin, b + begin, y + begin, end - begin);
  } else {
    BinaryRow<BinaryOp::kMul>(a + begin, b + begin, y + begin, end - begin);
  }
}

// Rows [begin, end) of the [outer * channels] rows of length inner.
void BroadcastChannelRowsF32(BinaryOp op, int64_t channels, int64_t inner,
                             const float* x, const float* v,
                             int64_t v_outer_stride, float* y, int64_t begin,
                             int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const int64_t o = r / channels, c = r % channels;
    const float s = v[o * v_outer_stride + c];
    if (op == BinaryOp::kAdd) {
      ScalarRow<BinaryOp::kAdd>(x + r * inner, s, y + r * inner, inner);
    } else {
      ScalarRow<BinaryOp::kMul>(x + r * inner, s, y + r * inner, inner);
    }
  }
}

// inner == 1: the vector runs along the contiguous channel axis of each outer
// row.
void BroadcastLastDimRowsF32(BinaryOp op, int64_t channels, const float* x,
                             const float* v, int64_t v_outer_stride, float* y,
                             int64_t begin, int64_t end) {
  for (int64_t o = begin; o < end; ++o) {
    if (op == BinaryOp::kAdd) {
      BinaryRow<BinaryOp::kAdd>(x + o * channels, v + o * v_outer_stride,
                                y + o * channels, channels);
    } else {
      BinaryRow<BinaryOp::kMul>(x + o * channels, v + o * v_outer_stride,
                                y + o * channels, channels);
    }
  }
}

// Planes [begin, end) of [N*C] planes h x w -> 2h x 2w. Each input vector
// becomes two output vectors of duplicated lanes (a TableLookupLanes each);
// the output row is written twice (rows 2i and 2i+1 are equal).
void UpsampleNearest2xPlanesF32(int64_t h, int64_t w, const float* x, float* y,
                                int64_t begin, int64_t end) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
#if HWY_TARGET != HWY_SCALAR
  const hn::RebindToSigned<decltype(d)> di;
  HWY_ALIGN int32_t lo_idx[hn::MaxLanes(di)];
  HWY_ALIGN int32_t hi_idx[hn::MaxLanes(di)];
  for (int64_t i = 0; i < lanes; ++i) {
    lo_idx[i] = static_cast<int32_t>(i / 2);
    hi_idx[i] = static_cast<int32_t>((lanes + i) / 2);
  }
  const auto lo = hn::SetTableIndices(d, lo_idx);
  const auto hi = hn::SetTableIndices(d, hi_idx);
#endif
  for (int64_t p = begin; p < end; ++p) {
    for (int64_t i = 0; i < h; ++i) {
      const float* src = x + (p * h + i) * w;
      float* dst = y + (p * 2 * h + 2 * i) * 2 * w;
      int64_t j = 0;
#if HWY_TARGET != HWY_SCALAR
      for (; j + lanes <= w; j += lanes) {
        const auto v = hn::LoadU(d, src + j);
        hn::StoreU(hn::TableLookupLanes(v, lo), d, dst + 2 * j);
        hn::StoreU(hn::TableLookupLanes(v, hi), d, dst + 2 * j + lanes);
      }
#endif
      for (; j < w; ++j) dst[2 * j] = dst[2 * j + 1] = src[j];
      std::memcpy(dst + 2 * w, dst, 2 * w * sizeof(float));
    }
  }
  (void)lanes;
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace tpumesh::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpumesh::kernels {

HWY_EXPORT(BinaryRangeF32);
HWY_EXPORT(BroadcastChannelRowsF32);
HWY_EXPORT(BroadcastLastDimRowsF32);
HWY_EXPORT(UpsampleNearest2xPlanesF32);

namespace {

constexpr int64_t kTaskElems = 16384;  // 64 KiB of f32 per task

// Tasks of whole rows of `row_len` elements, about kTaskElems each.
int64_t RowsPerTask(int64_t row_len) {
  return std::max<int64_t>(1, kTaskElems / std::max<int64_t>(row_len, 1));
}

Status CheckOp(BinaryOp op) {
  if (op != BinaryOp::kAdd && op != BinaryOp::kMul)
    return UnimplementedError("binary op " +
                              std::to_string(static_cast<int>(op)));
  return OkStatus();
}

}  // namespace

Status BinaryF32(BinaryOp op, int64_t n, const float* a, const float* b,
                 float* y, int num_threads) {
  TPUMESH_RETURN_IF_ERROR(CheckOp(op));
  if (n < 0)
    return InvalidArgumentError("binary: n = " + std::to_string(n) +
                                " must be >= 0");
  const auto impl = &HWY_DYNAMIC_DISPATCH(BinaryRangeF32);
  ParallelForTasks((n + kTaskElems - 1) / kTaskElems, num_threads,
                   [&](int64_t begin, int64_t end) {
                     impl(op, a, b, y, begin * kTaskElems,
                          std::min(n, end * kTaskElems));
                   });
  return OkStatus();
}

Status BroadcastChannelF32(BinaryOp op, int64_t outer, int64_t channels,
                           int64_t inner, const float* x, const float* v,
                           int64_t v_outer_stride, float* y, int num_threads) {
  TPUMESH_RETURN_IF_ERROR(CheckOp(op));
  if (outer < 0 || channels < 1 || inner < 1 || v_outer_stride < 0) {
    return InvalidArgumentError(
        "broadcast: outer " + std::to_string(outer) + ", channels " +
        std::to_string(channels) + ", inner " + std::to_string(inner) +
        ", v stride " + std::to_string(v_outer_stride) + " out of range");
  }
  if (inner == 1) {
    const auto impl = &HWY_DYNAMIC_DISPATCH(BroadcastLastDimRowsF32);
    const int64_t per = RowsPerTask(channels);
    ParallelForTasks((outer + per - 1) / per, num_threads,
                     [&](int64_t begin, int64_t end) {
                       impl(op, channels, x, v, v_outer_stride, y, begin * per,
                            std::min(outer, end * per));
                     });
    return OkStatus();
  }
  const auto impl = &HWY_DYNAMIC_DISPATCH(BroadcastChannelRowsF32);
  const int64_t rows = outer * channels, per = RowsPerTask(inner);
  ParallelForTasks((rows + per - 1) / per, num_threads,
                   [&](int64_t begin, int64_t end) {
                     impl(op, channels, inner, x, v, v_outer_stride, y,
                          begin * per, std::min(rows, end * per));
                   });
  return OkStatus();
}

Status ConcatChannelsF32(int64_t batch, int64_t channels_a, int64_t channels_b,
                         int64_t inner, const float* a, const float* b,
                         float* y, int num_threads) {
  if (batch < 0 || channels_a < 0 || channels_b < 0 || inner < 0) {
    return InvalidArgumentError(
        "concat: negative size (batch " + std::to_string(batch) +
        ", channels " + std::to_string(channels_a) + " + " +
        std::to_string(channels_b) + ", inner " + std::to_string(inner) + ")");
  }
  const int64_t na = channels_a * inner, nb = channels_b * inner;
  // Pure copies: libc memcpy is the SIMD body here. One task per image.
  ParallelForTasks(batch, num_threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (na > 0)
        std::memcpy(y + i * (na + nb), a + i * na, na * sizeof(float));
      if (nb > 0)
        std::memcpy(y + i * (na + nb) + na, b + i * nb, nb * sizeof(float));
    }
  });
  return OkStatus();
}

Status UpsampleNearest2xF32(int64_t batch, int64_t channels, int64_t height,
                            int64_t width, const float* x, float* y,
                            int num_threads) {
  if (batch < 0 || channels < 0 || height < 1 || width < 1) {
    return InvalidArgumentError("upsample: shape [" + std::to_string(batch) +
                                ", " + std::to_string(channels) + ", " +
                                std::to_string(height) + ", " +
                                std::to_string(width) + "] out of range");
  }
  const auto impl = &HWY_DYNAMIC_DISPATCH(UpsampleNearest2xPlanesF32);
  const int64_t planes = batch * channels,
                per = RowsPerTask(4 * height * width);
  ParallelForTasks(
      (planes + per - 1) / per, num_threads, [&](int64_t begin, int64_t end) {
        impl(height, width, x, y, begin * per, std::min(planes, end * per));
      });
  return OkStatus();
}

OpCost BinaryCost(int64_t n) {
  OpCost c;
  c.flops = static_cast<double>(n);
  c.bytes_read = 8.0 * n;
  c.bytes_written = 4.0 * n;
  return c;
}

OpCost BroadcastChannelCost(int64_t outer, int64_t channels, int64_t inner,
                            int64_t v_outer_stride) {
  const double n = static_cast<double>(outer) * channels * inner;
  OpCost c;
  c.flops = n;
  c.bytes_read =
      4.0 * (n + (v_outer_stride == 0 ? channels
                                      : static_cast<double>(outer) * channels));
  c.bytes_written = 4.0 * n;
  return c;
}

OpCost ConcatChannelsCost(int64_t batch, int64_t channels_a, int64_t channels_b,
                          int64_t inner) {
  const double n =
      static_cast<double>(batch) * (channels_a + channels_b) * inner;
  OpCost c;
  c.bytes_read = 4.0 * n;
  c.bytes_written = 4.0 * n;
  return c;
}

OpCost UpsampleNearest2xCost(int64_t batch, int64_t channels, int64_t height,
                             int64_t width) {
  const double n = static_cast<double>(batch) * channels * height * width;
  OpCost c;
  c.bytes_read = 4.0 * n;
  c.bytes_written = 16.0 * n;
  return c;
}

}  // namespace tpumesh::kernels
#endif  // HWY_ONCE
