// The packed-weight conv on AVX512-BF16: an implicit GEMM on the matmul's
// micro-kernel bf16_gemm_14x32c2 and block driver (matmul_bf16_kernel.h),
// or, for a weight packed for kAmx, on the AMX driver (matmul_amx_kernel.h)
// with the same Source.
//
//   y^T[pixels, C_out] = col^T[pixels, K] x W^T[K, C_out],  K = (dy, dx, c)
//
// 1. x [N, C, H, W] f32 -> xt [N, Hp, Wp, C] bf16 (round to nearest even by
//    vcvtne2ps2bf16), zero-padded, one task per padded row: blocks of 32
//    channels x 16 pixels are loaded per channel, rounded, interleaved into
//    channel pairs and transposed as a 16 x 16 dword matrix in registers.
// 2. The driver runs on rows = output pixels (across images), columns =
//    output channels. Its A packing (ConvSource::PackA) gathers each pixel's
//    K values straight from xt: for every dy one run of kw * C contiguous
//    bf16 values (any stride: the kw taps of one row of the window are
//    contiguous pixels of xt), copied into the packed row. No im2col matrix
//    exists; the gather reads xt from cache (2.6 MB for SD's 64x64x320)
//    where the matmul's packing streams a 47 MB f32 im2col from DRAM.
// 3. The last K block's 14 x 32 tile (pixels x channels; AMX: 32 x 32, handed
//    over 16 rows at a time) is transposed in registers and stored into
//    NCHW, up to 16 contiguous pixels per channel, with the bias added.
//
// Tasks: phase 1 one per (image, padded row); phase 2 a grid of row ranges
// (whole 14-row micro-tiles, 32 on AMX) x column ranges (whole 32-column
// panels) sized to the thread team. K is never split, so every element is the same f32
// chain whatever the grid: y is bit-identical for every thread count.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/conv2d.h"
#include "kernels/conv2d_internal.h"
#include "kernels/matmul_amx_kernel.h"
#include "kernels/matmul_bf16_kernel.h"
#include "kernels/matmul_internal.h"
#include "kernels/ops_parallel.h"

