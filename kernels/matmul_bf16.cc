// The kBf16 provider's matmul: the packing of A (f32 or
// bf16, rounded to bf16, or split into hi/lo pieces for kHigh; the kAmx
// provider packs its A with the same PackMatmulA) and the block entry point. The micro-kernel bf16_gemm_14x32c2 and the block driver live
// in kernels/matmul_bf16_kernel.h, shared with the packed-weight conv. Raw
// intrinsics under a target attribute, so the binary stays portable (no
// -march): Highway 1.0.3 has no vdpbf16ps (its bf16 dot product is emulated
// at f32 speed, TOOLCHAIN.md).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/matmul.h"
#include "kernels/matmul_bf16_kernel.h"
#include "kernels/matmul_internal.h"

namespace tpumesh::kernels {

namespace matmul_internal {
namespace {

using bf16_kernel::Bf16Driver;
using bf16_kernel::FirstN16;
using bf16_kernel::FirstN32;
using bf16_kernel::kAStride;
using bf16_kernel::kMc;
using bf16_kernel::kMr;

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

}  // namespace

namespace bf16_kernel {

TPUMESH_TARGET_BF16 void PackMatmulA(const CallArgs& args, int64_t i0, int64_t rows, int64_t p0,
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

}  // namespace bf16_kernel

DriverShape Bf16DriverShape() { return {kMr, kMc}; }

void Bf16Block(const CallArgs& args, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  Bf16Driver(bf16_kernel::MatmulSource{args, args.c, args.ldc, args.bias}, *args.b, i0, i1, j0, j1);
}

}  // namespace matmul_internal
}  // namespace tpumesh::kernels
