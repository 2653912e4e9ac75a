// bfloat16 storage type and the f32 <-> bf16 conversions of XLA/TPU, and
// IEEE half (f16) <-> f32, the one copy every layer uses (safetensors F16,
// HDF5 float16, StableHLO f16).
//
// Contract: F32ToBf16 rounds to nearest, ties to even (as XLA's
// ConvertElementType f32->bf16 and the MXU's operand rounding); Inf keeps its
// sign; every NaN becomes a quiet NaN with the input's sign (0x7fc0 | sign).
// Bf16ToF32 is exact. FloatToHalf rounds to nearest even (subnormal halves
// included), overflows to Inf, and keeps NaN a NaN; HalfToFloat is exact.
// Pure functions; no state.
#ifndef TPUMESH_KERNELS_BF16_H_
#define TPUMESH_KERNELS_BF16_H_

#include <bit>
#include <cmath>
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

inline uint16_t FloatToHalf(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (a < 0x38800000u) {  // a subnormal half (or zero): scale and round once
    const float m = std::bit_cast<float>(a) * 16777216.0f;  // x 2^24: units of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(m)));
  }
  // normal: rebias the exponent, round the 13 dropped bits to nearest even
  const uint32_t lsb = (a >> 13) & 1u;
  const uint32_t r = (a + 0xfffu + lsb) >> 13;
  return static_cast<uint16_t>(sign | (r - (112u << 10)));
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) / 16777216.0f;  // m x 2^-24, exact
    return sign ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

void F32ToBf16(const float* in, bf16* out, size_t n);
void Bf16ToF32(const bf16* in, float* out, size_t n);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_BF16_H_
