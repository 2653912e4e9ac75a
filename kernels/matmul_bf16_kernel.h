// Internal to the kBf16 provider: the AVX512-BF16 micro-kernel
// bf16_gemm_14x32c2 and the block driver around it, shared by the matmul
// (matmul_bf16.cc, A an f32/bf16 matrix) and the packed-weight conv
// (conv2d_bf16.cc, A gathered from a channels-last image). Everything here is
// compiled with a target attribute, so the binary stays portable (no -march);
// callers check Avx512Bf16Active() first. docs/kernels.md has the contract.
//
// Micro-kernel bf16_gemm_14x32c2: C[14, 32] = in[14, 32] + A[14, 2P] x
// B[2P, 32] (in = 0 for the first K block); 28 zmm accumulators, 2 zmm of B,
// 1 broadcast of A = 31 of the 32 zmm registers. Per pair of k: 2 aligned
// 64-byte loads of B, 14 dword broadcasts of A and 28 vdpbf16ps (64 flops
// each). The edges: fewer rows by template (1..14), fewer columns by masked
// C stores (B is zero-padded to 32 columns), K odd by a zero in the padded
// pair. Measured alone with its data in L1/L2: 229 GFLOP/s on one Zen 4 core,
// 98% of the 233 a bare vdpbf16ps loop reaches.
//
// Packed A (per call, per thread): rows of bf16 pairs, one uint32 per pair,
// row r at a + r*kAStride. kAStride is a compile-time constant so the 14
// rows are displacements off one pointer; it is kKcPairs + 16 words so the 14
// rows of a micro-tile do not fall into the same L1 sets.
//
// The driver (Bf16Driver) is a template over the source of A and the sink of
// C, so the conv reuses the blocking, the double-buffered A packing and the
// partial-sum tiles of the matmul unchanged; see Bf16Driver for the Source
// contract.
#ifndef TPUMESH_KERNELS_MATMUL_BF16_KERNEL_H_
#define TPUMESH_KERNELS_MATMUL_BF16_KERNEL_H_

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"

#define TPUMESH_TARGET_BF16 __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl,avx512dq")))

