// Conv2dPacked: the weight packing, the checks, the choice of path, and the
// portable path (channels-last copy, im2col rows per chunk, Matmul, transpose
// into NCHW). The AVX512-BF16 implicit GEMM is in conv2d_bf16.cc. See
// conv2d.h for the contract and docs/kernels.md ("The conv") for the layouts.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <xmmintrin.h>  // SSE (every x86-64 CPU): the 4 x 4 transposes

#include "kernels/bf16.h"
#include "kernels/conv2d.h"
#include "kernels/conv2d_internal.h"
#include "kernels/matmul_internal.h"
#include "kernels/ops_parallel.h"

namespace tpumesh::kernels {
namespace {

// Output pixels per im2col chunk on the portable path: a chunk of 256 x K
// bf16 is 1.4 MiB for SD's 3x3 320-channel convs, held in L2/L3 between the
// gather and the kernel's packing of it (models::Conv2d measured 128, 256
// and 512 within 4% of each other, 256 the fastest).
constexpr int64_t kChunkPixels = 256;

// n values of x as T: bf16 by the vectorised rounding, f32 as they are.
inline void ConvertRow(const float* x, int64_t n, float* out) { std::memcpy(out, x, n * sizeof(float)); }
inline void ConvertRow(const float* x, int64_t n, bf16* out) { F32ToBf16(x, out, static_cast<size_t>(n)); }

// Rows [begin, end) of the padded channels-last copy xt [N, Hp, Wp, C] of x.
// Per block of 16 channels, their 16 row segments are converted into an
// L1 buffer (vectorised) and interleaved from there.
template <typename T>
void ChannelsLastRows(const Conv2dShape& s, const float* x, int64_t begin, int64_t end, T* xt) {
  const int64_t c = s.in_channels, h = s.height, w = s.width;
  const int64_t hp = h + s.pad_top + s.pad_bottom, wp = w + s.pad_left + s.pad_right;
  constexpr int64_t kBlock = 16;  // channels per pass: 16 read streams, contiguous writes
  std::vector<T> rows(static_cast<size_t>(kBlock * w));
  for (int64_t t = begin; t < end; ++t) {
    const int64_t img = t / hp, py = t % hp, iy = py - s.pad_top;
    T* row = xt + t * wp * c;
    if (iy < 0 || iy >= h) {
      std::fill(row, row + wp * c, T{});
      continue;
    }
    std::fill(row, row + s.pad_left * c, T{});
    std::fill(row + (s.pad_left + w) * c, row + wp * c, T{});
    for (int64_t c0 = 0; c0 < c; c0 += kBlock) {
      const int64_t nc = std::min(c - c0, kBlock);
      for (int64_t j = 0; j < nc; ++j) ConvertRow(x + ((img * c + c0 + j) * h + iy) * w, w, rows.data() + j * w);
      for (int64_t ix = 0; ix < w; ++ix) {
        T* dst = row + (s.pad_left + ix) * c + c0;
        for (int64_t j = 0; j < nc; ++j) dst[j] = rows[static_cast<size_t>(j * w + ix)];
      }
    }
  }
}

// y[co * ldy + i] = yt[i * o + co] (+ bias[co]) for i < m, co < o: the
// matmul's [pixels, C_out] tile into NCHW, by 4 x 4 SSE transposes in
// blocks of 16 pixels (a 64-byte line of y per channel). With no bias the
// values are copied (no + 0, which would turn -0 into +0).
void StoreChannelsFirst(const float* yt, int64_t m, int64_t o, const float* bias, float* y, int64_t ldy) {
  auto one = [&](int64_t i, int64_t co) {  // the edges, an element at a time
    y[co * ldy + i] = bias != nullptr ? yt[i * o + co] + bias[co] : yt[i * o + co];
  };
  for (int64_t i0 = 0; i0 < m; i0 += 16) {
    const int64_t i1 = std::min(m, i0 + 16);
    int64_t co = 0;
    for (; co + 4 <= o; co += 4) {
      int64_t i = i0;
      for (; i + 4 <= i1; i += 4) {
        __m128 r0 = _mm_loadu_ps(yt + i * o + co), r1 = _mm_loadu_ps(yt + (i + 1) * o + co);
        __m128 r2 = _mm_loadu_ps(yt + (i + 2) * o + co), r3 = _mm_loadu_ps(yt + (i + 3) * o + co);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        if (bias != nullptr) {
          r0 = _mm_add_ps(r0, _mm_set1_ps(bias[co]));
          r1 = _mm_add_ps(r1, _mm_set1_ps(bias[co + 1]));
          r2 = _mm_add_ps(r2, _mm_set1_ps(bias[co + 2]));
          r3 = _mm_add_ps(r3, _mm_set1_ps(bias[co + 3]));
        }
        _mm_storeu_ps(y + co * ldy + i, r0);
        _mm_storeu_ps(y + (co + 1) * ldy + i, r1);
        _mm_storeu_ps(y + (co + 2) * ldy + i, r2);
        _mm_storeu_ps(y + (co + 3) * ldy + i, r3);
      }
      for (; i < i1; ++i) {
        for (int64_t r = co; r < co + 4; ++r) one(i, r);
      }
    }
    for (; co < o; ++co) {
      for (int64_t i = i0; i < i1; ++i) one(i, co);
    }
  }
}

// The portable path: T is bf16 at kDefault (exactly what the kernels would
// round x to), f32 otherwise.
template <typename T>
Status GatherConv(const Conv2dShape& s, const float* x, const PackedMatrix& wt, const float* bias,
                  float* y, int num_threads) {
  const int64_t n = s.batch, c = s.in_channels, o = s.out_channels;
  const int64_t hp = s.height + s.pad_top + s.pad_bottom, wp = s.width + s.pad_left + s.pad_right;
  const int64_t ho = s.out_height(), wo = s.out_width(), pix = ho * wo, k = s.gemm_k();
  const int64_t run = s.kernel_w * c;  // one dy run of an im2col row
  // Every element of xt is written by ChannelsLastRows: no zero fill.
  std::unique_ptr<T[], matmul_internal::FreeDeleter> xt(
      static_cast<T*>(std::malloc(static_cast<size_t>(n * hp * wp * c) * sizeof(T))));
  if (xt == nullptr) return ResourceExhaustedError("conv2d: out of memory for the channels-last copy of x");
  const bool direct = s.kernel_h == 1 && s.kernel_w == 1 && s.stride == 1 && hp == s.height && wp == s.width;
  const int64_t rows = std::clamp<int64_t>(kChunkPixels / wo, 1, ho), chunks = (ho + rows - 1) / rows;
  const int64_t tasks = n * chunks;
  std::mutex mu;
  Status status;
  RunPhases(num_threads, [&](int inner) {
    ParallelForTasks(n * hp, inner, [&](int64_t b, int64_t e) { ChannelsLastRows(s, x, b, e, xt.get()); });
    // With a single task the matmul spreads the product over the threads.
    ParallelForTasks(tasks, tasks > 1 ? inner : 1, [&](int64_t b, int64_t e) {
      // Per-thread tiles kept between calls (no fresh pages, no zero fill).
      using matmul_internal::ThreadScratch;
      T* col = direct ? nullptr
                      : ThreadScratch<T, matmul_internal::kConvColSlot>(static_cast<size_t>(rows * wo * k));
      float* yt = ThreadScratch<float, matmul_internal::kConvTileSlot>(static_cast<size_t>(rows * wo * o));
      if ((col == nullptr && !direct) || yt == nullptr) {
        std::lock_guard<std::mutex> lock(mu);
        if (status.ok()) status = ResourceExhaustedError("conv2d: out of memory for the im2col rows of a chunk");
        return;
      }
      for (int64_t t = b; t < e; ++t) {
        const int64_t img = t / chunks, oy0 = (t % chunks) * rows, oy1 = std::min(ho, oy0 + rows);
        const int64_t m = (oy1 - oy0) * wo;
        const T* xi = xt.get() + img * hp * wp * c;
        const T* a = xi + oy0 * wo * c;
        if (!direct) {
          for (int64_t oy = oy0; oy < oy1; ++oy) {
            for (int64_t ox = 0; ox < wo; ++ox) {
              T* dst = col + ((oy - oy0) * wo + ox) * k;
              const T* src = xi + (oy * s.stride * wp + ox * s.stride) * c;
              for (int64_t dy = 0; dy < s.kernel_h; ++dy)
                std::memcpy(static_cast<void*>(dst + dy * run), src + dy * wp * c, run * sizeof(T));
            }
          }
          a = col;
        }
        Status st = Matmul(m, a, k, wt, yt, o, tasks > 1 ? 1 : inner);
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (status.ok()) status = std::move(st);
          continue;
        }
        StoreChannelsFirst(yt, m, o, bias, y + img * o * pix + oy0 * wo, pix);
      }
    });
  });
  return status;
}

Status CheckConv2dPacked(const Conv2dShape& s, const float* x, const PackedMatrix& wt, float* y) {
  TPUMESH_RETURN_IF_ERROR(CheckConv2d(s));
  if (wt.empty()) return InvalidArgumentError("conv2d: the weight is empty (use PackedConv2dWeight::Pack)");
  if (wt.k() != s.gemm_k() || wt.n() != s.out_channels) {
    return InvalidArgumentError("conv2d: packed weight W^T [" + std::to_string(wt.k()) + ", " +
                                std::to_string(wt.n()) + "] does not fit the shape's [K = " +
                                std::to_string(s.gemm_k()) + ", C_out = " + std::to_string(s.out_channels) + "]");
  }
  if (x == nullptr) return InvalidArgumentError("conv2d: x is null");
  if (y == nullptr) return InvalidArgumentError("conv2d: y is null");
  if (wt.provider() == Provider::kBf16 && !Avx512Bf16Active())
    return UnimplementedError("conv2d: the weight was packed for provider bf16, which this CPU lacks");
  if (wt.provider() == Provider::kAmx && !AmxMatmulActive())
    return UnimplementedError("conv2d: the weight was packed for provider amx, which is off here: " + AmxMatmulNote());
  return OkStatus();
}

std::string Dims(int64_t a, int64_t b, int64_t c, int64_t d) {
  return "[" + std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) + ", " + std::to_string(d) +
         "]";
}

}  // namespace

