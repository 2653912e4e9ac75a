// SoftmaxF32: three passes per row (max; exp and sum; scale), Highway body.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "kernels/ops_parallel.h"
#include "kernels/softmax.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/softmax.cc"
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

void SoftmaxRowsF32(int64_t dim, const float* x, float* y, int64_t row_begin,
                    int64_t row_end) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    auto vmax = hn::Set(d, kNegInf);
    int64_t i = 0;
    for (; i + lanes <= dim; i += lanes)
      vmax = hn::Max(vmax, hn::LoadU(d, xr + i));
    if (i < dim)
      vmax = hn::Max(
          vmax, LoadTail(d, xr + i, static_cast<size_t>(dim - i), kNegInf));
    const float mx = ReduceMax(d, vmax);
    if (mx == kNegInf) {  // every entry masked
      std::fill(yr, yr + dim, 0.0f);
      continue;
    }
    const auto vm = hn::Set(d, mx);
    // exp(x - max) into y, then sum y: the exp is computed once.
    for (i = 0; i + lanes <= dim; i += lanes)
      hn::StoreU(hn::Exp(d, hn::Sub(hn::LoadU(d, xr + i), vm)), d, yr + i);
    if (i < dim) {
      const size_t n = static_cast<size_t>(dim - i);
      StoreTail(d, hn::Exp(d, hn::Sub(LoadTail(d, xr + i, n, kNegInf), vm)),
                yr + i, n);
    }
    const double sum =
        SumChunked(d, yr, dim, [](hn::Vec<decltype(d)> v) { return v; });
    const auto inv = hn::Set(d, static_cast<float>(1.0 / sum));
    for (i = 0; i + lanes <= dim; i += lanes)
      hn::StoreU(hn::Mul(hn::LoadU(d, yr + i), inv), d, yr + i);
    for (; i < dim; ++i) yr[i] *= hn::GetLane(inv);
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace tpumesh::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpumesh::kernels {

HWY_EXPORT(SoftmaxRowsF32);

namespace {
constexpr int64_t kSoftmaxRowsPerTask = 16;
}  // namespace

Status SoftmaxF32(int64_t rows, int64_t dim, const float* x, float* y,
                  int num_threads) {
  if (rows < 0 || dim < 1) {
    return InvalidArgumentError("softmax: rows " + std::to_string(rows) +
                                " must be >= 0 and dim " + std::to_string(dim) +
                                " >= 1");
  }
  const auto impl = &HWY_DYNAMIC_DISPATCH(SoftmaxRowsF32);
  const int64_t tasks = (rows + kSoftmaxRowsPerTask - 1) / kSoftmaxRowsPerTask;
  ParallelForTasks(tasks, num_threads, [&](int64_t begin, int64_t end) {
    impl(dim, x, y, begin * kSoftmaxRowsPerTask,
         std::min(rows, end * kSoftmaxRowsPerTask));
  });
  return OkStatus();
}

OpCost SoftmaxCost(int64_t rows, int64_t dim) {
  const double n = static_cast<double>(rows) * dim;
  OpCost c;
  c.flops = 4.0 * n;
  c.transcendentals = n + static_cast<double>(rows);
  c.bytes_read = 4.0 * n;
  c.bytes_written = 4.0 * n;
  return c;
}

}  // namespace tpumesh::kernels
#endif  // HWY_ONCE