namespace tpumesh::kernels::matmul_internal::bf16_kernel {

inline constexpr int kMr = 14;
inline constexpr int64_t kNr = kPanelWidth;  // 32
// Pairs of k per block: the B micro-panel (256 pairs x 32 words = 32 KiB)
// is reused by every row group of the A block; 256 beat 128 and 192 by
// 2-4% at 2048^3 and 4096x320x2880 (fewer partial-sum loads and stores).
inline constexpr int64_t kKcPairs = 256;
inline constexpr int64_t kAStride = kKcPairs + 16;
// Rows per A block: 168 x 272 words = 179 KiB in L2 (Zen 4: 1 MiB), leaving
// room for the B micro-panels, the partial sums and the next block; 336 rows
// was 3% slower at 4096x320x2880.
inline constexpr int64_t kMc = kMr * 12;
// Columns per block: the partial sums of a block, kMc x kNc floats, 672 KiB.
inline constexpr int64_t kNc = 1024;

// Columns [0, n) of a 32-column tile as two 16-lane masks.
inline void ColumnMasks(int64_t n, __mmask16* m0, __mmask16* m1) {
  const uint32_t bits = n >= 32 ? 0xffffffffu : ((1u << n) - 1u);
  *m0 = static_cast<__mmask16>(bits & 0xffffu);
  *m1 = static_cast<__mmask16>(bits >> 16);
}

// Low/high 16 lanes of the first n of 32.
inline __mmask32 FirstN32(int64_t n) {
  return n >= 32 ? 0xffffffffu : static_cast<__mmask32>((1u << n) - 1u);
}
inline __mmask16 FirstN16(int64_t n) {
  return n >= 16 ? 0xffff : static_cast<__mmask16>((1u << n) - 1u);
}

// The micro-kernel. Accumulators start from `in` (a partial-sum tile, row
// stride 32) or from zero when in is null; after the pairs they go to `out`
// (row stride ld_out) under the column masks. Accumulating through a private
// tile instead of C itself matters: consecutive calls work on row groups
// 14 rows apart, and with C's row stride a multiple of 1 KiB (N = 320, 768,
// 1280, 2048 ...) the loads of one call then hit the 4 KiB-aliases of the
// previous call's pending stores. Measured on Zen 4, the kernel alone over
// 24 row groups with ldc = 2048: 201 GFLOP/s when it loads C, 223 when not.
//
// kHalf: only the first 16 columns (a tile with <= 16 valid columns, e.g. the
// last panel of N = 40 or 80): one accumulator and one B vector per row, half
// the vdpbf16ps; columns 16-31 of `out` and `in` are neither read nor written.
template <int kRows, bool kHalf>
TPUMESH_TARGET_BF16 void MicroKernel(int64_t pairs, const uint32_t* __restrict a,
                                     const uint32_t* __restrict b, const float* __restrict in,
                                     float* __restrict out, int64_t ld_out, __mmask16 m0,
                                     __mmask16 m1) {
  __m512 acc0[kRows], acc1[kRows];
  if (in != nullptr) {
#pragma GCC unroll 14
    for (int r = 0; r < kRows; ++r) {
      acc0[r] = _mm512_load_ps(in + r * kNr);
      if constexpr (!kHalf) acc1[r] = _mm512_load_ps(in + r * kNr + 16);
    }
  } else {
#pragma GCC unroll 14
    for (int r = 0; r < kRows; ++r) {
      acc0[r] = _mm512_setzero_ps();
      if constexpr (!kHalf) acc1[r] = _mm512_setzero_ps();
    }
  }
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b + p * kNr);
    if constexpr (kHalf) {
#pragma GCC unroll 14
      for (int r = 0; r < kRows; ++r) {
        const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * kAStride + p]));
        acc0[r] = _mm512_dpbf16_ps(acc0[r], av, b0);
      }
    } else {
      const __m512bh b1 = (__m512bh)_mm512_load_si512(b + p * kNr + 16);
#pragma GCC unroll 14
      for (int r = 0; r < kRows; ++r) {
        const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * kAStride + p]));
        acc0[r] = _mm512_dpbf16_ps(acc0[r], av, b0);
        acc1[r] = _mm512_dpbf16_ps(acc1[r], av, b1);
      }
    }
  }
  if constexpr (kHalf) {
#pragma GCC unroll 14
    for (int r = 0; r < kRows; ++r) _mm512_mask_storeu_ps(out + r * ld_out, m0, acc0[r]);
  } else if ((m0 & m1) == 0xffff) {
#pragma GCC unroll 14
    for (int r = 0; r < kRows; ++r) {
      _mm512_storeu_ps(out + r * ld_out, acc0[r]);
      _mm512_storeu_ps(out + r * ld_out + 16, acc1[r]);
    }
  } else {
#pragma GCC unroll 14
    for (int r = 0; r < kRows; ++r) {
      _mm512_mask_storeu_ps(out + r * ld_out, m0, acc0[r]);
      _mm512_mask_storeu_ps(out + r * ld_out + 16, m1, acc1[r]);
    }
  }
}

using MicroKernelFn = void (*)(int64_t, const uint32_t*, const uint32_t*, const float*, float*,
                               int64_t, __mmask16, __mmask16);

template <bool kHalf, int... kRows>
constexpr auto MakeKernelTable(std::integer_sequence<int, kRows...>) {
  return std::array<MicroKernelFn, sizeof...(kRows)>{&MicroKernel<kRows + 1, kHalf>...};
}
// kKernels[r - 1] handles r rows of 32 columns, kHalfKernels[r - 1] of 16.
inline constexpr auto kKernels = MakeKernelTable<false>(std::make_integer_sequence<int, kMr>{});
inline constexpr auto kHalfKernels = MakeKernelTable<true>(std::make_integer_sequence<int, kMr>{});

// One step of the driver: rows [ib, ib + rows) x K pairs [p0, p0 + np) of A
// against columns [jb, je).
struct Step {
  int64_t jb, je, ib, rows, p0, np;
};

// Where the element range of an A block starts and how long it is, in k.
inline void ElementRange(const PackedData& b, const Step& s, int64_t* e0, int64_t* ne) {
  const bool high = b.precision == Precision::kHigh;
  *e0 = high ? 2 * (s.p0 / 3) : 2 * s.p0;
  *ne = std::min(high ? 2 * (s.np / 3) : 2 * s.np, b.k - *e0);
}