StatusOr<PackedConv2dWeight> PackedConv2dWeight::Pack(int64_t out_channels, int64_t in_channels,
                                                      int64_t kernel_h, int64_t kernel_w, const float* w,
                                                      const MatmulOptions& options) {
  auto bad = [](const char* what, int64_t v) {
    return InvalidArgumentError("PackedConv2dWeight::Pack: " + std::string(what) + " = " + std::to_string(v) +
                                ", must be >= 1");
  };
  if (out_channels < 1) return bad("out_channels", out_channels);
  if (in_channels < 1) return bad("in_channels", in_channels);
  if (kernel_h < 1) return bad("kernel_h", kernel_h);
  if (kernel_w < 1) return bad("kernel_w", kernel_w);
  if (w == nullptr) return InvalidArgumentError("PackedConv2dWeight::Pack: w is null");
  // W^T [(dy, dx, c), o] from w [o, c, dy, dx].
  const int64_t k = kernel_h * kernel_w * in_channels;
  std::vector<float> wt(static_cast<size_t>(k * out_channels));
  for (int64_t co = 0; co < out_channels; ++co)
    for (int64_t ci = 0; ci < in_channels; ++ci)
      for (int64_t dy = 0; dy < kernel_h; ++dy)
        for (int64_t dx = 0; dx < kernel_w; ++dx)
          wt[((dy * kernel_w + dx) * in_channels + ci) * out_channels + co] =
              w[((co * in_channels + ci) * kernel_h + dy) * kernel_w + dx];
  TPUMESH_ASSIGN_OR_RETURN(PackedMatrix packed, PackedMatrix::Pack(k, out_channels, wt.data(), out_channels, options));
  PackedConv2dWeight r;
  r.wt_ = std::move(packed);
  r.out_channels_ = out_channels;
  r.in_channels_ = in_channels;
  r.kernel_h_ = kernel_h;
  r.kernel_w_ = kernel_w;
  return r;
}

