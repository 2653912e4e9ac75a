// Conv2dF32: im2col per chunk of output rows (Highway body), the caller's
// GEMM, bias add (Highway body). See conv2d.h for the layout and contract.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "hwy/aligned_allocator.h"
#include "kernels/conv2d.h"
#include "kernels/gemm_f32.h"
#include "kernels/ops_parallel.h"

#ifndef TPUMESH_KERNELS_CONV2D_PLAN_
#define TPUMESH_KERNELS_CONV2D_PLAN_
namespace tpumesh::kernels {
namespace {
// How one conv is cut into tasks; a function of the shape only, never of the
// thread count (that is what makes the result bit-identical for any count).
// Defined once, outside the per-target re-inclusion of this file.
struct Conv2dPlan {
  int64_t rows_per_chunk;  // output rows per im2col chunk
  int64_t chunks;          // chunks per image
  int64_t m_block;         // output channels per task
  int64_t m_blocks;        // channel blocks per chunk
};
}  // namespace
}  // namespace tpumesh::kernels
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/conv2d.cc"
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

// dst[i] = src[2 i] for i < n; src has `avail` readable elements.
void GatherStride2(const float* HWY_RESTRICT src, int64_t avail,
                   float* HWY_RESTRICT dst, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
#if HWY_TARGET != \
    HWY_SCALAR  // HWY_SCALAR has no ConcatEven; its vector is one lane anyway
  for (; i + lanes <= n && 2 * (i + lanes) <= avail; i += lanes) {
    const auto lo = hn::LoadU(d, src + 2 * i);
    const auto hi = hn::LoadU(d, src + 2 * i + lanes);
    hn::StoreU(hn::ConcatEven(d, hi, lo), d, dst + i);
  }
#else
  (void)lanes;
  (void)avail;
#endif
  for (; i < n; ++i) dst[i] = src[2 * i];
}

// Smallest ox >= 0 with ox * stride >= a (a may be negative).
inline int64_t FirstAtLeast(int64_t a, int64_t stride) {
  return a <= 0 ? 0 : (a + stride - 1) / stride;
}

// col[(ci*kh + dy)*kw + dx][(oy - oy0)*Wo + ox] for oy in [oy0, oy1).
void Im2colRows(const Conv2dShape& s, const float* HWY_RESTRICT x_img,
                int64_t oy0, int64_t oy1, float* HWY_RESTRICT col) {
  const int64_t wo = s.out_width(), cols = (oy1 - oy0) * wo, st = s.stride;
  for (int64_t ci = 0; ci < s.in_channels; ++ci) {
    const float* plane = x_img + ci * s.height * s.width;
    for (int64_t dy = 0; dy < s.kernel_h; ++dy) {
      for (int64_t dx = 0; dx < s.kernel_w; ++dx) {
        float* row = col + ((ci * s.kernel_h + dy) * s.kernel_w + dx) * cols;
        // Output columns [ox_lo, ox_hi) read inside the image; the rest is
        // padding.
        const int64_t ox_lo = std::min(wo, FirstAtLeast(s.pad_left - dx, st));
        const int64_t ox_hi = std::max(
            ox_lo, std::min(wo, FirstAtLeast(s.width + s.pad_left - dx, st)));
        for (int64_t oy = oy0; oy < oy1; ++oy) {
          float* dst = row + (oy - oy0) * wo;
          const int64_t iy = oy * st + dy - s.pad_top;
          if (iy < 0 || iy >= s.height) {
            std::memset(dst, 0, wo * sizeof(float));
            continue;
          }
          std::memset(dst, 0, ox_lo * sizeof(float));
          const int64_t n = ox_hi - ox_lo;
          if (n > 0) {
            const int64_t ix0 = ox_lo * st + dx - s.pad_left;  // in [0, W)
            const float* src = plane + iy * s.width + ix0;
            if (st == 1) {
              std::memcpy(dst + ox_lo, src,
                          n * sizeof(float));  // libc's memcpy is SIMD already
            } else if (st == 2) {
              GatherStride2(src, s.width - ix0, dst + ox_lo, n);
            } else {
              for (int64_t i = 0; i < n; ++i) dst[ox_lo + i] = src[i * st];
            }
          }
          std::memset(dst + ox_hi, 0, (wo - ox_hi) * sizeof(float));
        }
      }
    }
  }
}

// y[r * ldy + c] += bias[r] for r < rows, c < cols.
void AddRowBias(float* HWY_RESTRICT y, int64_t ldy, int64_t rows, int64_t cols,
                const float* HWY_RESTRICT bias) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < rows; ++r) {
    float* p = y + r * ldy;
    const auto b = hn::Set(d, bias[r]);
    int64_t c = 0;
    for (; c + lanes <= cols; c += lanes)
      hn::StoreU(hn::Add(hn::LoadU(d, p + c), b), d, p + c);
    for (; c < cols; ++c) p[c] += bias[r];
  }
}

