// bfloat16 storage type and the f32 <-> bf16 conversions of XLA/TPU.
//
// Contract: F32ToBf16 rounds to nearest, ties to even (as XLA's
// ConvertElementType f32->bf16 and the MXU's operand rounding); Inf keeps its
// sign; every NaN becomes a quiet NaN with the input's sign (0x7fc0 | sign).
// Bf16ToF32 is exact. Pure functions; no state.
#ifndef TPUMESH_KERNELS_BF16_H_
#define TPUMESH_KERNELS_BF16_H_

#include <bit>
#include <cstddef>
#include <cstdint>

namespace tpumesh::kernels {

struct bf16 {
  uint16_t bits = 0;
  friend bool operator==(bf16 a, bf16 b) { return a.bits == b.bits; }
};
static_assert(sizeof(bf16) == 2);

inline bf16 F32ToBf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN
    return bf16{static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7fc0u)};
  }
  // Round to nearest even: add 0x7fff plus the lowest kept bit.
  const uint32_t lsb = (u >> 16) & 1u;
  return bf16{static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16)};
}

inline float Bf16ToF32(bf16 h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h.bits) << 16);
}

// Rounds an f32 to the nearest bf16 value and returns it as f32.
inline float RoundToBf16(float f) { return Bf16ToF32(F32ToBf16(f)); }

void F32ToBf16(const float* in, bf16* out, size_t n);
void Bf16ToF32(const bf16* in, float* out, size_t n);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_BF16_H_