namespace tpumesh::kernels::conv_internal {
namespace {

namespace bk = matmul_internal::bf16_kernel;

struct Geometry {
  int64_t c, h, w;         // input channels and size
  int64_t wp;              // padded width
  int64_t pad_top, pad_left;
  int64_t wo, pix;         // output width, pixels per image
  int64_t stride;
  int64_t run;             // kw * c: one dy run of a pixel's K values
  int64_t row_stride;      // wp * c: one padded row of xt
  int64_t img_stride;      // hp * wp * c: one image of xt
  int64_t k, o;            // K and C_out
};

Geometry MakeGeometry(const Conv2dShape& s) {
  Geometry g;
  g.c = s.in_channels;
  g.h = s.height;
  g.w = s.width;
  g.wp = s.width + s.pad_left + s.pad_right;
  g.pad_top = s.pad_top;
  g.pad_left = s.pad_left;
  g.wo = s.out_width();
  g.pix = s.out_height() * g.wo;
  g.stride = s.stride;
  g.run = s.kernel_w * g.c;
  g.row_stride = g.wp * g.c;
  g.img_stride = (s.height + s.pad_top + s.pad_bottom) * g.row_stride;
  g.k = s.gemm_k();
  g.o = s.out_channels;
  return g;
}

// Index vectors of a 16 x 16 dword transpose in four rounds of block swaps:
// round b (8, 4, 2, 1) exchanges element (i, j) with (i ^ b, j ^ b) where
// bit b of i is clear and of j set; after the four rounds (i, j) sits at
// (j, i). One round is two vpermt2d per pair of rows: 64 for the matrix.
struct TransposeIndex {
  alignas(64) int32_t lo[4][16];
  alignas(64) int32_t hi[4][16];
  constexpr TransposeIndex() : lo{}, hi{} {
    for (int round = 0; round < 4; ++round) {
      const int b = 8 >> round;
      for (int j = 0; j < 16; ++j) {
        lo[round][j] = (j & b) ? 16 + j - b : j;  // row i keeps lanes without b, takes row i+b's
        hi[round][j] = (j & b) ? 16 + j : j + b;  // row i+b keeps lanes with b, takes row i's
      }
    }
  }
};
constexpr TransposeIndex kTransposeIndex;

// Word index that interleaves the two halves of a vector: word 2i takes
// word i (a channel's pixel i), word 2i+1 word 16+i (the next channel's).
struct PairIndex {
  alignas(64) int16_t idx[32];
  constexpr PairIndex() : idx{} {
    for (int i = 0; i < 16; ++i) {
      idx[2 * i] = static_cast<int16_t>(i);
      idx[2 * i + 1] = static_cast<int16_t>(16 + i);
    }
  }
};
constexpr PairIndex kPairIndex;

TPUMESH_TARGET_BF16 inline void Transpose16x16(__m512i r[16]) {
#pragma GCC unroll 4
  for (int round = 0; round < 4; ++round) {
    const int b = 8 >> round;
    const __m512i lo = _mm512_load_si512(kTransposeIndex.lo[round]);
    const __m512i hi = _mm512_load_si512(kTransposeIndex.hi[round]);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      if (i & b) continue;
      const __m512i a = r[i], c = r[i + b];
      r[i] = _mm512_permutex2var_epi32(a, lo, c);
      r[i + b] = _mm512_permutex2var_epi32(a, hi, c);
    }
  }
}

// Padded row py of one image of xt (row: wp * c values) from x_img [c, h, w].
TPUMESH_TARGET_BF16 void ChannelsLastRow(const Geometry& g, const float* x_img, int64_t py, uint16_t* row) {
  const int64_t iy = py - g.pad_top;
  if (iy < 0 || iy >= g.h) {
    std::memset(row, 0, g.row_stride * sizeof(uint16_t));
    return;
  }
  std::memset(row, 0, g.pad_left * g.c * sizeof(uint16_t));
  std::memset(row + (g.pad_left + g.w) * g.c, 0, (g.wp - g.pad_left - g.w) * g.c * sizeof(uint16_t));
  const __m512i pair_index = _mm512_load_si512(kPairIndex.idx);
  const int64_t plane = g.h * g.w;
  const float* src_row = x_img + iy * g.w;
  // Channel blocks outer: the 32 rows of a block are read whole, left to
  // right, before the next block's (pixel blocks outer, reading 64 bytes of
  // every channel's row in turn, took 2.2% of a 1-thread 64x64 320->320
  // conv instead of 1.7%).
  for (int64_t c0 = 0; c0 < g.c; c0 += 32) {
    for (int64_t ix0 = 0; ix0 < g.w; ix0 += 16) {
      const int64_t pixels = std::min<int64_t>(16, g.w - ix0);
      const __mmask16 pm = bk::FirstN16(pixels);
      // r[q]: dword i = (channel c0+2q, channel c0+2q+1) at pixel ix0+i.
      __m512i r[16];
#pragma GCC unroll 16
      for (int q = 0; q < 16; ++q) {
        const int64_t c = c0 + 2 * q;
        const __m512 v0 = c < g.c ? _mm512_maskz_loadu_ps(pm, src_row + c * plane + ix0) : _mm512_setzero_ps();
        const __m512 v1 =
            c + 1 < g.c ? _mm512_maskz_loadu_ps(pm, src_row + (c + 1) * plane + ix0) : _mm512_setzero_ps();
        r[q] = _mm512_permutexvar_epi16(pair_index, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
      }
      Transpose16x16(r);  // r[i]: the 32 channels of pixel ix0+i
      const __mmask32 cm = bk::FirstN32(g.c - c0);
      uint16_t* dst = row + (g.pad_left + ix0) * g.c + c0;
      for (int64_t i = 0; i < pixels; ++i) _mm512_mask_storeu_epi16(dst + i * g.c, cm, r[i]);
    }
  }
}

TPUMESH_TARGET_BF16 inline void CopyBf16(const uint16_t* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) _mm512_storeu_si512(dst + i, _mm512_loadu_si512(src + i));
  if (i < n) {
    const __mmask32 m = bk::FirstN32(n - i);
    _mm512_mask_storeu_epi16(dst + i, m, _mm512_maskz_loadu_epi16(m, src + i));
  }
}

// A = the pixels' K values gathered from xt; C = y in NCHW (Bf16Driver's
// Source contract).
struct ConvSource {
  static constexpr bool kWritesC = false;
  const Geometry& g;
  const uint16_t* xt;
  const float* bias;  // may be null
  float* y;

