// The kBf16 provider: an AVX512-BF16 micro-kernel (vdpbf16ps) and its block
// driver, compiled with a target attribute so the binary stays portable (no
// -march); callers check CpuHasAvx512Bf16() first. Highway 1.0.3 has no
// vdpbf16ps (its bf16 dot product is emulated at f32 speed, TOOLCHAIN.md),
// hence raw intrinsics here.
//
// Micro-kernel bf16_gemm_14x32c2: C[14, 32] = in[14, 32] + A[14, 2P] x
// B[2P, 32] (in = 0 for the first K block); 28 zmm accumulators, 2 zmm of B,
// 1 broadcast of A = 31 of the 32 zmm registers. Per pair of k: 2 aligned
// 64-byte loads of B, 14 dword broadcasts of A and 28 vdpbf16ps (64 flops
// each). The edges: fewer rows by template (1..14), fewer columns by masked
// C stores (B is zero-padded to 32 columns), K odd by a zero in the padded
// pair. Measured alone with its data in L1/L2: 229 GFLOP/s on one Zen 4 core,
// 98% of the 233 a bare vdpbf16ps loop reaches. docs/kernels.md has the
// whole contract.
//
// Packed A (per call, per thread): rows of bf16 pairs, one uint32 per pair,
// row r at a + r*kAStride. kAStride is a compile-time constant so the 14
// rows are displacements off one pointer; it is kKcPairs + 16 words so the 14
// rows of a micro-tile do not fall into the same L1 sets.
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"

#define TPUMESH_TARGET_BF16 __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl,avx512dq")))