// Runs tasks [begin, end) of the plan: task t covers image t / (chunks *
// m_blocks), row chunk (t / m_blocks) % chunks, output channels block
// t % m_blocks. Consecutive tasks share a chunk, so a range that holds
// several channel blocks of one chunk builds its col once.
void Conv2dTasksF32(const Conv2dShape& s, const float* x, const float* w,
                    const float* bias, float* y, const GemmFn& gemm,
                    const Conv2dPlan& plan, int64_t begin, int64_t end) {
  const int64_t ho = s.out_height(), wo = s.out_width(), pix = ho * wo,
                k = s.gemm_k();
  const bool direct = s.kernel_h == 1 && s.kernel_w == 1 && s.stride == 1 &&
                      s.pad_top == 0 && s.pad_left == 0 && s.pad_bottom == 0 &&
                      s.pad_right == 0;
  hwy::AlignedFreeUniquePtr<float[]> col;
  if (!direct)
    col = hwy::AllocateAligned<float>(
        static_cast<size_t>(k * plan.rows_per_chunk * wo));
  int64_t col_of = -1;  // the (image, chunk) whose col is built
  for (int64_t t = begin; t < end; ++t) {
    const int64_t ic = t / plan.m_blocks, mb = t % plan.m_blocks;
    const int64_t img = ic / plan.chunks,
                  oy0 = (ic % plan.chunks) * plan.rows_per_chunk;
    const int64_t oy1 = std::min(ho, oy0 + plan.rows_per_chunk),
                  cols = (oy1 - oy0) * wo;
    const int64_t m0 = mb * plan.m_block,
                  m = std::min(s.out_channels - m0, plan.m_block);
    const float* x_img = x + img * s.in_channels * s.height * s.width;
    float* y_chunk = y + (img * s.out_channels + m0) * pix + oy0 * wo;
    const float* b_mat;
    int64_t ldb;
    if (direct) {
      b_mat = x_img + oy0 * wo;  // [C_in, H*W] is already the col matrix
      ldb = pix;
    } else {
      if (col_of != ic) Im2colRows(s, x_img, oy0, oy1, col.get());
      col_of = ic;
      b_mat = col.get();
      ldb = cols;
    }
    gemm(m, cols, k, w + m0 * k, k, b_mat, ldb, y_chunk, pix);
    if (bias != nullptr) AddRowBias(y_chunk, pix, m, cols, bias + m0);
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace tpumesh::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpumesh::kernels {

HWY_EXPORT(Conv2dTasksF32);

namespace {

// A chunk's col (K x pixels floats) is kept near 1.5 MiB, so it is still in
// L2 (1 MiB) / L3 when the GEMM packs it right after im2col wrote it, and
// never below 128 pixels, so the GEMM's per-call repacking of w stays small
// next to its 2 M N K flops. Measured on 320->320 3x3 at 64x64
// (bench/kernels_ops_bench.cc, shared 2-core Zen 4): chunks of 64 / 128 /
// 256 / 512 / 1024 pixels gave 100 / 103 / 97 / 90 / 86 GFLOP/s on 1 thread.
constexpr int64_t kColBudgetFloats = (3 << 20) / 8;  // 1.5 MiB
constexpr int64_t kMinChunkPixels = 128;
// With fewer row chunks than this per image (small images: SD's 8x8 and
// 16x16 levels), the output channels are split as well, so 2+ threads find
// work even at batch 1 (1280->1280 3x3 at 8x8 on 2 threads: 12 ms instead
// of the 23 ms of one thread). Blocks of >= 128 channels keep the GEMM
// efficient.
constexpr int64_t kMinTasksPerImage = 2;
constexpr int64_t kMinChannelBlock = 128;

Conv2dPlan PlanConv2d(const Conv2dShape& s) {
  const int64_t ho = s.out_height(), wo = s.out_width();
  const int64_t pixels =
      std::max(kMinChunkPixels, kColBudgetFloats / s.gemm_k());
  Conv2dPlan p;
  p.rows_per_chunk = std::clamp<int64_t>(pixels / wo, 1, ho);
  p.chunks = (ho + p.rows_per_chunk - 1) / p.rows_per_chunk;
  const int64_t want_blocks = (kMinTasksPerImage + p.chunks - 1) / p.chunks;
  const int64_t max_blocks =
      std::max<int64_t>(1, s.out_channels / kMinChannelBlock);
  const int64_t blocks = std::min(want_blocks, max_blocks);
  p.m_block = (s.out_channels + blocks - 1) / blocks;
  p.m_block = std::min(s.out_channels,
                       (p.m_block + 15) / 16 * 16);  // whole micro-tiles
  p.m_blocks = (s.out_channels + p.m_block - 1) / p.m_block;
  return p;
}

}  // namespace

void GemmF32Blis(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float* c, int64_t ldc) {
  GemmF32(m, n, k, a, lda, b, ldb, /*b_transposed=*/false, c, ldc);
}

Conv2dShape MakeConv2dShape(int64_t batch, int64_t in_channels, int64_t height,
                            int64_t width, int64_t out_channels, int64_t kernel,
                            int64_t stride, int64_t pad) {
  Conv2dShape s;
  s.batch = batch;
  s.in_channels = in_channels;
  s.height = height;
  s.width = width;
  s.out_channels = out_channels;
  s.kernel_h = s.kernel_w = kernel;
  s.stride = stride;
  s.pad_top = s.pad_left = s.pad_bottom = s.pad_right = pad;
  return s;
}

Status CheckConv2d(const Conv2dShape& s) {
  auto bad = [](const char* field, int64_t v, const char* want) {
    return InvalidArgumentError("conv2d: " + std::string(field) + " = " +
                                std::to_string(v) + ", must be " + want);
  };
  if (s.batch < 1) return bad("batch", s.batch, ">= 1");
  if (s.in_channels < 1) return bad("in_channels", s.in_channels, ">= 1");
  if (s.out_channels < 1) return bad("out_channels", s.out_channels, ">= 1");
  if (s.height < 1) return bad("height", s.height, ">= 1");
  if (s.width < 1) return bad("width", s.width, ">= 1");
  if (s.kernel_h < 1) return bad("kernel_h", s.kernel_h, ">= 1");
  if (s.kernel_w < 1) return bad("kernel_w", s.kernel_w, ">= 1");
  if (s.stride < 1) return bad("stride", s.stride, ">= 1");
  if (s.pad_top < 0) return bad("pad_top", s.pad_top, ">= 0");
  if (s.pad_left < 0) return bad("pad_left", s.pad_left, ">= 0");
  if (s.pad_bottom < 0) return bad("pad_bottom", s.pad_bottom, ">= 0");
  if (s.pad_right < 0) return bad("pad_right", s.pad_right, ">= 0");
  if (s.height + s.pad_top + s.pad_bottom < s.kernel_h ||
      s.width + s.pad_left + s.pad_right < s.kernel_w) {
    return InvalidArgumentError(
        "conv2d: padded input " + std::to_string(s.height) + "x" +
        std::to_string(s.width) + " is smaller than the " +
        std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) +
        " kernel");
  }
  return OkStatus();
}

Status Conv2dF32(const Conv2dShape& s, const float* x, const float* w,
                 const float* bias, float* y, const GemmFn& gemm,
                 int num_threads) {
  TPUMESH_RETURN_IF_ERROR(CheckConv2d(s));
  static const GemmFn kBlis = GemmF32Blis;
  const GemmFn& g = gemm ? gemm : kBlis;
  const Conv2dPlan plan = PlanConv2d(s);
  const auto impl = &HWY_DYNAMIC_DISPATCH(Conv2dTasksF32);
  ParallelForTasks(s.batch * plan.chunks * plan.m_blocks, num_threads,
                   [&](int64_t begin, int64_t end) {
                     impl(s, x, w, bias, y, g, plan, begin, end);
                   });
  return OkStatus();
}

OpCost Conv2dCost(const Conv2dShape& s, bool has_bias) {
  const double out = static_cast<double>(s.batch) * s.out_channels *
                     s.out_height() * s.out_width();
  OpCost c;
  c.flops = 2.0 * out * s.gemm_k() + (has_bias ? out : 0.0);
  c.bytes_read =
      4.0 * (static_cast<double>(s.batch) * s.in_channels * s.height * s.width +
             static_cast<double>(s.out_channels) * s.gemm_k() +
             (has_bias ? s.out_channels : 0));
  c.bytes_written = 4.0 * out;
  return c;
}

GemmFn MatmulGemm(const MatmulOptions& options, std::atomic<bool>* failed) {
  return [options, failed](int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                           int64_t ldb, float* c, int64_t ldc) {
    if (!Matmul(m, n, k, a, lda, b, ldb, c, ldc, options, 1).ok() && failed != nullptr) failed->store(true);
  };
}

}  // namespace tpumesh::kernels
#endif  // HWY_ONCE
