// ActivationF32 and GegluF32: Highway bodies over the vector functions of
// kernels/ops_math-inl.h; the activation is chosen once per call, outside the
// element loop.
#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/activation.h"
#include "kernels/ops_parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/activation.cc"
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

template <class F>
HWY_INLINE void MapF32(const float* HWY_RESTRICT x, float* y, int64_t n,
                       const F& f) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + 2 * lanes <= n;
       i += 2 * lanes) {  // 2 independent chains per iteration
    const auto a = f(d, hn::LoadU(d, x + i));
    const auto b = f(d, hn::LoadU(d, x + i + lanes));
    hn::StoreU(a, d, y + i);
    hn::StoreU(b, d, y + i + lanes);
  }
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(f(d, hn::LoadU(d, x + i)), d, y + i);
  if (i < n) {
    const size_t r = static_cast<size_t>(n - i);
    StoreTail(d, f(d, LoadTail(d, x + i, r, 0.0f)), y + i, r);
  }
}

void ActivationRangeF32(Activation act, const float* x, float* y, int64_t begin,
                        int64_t end) {
  const int64_t n = end - begin;
  x += begin;
  y += begin;
  switch (act) {
    case Activation::kGeluErf:
      MapF32(x, y, n, [](auto d, auto v) { return GeluErf(d, v); });
      break;
    case Activation::kGeluTanh:
      MapF32(x, y, n, [](auto d, auto v) { return GeluTanh(d, v); });
      break;
    case Activation::kQuickGelu:
      MapF32(x, y, n, [](auto d, auto v) { return QuickGelu(d, v); });
      break;
    case Activation::kSilu:
      MapF32(x, y, n, [](auto d, auto v) { return Silu(d, v); });
      break;
  }
}

void GegluRowsF32(int64_t f, const float* x, float* y, int64_t row_begin,
                  int64_t row_end) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* hidden = x + r * 2 * f;
    const float* gate = hidden + f;
    float* yr = y + r * f;
    int64_t i = 0;
    for (; i + lanes <= f; i += lanes) {
      hn::StoreU(
          hn::Mul(hn::LoadU(d, hidden + i), GeluErf(d, hn::LoadU(d, gate + i))),
          d, yr + i);
    }
    if (i < f) {
      const size_t n = static_cast<size_t>(f - i);
      const auto g = GeluErf(d, LoadTail(d, gate + i, n, 0.0f));
      StoreTail(d, hn::Mul(LoadTail(d, hidden + i, n, 0.0f), g), yr + i, n);
    }
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace tpumesh::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpumesh::kernels {

HWY_EXPORT(ActivationRangeF32);
HWY_EXPORT(GegluRowsF32);

namespace {
// Elements per activation task (64 KiB of f32): large enough to amortise the
// scheduling, small enough to balance a 4096 x 1280 tensor over any thread
// count.
constexpr int64_t kActivationTaskElems = 16384;
constexpr int64_t kGegluRowsPerTask = 16;
}  // namespace

std::string_view ActivationName(Activation a) {
  switch (a) {
    case Activation::kGeluErf:
      return "gelu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    case Activation::kQuickGelu:
      return "quick_gelu";
    case Activation::kSilu:
      return "silu";
  }
  return "unknown";
}

Status ActivationF32(Activation act, int64_t n, const float* x, float* y,
                     int num_threads) {
  if (n < 0)
    return InvalidArgumentError("activation: n = " + std::to_string(n) +
                                " must be >= 0");
  if (act != Activation::kGeluErf && act != Activation::kGeluTanh &&
      act != Activation::kQuickGelu && act != Activation::kSilu) {
    return UnimplementedError("activation: unknown kind " +
                              std::to_string(static_cast<int>(act)));
  }
  const auto impl = &HWY_DYNAMIC_DISPATCH(ActivationRangeF32);
  const int64_t tasks = (n + kActivationTaskElems - 1) / kActivationTaskElems;
  ParallelForTasks(tasks, num_threads, [&](int64_t begin, int64_t end) {
    impl(act, x, y, begin * kActivationTaskElems,
         std::min(n, end * kActivationTaskElems));
  });
  return OkStatus();
}

Status GegluF32(int64_t rows, int64_t f, const float* x, float* y,
                int num_threads) {
  if (rows < 0 || f < 1) {
    return InvalidArgumentError("geglu: rows " + std::to_string(rows) +
                                " must be >= 0 and F " + std::to_string(f) +
                                " >= 1 (input last dim 2F)");
  }
  const auto impl = &HWY_DYNAMIC_DISPATCH(GegluRowsF32);
  const int64_t tasks = (rows + kGegluRowsPerTask - 1) / kGegluRowsPerTask;
  ParallelForTasks(tasks, num_threads, [&](int64_t begin, int64_t end) {
    impl(f, x, y, begin * kGegluRowsPerTask,
         std::min(rows, end * kGegluRowsPerTask));
  });
  return OkStatus();
}

OpCost ActivationCost(Activation act, int64_t n) {
  const double e = static_cast<double>(n);
  double per = 0;
  switch (act) {
    case Activation::kGeluErf:
      per = 4;
      break;
    case Activation::kGeluTanh:
      per = 8;
      break;
    case Activation::kQuickGelu:
      per = 4;
      break;
    case Activation::kSilu:
      per = 3;
      break;
  }
  OpCost c;
  c.flops = per * e;
  c.transcendentals = e;
  c.bytes_read = 4.0 * e;
  c.bytes_written = 4.0 * e;
  return c;
}

OpCost GegluCost(int64_t rows, int64_t f) {
  OpCost c = ActivationCost(Activation::kGeluErf, rows * f);
  const double out = static_cast<double>(rows) * f;
  c.flops += out;
  c.bytes_read = 8.0 * out;
  c.bytes_written = 4.0 * out;
  return c;
}

}  // namespace tpumesh::kernels
#endif  // HWY_ONCE