namespace tpumesh::kernels {

bool CpuHasAvx512Bf16() {
  static const bool has = [] {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    const bool osxsave = ecx & (1u << 27);
    if (!osxsave) return false;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const unsigned max_subleaf = eax;
    const bool avx512f = ebx & (1u << 16), avx512dq = ebx & (1u << 17),
               avx512bw = ebx & (1u << 30), avx512vl = ebx & (1u << 31);
    if (!(avx512f && avx512dq && avx512bw && avx512vl) || max_subleaf < 1) return false;
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    const bool avx512_bf16 = eax & (1u << 5);
    if (!avx512_bf16) return false;
    // XCR0: SSE (1), AVX (2), opmask (5), ZMM_Hi256 (6), Hi16_ZMM (7) saved by the OS.
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    return (xcr0_lo & 0xe6u) == 0xe6u;
  }();
  return has;
}

namespace matmul_internal {
namespace {

constexpr int kMr = 14;
constexpr int64_t kNr = kPanelWidth;  // 32
// Pairs of k per block: the B micro-panel (256 pairs x 32 words = 32 KiB)
// is reused by every row group of the A block; 256 beat 128 and 192 by
// 2-4% at 2048^3 and 4096x320x2880 (fewer partial-sum loads and stores).
constexpr int64_t kKcPairs = 256;
constexpr int64_t kAStride = kKcPairs + 16;
// Rows per A block: 168 x 272 words = 179 KiB in L2 (Zen 4: 1 MiB), leaving
// room for the B micro-panels, the partial sums and the next block; 336 rows
// was 3% slower at 4096x320x2880.
constexpr int64_t kMc = kMr * 12;
// Columns per block: the partial sums of a block, kMc x kNc floats, 672 KiB.
constexpr int64_t kNc = 1024;

// Columns [0, n) of a 32-column tile as two 16-lane masks.
inline void ColumnMasks(int64_t n, __mmask16* m0, __mmask16* m1) {
  const uint32_t bits = n >= 32 ? 0xffffffffu : ((1u << n) - 1u);
  *m0 = static_cast<__mmask16>(bits & 0xffffu);
  *m1 = static_cast<__mmask16>(bits >> 16);
}

// The micro-kernel. Accumulators start from `in` (a partial-sum tile, row
// stride 32) or from zero when in is null; after the pairs they go to `out`
// (row stride ld_out) under the column masks. Accumulating through a private
// tile instead of C itself matters: consecutive calls work on row groups
// 14 rows apart, and with C's row stride a multiple of 1 KiB (N = 320, 768,
// 1280, 2048 ...) the loads of one call then hit the 4 KiB-aliases of the
// previous call's pending stores. Measured on Zen 4, the kernel alone over
// 24 row groups with ldc = 2048: 201 GFLOP/s when it loads C, 223 when not.
template <int kRows>
TPUMESH_TARGET_BF16 void MicroKernel(int64_t pairs, const uint32_t* __restrict a,
                                     const uint32_t* __restrict b, const float* __restrict in,
                                     float* __restrict out, int64_t ld_out, __mmask16 m0,
                                     __mmask16 m1) {
  __m512 acc0[kRows], acc1[kRows];
  if (in != nullptr) {
#pragma GCC unroll 14
    for (int r = 0; r < kRows; ++r) {
      acc0[r] = _mm512_load_ps(in + r * kNr);
      acc1[r] = _mm512_load_ps(in + r * kNr + 16);
    }
  } else {
#pragma GCC unroll 14
    for (int r = 0; r < kRows; ++r) {
      acc0[r] = _mm512_setzero_ps();
      acc1[r] = _mm512_setzero_ps();
    }
  }
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b + p * kNr);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + p * kNr + 16);
#pragma GCC unroll 14
    for (int r = 0; r < kRows; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * kAStride + p]));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], av, b0);
      acc1[r] = _mm512_dpbf16_ps(acc1[r], av, b1);
    }
  }
  if ((m0 & m1) == 0xffff) {
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

template <int... kRows>
constexpr auto MakeKernelTable(std::integer_sequence<int, kRows...>) {
  return std::array<MicroKernelFn, sizeof...(kRows)>{&MicroKernel<kRows + 1>...};
}
// kKernels[r - 1] handles r rows.
constexpr auto kKernels = MakeKernelTable(std::make_integer_sequence<int, kMr>{});

// Low/high 16 lanes of the first n of 32.
inline __mmask32 FirstN32(int64_t n) {
  return n >= 32 ? 0xffffffffu : static_cast<__mmask32>((1u << n) - 1u);
}
inline __mmask16 FirstN16(int64_t n) {
  return n >= 16 ? 0xffff : static_cast<__mmask16>((1u << n) - 1u);
}

// Dword index vectors that interleave 16 hi pairs H, cross pairs X and lo
// pairs L into (H0, X0, L0, H1, X1, L1, ...): output word t takes H[t/3] or,
// when t%3 == 2, L[t/3] (index 16 + t/3 in _mm512_permutex2var_epi32); the
// X words are then blended in with a second permute under kCrossMask*.
struct HighIndex {
  alignas(64) int32_t idx[3][16];
  constexpr HighIndex() : idx{} {
    for (int t = 0; t < 48; ++t) idx[t / 16][t % 16] = (t % 3 == 2 ? 16 : 0) + t / 3;
  }
};
constexpr HighIndex kHighIndex;
// Output words t with t % 3 == 1 (the cross copy), per 16-word vector.
constexpr __mmask16 CrossMask(int v) {
  __mmask16 m = 0;
  for (int j = 0; j < 16; ++j) m |= ((16 * v + j) % 3 == 1 ? 1 : 0) << j;
  return m;
}
constexpr __mmask16 kCrossMask0 = CrossMask(0), kCrossMask1 = CrossMask(1), kCrossMask2 = CrossMask(2);

// (hi, cross, lo) words of 16 original pairs, 16 output words at a time.
TPUMESH_TARGET_BF16 inline __m512i Interleave3(__m512i hi, __m512i cross, __m512i lo, __m512i idx,
                                               __mmask16 cross_words) {
  const __m512i hl = _mm512_permutex2var_epi32(hi, idx, lo);
  // idx & 15 is the pair index for every word; take those words from cross.
  return _mm512_mask_permutexvar_epi32(hl, cross_words, idx, cross);
}

// Packs rows [i0, i0 + rows) of A, expanded pairs [p0, p0 + np), into
// dst (row r at dst + r*kAStride), rounding to bf16 as the precision says.
TPUMESH_TARGET_BF16 void PackA(const CallArgs& args, int64_t i0, int64_t rows, int64_t p0,
                               int64_t np, uint32_t* dst) {
  const int64_t k = args.b->k;
  const bool high = args.b->precision == Precision::kHigh;
  if (!high) {
    const int64_t e0 = 2 * p0;                        // first element of k
    const int64_t ne = std::min<int64_t>(2 * np, k - e0);  // real elements; rest are pad
    for (int64_t r = 0; r < rows; ++r) {
      uint32_t* out = dst + r * kAStride;
      int64_t t = 0;  // pairs done; 16 pairs = 32 elements per step
      // Whole steps of 32 elements, then the tail under masks.
      if (args.a_f32 != nullptr) {
        const float* src = args.a_f32 + (i0 + r) * args.lda + e0;
        for (; t + 16 <= np && 2 * t + 32 <= ne; t += 16) {
          const __m512 v0 = _mm512_loadu_ps(src + 2 * t);
          const __m512 v1 = _mm512_loadu_ps(src + 2 * t + 16);
          _mm512_storeu_si512(out + t, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
        }
      } else {
        const bf16* src = args.a_bf16 + (i0 + r) * args.lda + e0;
        for (; t + 16 <= np && 2 * t + 32 <= ne; t += 16) {
          _mm512_storeu_si512(out + t, _mm512_loadu_si512(src + 2 * t));
        }
      }
      for (; t < np; t += 16) {
        const int64_t left = ne - 2 * t;  // real elements from here (may be <= 0)
        const __mmask32 lm = left <= 0 ? 0 : FirstN32(left);
        __m512i w;
        if (args.a_f32 != nullptr) {
          const float* src = args.a_f32 + (i0 + r) * args.lda + e0 + 2 * t;
          const __m512 v0 = _mm512_maskz_loadu_ps(static_cast<__mmask16>(lm), src);
          const __m512 v1 = _mm512_maskz_loadu_ps(static_cast<__mmask16>(lm >> 16), src + 16);
          w = (__m512i)_mm512_cvtne2ps_pbh(v1, v0);
        } else {
          const bf16* src = args.a_bf16 + (i0 + r) * args.lda + e0 + 2 * t;
          w = _mm512_maskz_loadu_epi16(lm, src);
        }
        _mm512_mask_storeu_epi32(out + t, FirstN16(np - t), w);
      }
    }
    return;
  }
  // kHigh: expanded pairs come in threes per original pair; p0 and np are
  // multiples of 3.
  const int64_t q0 = p0 / 3, nq = np / 3;
  const int64_t e0 = 2 * q0;
  const int64_t ne = std::min<int64_t>(2 * nq, k - e0);
  const __m512i idx0 = _mm512_load_si512(kHighIndex.idx[0]);
  const __m512i idx1 = _mm512_load_si512(kHighIndex.idx[1]);
  const __m512i idx2 = _mm512_load_si512(kHighIndex.idx[2]);
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t* out = dst + r * kAStride;
    for (int64_t t = 0; t < nq; t += 16) {  // 16 original pairs -> 48 words
      const int64_t left = ne - 2 * t;
      const __mmask32 lm = left <= 0 ? 0 : FirstN32(left);
      __m512i hi, lo;
      if (args.a_f32 != nullptr) {
        const float* src = args.a_f32 + (i0 + r) * args.lda + e0 + 2 * t;
        const __m512 v0 = _mm512_maskz_loadu_ps(static_cast<__mmask16>(lm), src);
        const __m512 v1 = _mm512_maskz_loadu_ps(static_cast<__mmask16>(lm >> 16), src + 16);
        hi = (__m512i)_mm512_cvtne2ps_pbh(v1, v0);
        // hi back in f32, elements 0..15 and 16..31. The maskz forms: GCC 12's
        // unmasked ones warn (-Wmaybe-uninitialized on _mm512_undefined_*).
        const __m512 hf0 = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(
            0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, _mm512_maskz_extracti64x4_epi64(0xf, hi, 0)), 16));
        const __m512 hf1 = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(
            0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, _mm512_maskz_extracti64x4_epi64(0xf, hi, 1)), 16));
        // lo = 0 where hi is Inf or NaN (fpclass 0x99: QNaN, +Inf, -Inf, SNaN).
        const __m512 d0 = _mm512_maskz_sub_ps(~_mm512_fpclass_ps_mask(hf0, 0x99), v0, hf0);
        const __m512 d1 = _mm512_maskz_sub_ps(~_mm512_fpclass_ps_mask(hf1, 0x99), v1, hf1);
        lo = (__m512i)_mm512_cvtne2ps_pbh(d1, d0);
      } else {
        const bf16* src = args.a_bf16 + (i0 + r) * args.lda + e0 + 2 * t;
        hi = _mm512_maskz_loadu_epi16(lm, src);
        lo = _mm512_setzero_si512();
      }
      // cross = hi with Inf/NaN halves zeroed (matmul_internal::SplitBf16).
      const __mmask32 nonfinite = _mm512_cmpeq_epi16_mask(
          _mm512_and_si512(hi, _mm512_set1_epi16(0x7f80)), _mm512_set1_epi16(0x7f80));
      const __m512i cross = _mm512_maskz_mov_epi16(~nonfinite, hi);
      const int64_t words = 3 * std::min<int64_t>(16, nq - t);
      uint32_t* o = out + 3 * t;
      _mm512_mask_storeu_epi32(o, FirstN16(words), Interleave3(hi, cross, lo, idx0, kCrossMask0));
      if (words > 16)
        _mm512_mask_storeu_epi32(o + 16, FirstN16(words - 16), Interleave3(hi, cross, lo, idx1, kCrossMask1));
      if (words > 32)
        _mm512_mask_storeu_epi32(o + 32, FirstN16(words - 32), Interleave3(hi, cross, lo, idx2, kCrossMask2));
    }
  }
}