  // Offset in xt of output pixel m's first K value (dy = dx = c = 0).
  int64_t RowBase(int64_t m) const {
    const int64_t img = m / g.pix, rem = m - img * g.pix;
    const int64_t oy = rem / g.wo, ox = rem - oy * g.wo;
    return img * g.img_stride + oy * g.stride * g.row_stride + ox * g.stride * g.c;
  }

  TPUMESH_TARGET_BF16 void PackA(int64_t i0, int64_t rows, int64_t p0, int64_t np, uint32_t* dst) const {
    const int64_t e0 = 2 * p0, ne = std::min(2 * np, g.k - e0);
    const int64_t dy0 = e0 / g.run, off0 = e0 - dy0 * g.run;
    for (int64_t r = 0; r < rows; ++r) {
      uint32_t* words = dst + r * bk::kAStride;
      uint16_t* out = reinterpret_cast<uint16_t*>(words);
      const uint16_t* src = xt + RowBase(i0 + r);
      int64_t dy = dy0, off = off0, done = 0;
      while (done < ne) {
        const int64_t len = std::min(g.run - off, ne - done);
        CopyBf16(src + dy * g.row_stride + off, out + done, len);
        done += len;
        ++dy;
        off = 0;
      }
      // K odd: the last pair's high half is the zero pad.
      if (ne < 2 * np) words[ne / 2] &= 0xffffu;
    }
  }

  void PrefetchRow(int64_t row, int64_t e0, int64_t ne) const {
    const uint16_t* src = xt + RowBase(row);
    int64_t dy = e0 / g.run, off = e0 - dy * g.run, done = 0;
    while (done < ne) {
      const int64_t len = std::min(g.run - off, ne - done);
      const char* p = reinterpret_cast<const char*>(src + dy * g.row_stride + off);
      for (int64_t byte = 0; byte < len * 2 + 64; byte += 64) _mm_prefetch(p + byte, _MM_HINT_T1);
      done += len;
      ++dy;
      off = 0;
    }
  }

  // tile[r][j] (row stride 32) is pixel row + r, channel col + j; rows <= 16.
  TPUMESH_TARGET_BF16 void StoreTile(const float* tile, int64_t row, int64_t rows, int64_t col,
                                     int64_t cols) const {
    const int64_t img = row / g.pix, p0 = row - img * g.pix;
    if (p0 + rows > g.pix) {  // the tile spans two images
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t m = row + r, im = m / g.pix, p = m - im * g.pix;
        for (int64_t j = 0; j < cols; ++j) {
          const float v = tile[r * bk::kNr + j];
          y[(im * g.o + col + j) * g.pix + p] = bias != nullptr ? v + bias[col + j] : v;
        }
      }
      return;
    }
    float* base = y + (img * g.o + col) * g.pix + p0;
    const __mmask16 rm = bk::FirstN16(rows);
    for (int64_t half = 0; half < 2 && 16 * half < cols; ++half) {
      __m512i r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        r[i] = i < rows ? _mm512_load_si512(tile + i * bk::kNr + 16 * half) : _mm512_setzero_si512();
      }
      Transpose16x16(r);  // r[j]: channel col + 16 half + j, lanes = pixels
      const int64_t n = std::min<int64_t>(16, cols - 16 * half);
      for (int64_t j = 0; j < n; ++j) {
        __m512 v = _mm512_castsi512_ps(r[j]);
        if (bias != nullptr) v = _mm512_add_ps(v, _mm512_set1_ps(bias[col + 16 * half + j]));
        _mm512_mask_storeu_ps(base + (16 * half + j) * g.pix, rm, v);
      }
    }
    // The next tile (the next 14 pixels, same channels) stores right after
    // these: fetch its lines now, one kernel call ahead, instead of stalling
    // on the read-for-ownership then.
    if (p0 + rows < g.pix) {
      for (int64_t j = 0; j < cols; ++j) {
        _mm_prefetch(reinterpret_cast<const char*>(base + j * g.pix + rows + bk::kMr - 1), _MM_HINT_T0);
      }
    }
  }
};