Status Conv2dPacked(const Conv2dShape& s, const float* x, const PackedConv2dWeight& w, const float* bias,
                    float* y, int num_threads) {
  if (!w.empty() && (w.out_channels() != s.out_channels || w.in_channels() != s.in_channels ||
                     w.kernel_h() != s.kernel_h || w.kernel_w() != s.kernel_w)) {
    return InvalidArgumentError("conv2d: weight " + Dims(w.out_channels(), w.in_channels(), w.kernel_h(), w.kernel_w()) +
                                " does not fit the shape's " +
                                Dims(s.out_channels, s.in_channels, s.kernel_h, s.kernel_w));
  }
  return Conv2dPacked(s, x, w.matrix(), bias, y, num_threads);
}

Status Conv2dPacked(const Conv2dShape& s, const float* x, const PackedMatrix& wt, const float* bias, float* y,
                    int num_threads) {
  TPUMESH_RETURN_IF_ERROR(CheckConv2dPacked(s, x, wt, y));
  // kBf16 and kAmx weights at kDefault: the implicit GEMM on their pair
  // panels (vdpbf16ps, or AMX tiles for kAmx); otherwise gather and matmul.
  if ((wt.provider() == Provider::kBf16 || wt.provider() == Provider::kAmx) && wt.precision() == Precision::kDefault)
    return conv_internal::Bf16Conv2d(s, x, wt, bias, y, num_threads);
  if (wt.precision() == Precision::kDefault) return GatherConv<bf16>(s, x, wt, bias, y, num_threads);
  return GatherConv<float>(s, x, wt, bias, y, num_threads);
}

}  // namespace tpumesh::kernels