// Per-thread scratch, grown on demand and kept for the thread's lifetime.
template <typename T, int kSlot>
T* Scratch(size_t count) {
  thread_local AlignedArray<T> buffer;
  thread_local size_t capacity = 0;
  if (count > capacity) {
    buffer = AllocateAligned<T>(count);
    capacity = count;
  }
  return buffer.get();
}

// One step of the driver: rows [ib, ib + rows) x K pairs [p0, p0 + np) of A
// against columns [jb, je).
struct Step {
  int64_t jb, je, ib, rows, p0, np;
};

// Where the element range of an A block starts and how long it is, in k.
void ElementRange(const PackedData& b, const Step& s, int64_t* e0, int64_t* ne) {
  const bool high = b.precision == Precision::kHigh;
  *e0 = high ? 2 * (s.p0 / 3) : 2 * s.p0;
  *ne = std::min(high ? 2 * (s.np / 3) : 2 * s.np, b.k - *e0);
}

// The driver. A blocks are double-buffered: while the kernels run on one
// block, the next block is packed into the other buffer a few rows per kernel
// call, and the rows after those are prefetched. Packing is a stream over A,
// from DRAM for SD-sized activations (47 MB of f32 at 4096x320x2880). Timed
// with rdtsc there on one core: a serial pack between the kernel phases took
// 12% of the time, 6% with the next block prefetched during the kernels, 4%
// packed piecewise as here (the loads still wait on DRAM in part).
TPUMESH_TARGET_BF16 void Bf16BlockImpl(const CallArgs& args, int64_t i0, int64_t i1, int64_t j0,
                                       int64_t j1) {
  const PackedData& b = *args.b;
  const int64_t pairs = b.pairs;
  const int64_t kc = PairBlockSize(pairs, kKcPairs, b.precision == Precision::kHigh ? 3 : 1);
  uint32_t* a_blocks[2] = {Scratch<uint32_t, 0>(static_cast<size_t>(kMc * kAStride)),
                           Scratch<uint32_t, 2>(static_cast<size_t>(kMc * kAStride))};
  // Partial sums between K blocks, panel-major: tile (panel, row) at
  // partial + (panel * kMc + row) * 32. Not needed when K is one block.
  float* partial = pairs > kc ? Scratch<float, 1>(static_cast<size_t>(kMc * kNc)) : nullptr;

  std::vector<Step> steps;
  for (int64_t jb = j0; jb < j1; jb += kNc) {
    for (int64_t ib = i0; ib < i1; ib += kMc) {
      for (int64_t p0 = 0; p0 < pairs; p0 += kc) {
        steps.push_back({jb, std::min(j1, jb + kNc), ib, std::min(kMc, i1 - ib), p0, std::min(kc, pairs - p0)});
      }
    }
  }
  const char* a_bytes = args.a_f32 != nullptr ? reinterpret_cast<const char*>(args.a_f32)
                                              : reinterpret_cast<const char*>(args.a_bf16);
  const int64_t elem = args.a_f32 != nullptr ? 4 : 2;

  PackA(args, steps[0].ib, steps[0].rows, steps[0].p0, steps[0].np, a_blocks[0]);
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
      for (; prefetched < want; ++prefetched) {
        const char* row = a_bytes + ((next->ib + prefetched) * args.lda + next_e0) * elem;
        for (int64_t byte = 0; byte < next_ne * elem + 64; byte += 64) _mm_prefetch(row + byte, _MM_HINT_T1);
      }
      const int64_t n = std::min(per_call, next->rows - packed);
      if (n > 0) PackA(args, next->ib + packed, n, next->p0, next->np, next_block + packed * kAStride);
      packed += n;
    };
    for (int64_t col = s.jb; col < s.je; col += kNr) {
      __mmask16 m0 = 0xffff, m1 = 0xffff;
      if (last) ColumnMasks(std::min(kNr, s.je - col), &m0, &m1);
      const uint32_t* b_panel = b.pair_panel(col / kNr) + s.p0 * kNr;
      float* tile = partial == nullptr ? nullptr : partial + (col - s.jb) * kMc;
      for (int64_t r0 = 0; r0 < s.rows; r0 += kMr) {
        const int64_t mr = std::min<int64_t>(kMr, s.rows - r0);
        const float* in = first ? nullptr : tile + r0 * kNr;
        float* out = last ? args.c + (s.ib + r0) * args.ldc + col : tile + r0 * kNr;
        pack_ahead();
        kKernels[mr - 1](s.np, a_block + r0 * kAStride, b_panel, in, out, last ? args.ldc : kNr, m0, m1);
      }
    }
    while (next != nullptr && packed < next->rows) pack_ahead();
  }
}

}  // namespace

DriverShape Bf16DriverShape() { return {kMr, kMc}; }

void Bf16Block(const CallArgs& args, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  Bf16BlockImpl(args, i0, i1, j0, j1);
}

}  // namespace matmul_internal
}  // namespace tpumesh::kernels