// Row ranges x column ranges for `team` threads under a static partition:
// the grid whose busiest thread gets the fewest micro-tiles x panels, fewer
// tasks on a tie.
struct Grid {
  int64_t mt = 1, nt = 1;
};
Grid ChooseGrid(int64_t row_units, int64_t col_units, int team) {
  Grid best;
  int64_t best_load = INT64_MAX;
  for (int64_t nt = 1; nt <= std::min<int64_t>(team, col_units); ++nt) {
    const int64_t mt = std::min<int64_t>(row_units, (team + nt - 1) / nt);
    const int64_t tasks = mt * nt;
    const int64_t load = (tasks + team - 1) / team * ((row_units + mt - 1) / mt) * ((col_units + nt - 1) / nt);
    if (load < best_load) {
      best_load = load;
      best = {mt, nt};
    }
  }
  return best;
}

}  // namespace

Status Bf16Conv2d(const Conv2dShape& s, const float* x, const PackedMatrix& w, const float* bias,
                  float* y, int num_threads) {
  const Geometry g = MakeGeometry(s);
  const int64_t hp = s.height + s.pad_top + s.pad_bottom;
  const size_t bytes = static_cast<size_t>(s.batch * g.img_stride) * sizeof(uint16_t);
  // Not zeroed: every value of xt is written in phase 1, the padding included.
  std::unique_ptr<uint16_t[], matmul_internal::FreeDeleter> xt(
      static_cast<uint16_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  if (xt == nullptr) return ResourceExhaustedError("conv2d: out of memory for the channels-last copy of x");

  const matmul_internal::PackedData& wt = *w.internal_data();
  // A weight packed for kAmx runs the AMX driver (the caller checked that it
  // may: AmxMatmulActive()).
  const bool amx = wt.provider == Provider::kAmx;
  const int64_t mr = amx ? matmul_internal::amx_kernel::kMr : bk::kMr;
  const int64_t m = s.batch * g.pix;
  const int64_t row_units = (m + mr - 1) / mr, col_units = (g.o + bk::kNr - 1) / bk::kNr;
  const Grid grid = ChooseGrid(row_units, col_units, ParallelConcurrency(num_threads));
  const ConvSource src{g, xt.get(), bias, y};
  RunPhases(num_threads, [&](int inner) {
    ParallelForTasks(s.batch * hp, inner, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t img = t / hp;
        ChannelsLastRow(g, x + img * g.c * g.h * g.w, t - img * hp, xt.get() + t * g.row_stride);
      }
    });
    ParallelForTasks(grid.mt * grid.nt, inner, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t im = t / grid.nt, jn = t % grid.nt;
        const int64_t i0 = std::min(m, im * row_units / grid.mt * mr);
        const int64_t i1 = std::min(m, (im + 1) * row_units / grid.mt * mr);
        const int64_t j0 = std::min(g.o, jn * col_units / grid.nt * bk::kNr);
        const int64_t j1 = std::min(g.o, (jn + 1) * col_units / grid.nt * bk::kNr);
        if (i0 >= i1 || j0 >= j1) continue;
        if (amx) {
          namespace ak = matmul_internal::amx_kernel;
          ak::AmxDriver(src, wt, i0, i1, j0, j1, ak::ThreadScratchFor(wt));
        } else {
          bk::Bf16Driver(src, wt, i0, i1, j0, j1);
        }
      }
    });
  });
  return OkStatus();
}

}  // namespace tpumesh::kernels::conv_internal