// The driver: C rows [i0, i1) x columns [j0, j1) = A x B over the whole of
// K, B packed in pair panels (j0 a multiple of 32). Loop order: column block
// (kNc) > row block (kMc) > K block (kKcPairs, balanced) > 32-column panel >
// 14-row group, so a B micro-panel is reused by the 12 row groups of an A
// block. Partial sums between K blocks live in a private panel-major buffer;
// each C element is one f32 chain over k in pair order whatever the blocking.
//
// A blocks are double-buffered: while the kernels run on one block, the next
// block is packed into the other buffer a few rows per kernel call, and the
// rows after those are prefetched. For the matmul, packing is a stream over
// A, from DRAM for SD-sized activations (47 MB of f32 at 4096x320x2880).
// Timed with rdtsc there on one core: a serial pack between the kernel phases
// took 12% of the time, 6% with the next block prefetched during the
// kernels, 4% packed piecewise as here (the loads still wait on DRAM in part).
//
// Source, the A operand and the C sink:
//   void PackA(int64_t i0, int64_t rows, int64_t p0, int64_t np,
//              uint32_t* dst) const;
//       rows [i0, i0 + rows) of A, expanded pairs [p0, p0 + np), into
//       dst + r*kAStride (pairs past K zero).
//   void PrefetchRow(int64_t row, int64_t e0, int64_t ne) const;
//       a hint: elements [e0, e0 + ne) of A's row `row` are packed soon.
//   static constexpr bool kWritesC;
//     true:  float* c; int64_t ldc; const float* bias;  the last K block
//            stores into C under the column masks (beta = 0), then adds
//            the bias (if any) to the stored tile.
//     false: void StoreTile(const float* tile, int64_t row, int64_t rows,
//                           int64_t col, int64_t cols) const;
//            the last K block stores into a local tile (row stride 32) and
//            hands rows [row, row + rows) x columns [col, col + cols) over.
template <class Source>
TPUMESH_TARGET_BF16 void Bf16Driver(const Source& src, const PackedData& b, int64_t i0, int64_t i1,
                                    int64_t j0, int64_t j1) {
  const int64_t pairs = b.pairs;
  const int64_t kc = PairBlockSize(pairs, kKcPairs, b.precision == Precision::kHigh ? 3 : 1);
  uint32_t* a_blocks[2] = {ThreadScratch<uint32_t, kPackedASlot>(static_cast<size_t>(kMc * kAStride)),
                           ThreadScratch<uint32_t, kSecondSlot>(static_cast<size_t>(kMc * kAStride))};
  // Partial sums between K blocks, panel-major: tile (panel, row) at
  // partial + (panel * kMc + row) * 32. Not needed when K is one block.
  float* partial = pairs > kc ? ThreadScratch<float, kPartialSlot>(static_cast<size_t>(kMc * kNc)) : nullptr;
  alignas(64) float out_tile[kMr * kNr];

  std::vector<Step> steps;
  for (int64_t jb = j0; jb < j1; jb += kNc) {
    for (int64_t ib = i0; ib < i1; ib += kMc) {
      for (int64_t p0 = 0; p0 < pairs; p0 += kc) {
        steps.push_back({jb, std::min(j1, jb + kNc), ib, std::min(kMc, i1 - ib), p0, std::min(kc, pairs - p0)});
      }
    }
  }

  src.PackA(steps[0].ib, steps[0].rows, steps[0].p0, steps[0].np, a_blocks[0]);
  for (size_t si = 0; si < steps.size(); ++si) {
    const Step& s = steps[si];
    const bool first = s.p0 == 0, last = s.p0 + s.np == pairs;
    const uint32_t* a_block = a_blocks[si & 1];
    // The next step's block: packed `per_call` rows per kernel call into the
    // other buffer; rows `2 * per_call` ahead are prefetched.
    const Step* next = si + 1 < steps.size() ? &steps[si + 1] : nullptr;
    uint32_t* next_block = a_blocks[(si + 1) & 1];
    const int64_t groups = (s.rows + kMr - 1) / kMr;
    const int64_t calls = ((s.je - s.jb + kNr - 1) / kNr) * groups;
    const int64_t per_call = next != nullptr ? (next->rows + calls - 1) / calls : 0;
    int64_t next_e0 = 0, next_ne = 0;
    if (next != nullptr) ElementRange(b, *next, &next_e0, &next_ne);
    int64_t packed = 0, prefetched = 0;
    auto pack_ahead = [&] {
      if (next == nullptr) return;
      const int64_t want = std::min(next->rows, packed + 2 * per_call);
      for (; prefetched < want; ++prefetched) src.PrefetchRow(next->ib + prefetched, next_e0, next_ne);
      const int64_t n = std::min(per_call, next->rows - packed);
      if (n > 0) src.PackA(next->ib + packed, n, next->p0, next->np, next_block + packed * kAStride);
      packed += n;
    };
    for (int64_t col = s.jb; col < s.je; col += kNr) {
      const int64_t cols = std::min(kNr, s.je - col);
      __mmask16 m0 = 0xffff, m1 = 0xffff;
      if (Source::kWritesC && last) ColumnMasks(cols, &m0, &m1);
      const uint32_t* b_panel = b.pair_panel(col / kNr) + s.p0 * kNr;
      const auto& kernels = cols <= 16 ? kHalfKernels : kKernels;
      float* tile = partial == nullptr ? nullptr : partial + (col - s.jb) * kMc;
      for (int64_t r0 = 0; r0 < s.rows; r0 += kMr) {
        const int64_t mr = std::min<int64_t>(kMr, s.rows - r0);
        const float* in = first ? nullptr : tile + r0 * kNr;
        float* out;
        int64_t ld_out = kNr;
        if (!last) {
          out = tile + r0 * kNr;
        } else if constexpr (Source::kWritesC) {
          out = src.c + (s.ib + r0) * src.ldc + col;
          ld_out = src.ldc;
        } else {
          out = out_tile;
        }
        pack_ahead();
        kernels[mr - 1](s.np, a_block + r0 * kAStride, b_panel, in, out, ld_out, m0, m1);
        if constexpr (Source::kWritesC) {
          if (last && src.bias != nullptr) AddBiasTile(out, ld_out, mr, cols, src.bias + col);
        }
        if constexpr (!Source::kWritesC) {
          if (last) src.StoreTile(out_tile, s.ib + r0, mr, col, cols);
        }
      }
    }
    while (next != nullptr && packed < next->rows) pack_ahead();
  }
}

// A matmul's A (args.a_f32 or args.a_bf16, leading dimension lda), rows
// [i0, i0 + rows) and expanded pairs [p0, p0 + np), packed into dst (row r
// at dst + r*kAStride): rounded to bf16 at kDefault, split into (hi, cross,
// lo) at kHigh. Defined in matmul_bf16.cc; writes exactly np words a row.
void PackMatmulA(const CallArgs& args, int64_t i0, int64_t rows, int64_t p0, int64_t np, uint32_t* dst);

// The matmul's Source (Bf16Driver's contract, also amx_kernel::AmxDriver's):
// A from a matrix, C a matrix (ldc) with the optional bias.
struct MatmulSource {
  static constexpr bool kWritesC = true;
  const CallArgs& args;
  float* c;
  int64_t ldc;
  const float* bias;

  void PackA(int64_t i0, int64_t rows, int64_t p0, int64_t np, uint32_t* dst) const {
    PackMatmulA(args, i0, rows, p0, np, dst);
  }
  void PrefetchRow(int64_t row, int64_t e0, int64_t ne) const {
    const int64_t elem = args.a_f32 != nullptr ? 4 : 2;
    const char* base = args.a_f32 != nullptr ? reinterpret_cast<const char*>(args.a_f32)
                                             : reinterpret_cast<const char*>(args.a_bf16);
    const char* p = base + (row * args.lda + e0) * elem;
    for (int64_t byte = 0; byte < ne * elem + 64; byte += 64) _mm_prefetch(p + byte, _MM_HINT_T1);
  }
};

}  // namespace tpumesh::kernels::matmul_internal::bf16_kernel

#endif  // TPUMESH_KERNELS_MATMUL_BF16_KERNEL_H_
