// XLA:CPU's f32 transcendentals, bit for bit, for hlo/elementwise.cc and
// hlo/elementwise_complex.cc (its only includers, both built with
// -ffp-contract=off). hlo/'s internal header.
//
// Read off the optimized LLVM IR and the machine code that jaxlib 0.4.38 and jax 0.10.2 emit on an x86-64
// host with FMA: XLA:CPU builds its target with AllowFPOpFusion::Fast, so the
// backend contracts an fmul feeding one fadd into a fused multiply-add (and
// std::fma stands exactly where it did), while a product with two users, or
// one the DAG combiner pairs the other way, stays a rounded multiply. XLA
// runs with FTZ/DAZ, so denormal operands read as (signed) zero and denormal
// results flush; subnormals never arise in between for normal operands.
// Plain `a * b + c` below must not be contracted by our own compiler: the
// build has no -march (no FMA to contract to) and each product that XLA
// rounds is a separate statement or an std::fma operand.
#ifndef TPUMESH_HLO_XLA_CPU_MATH_H_
#define TPUMESH_HLO_XLA_CPU_MATH_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "hlo/elementwise.h"

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace tpumesh::hlo {


inline float Bits(uint32_t b) { return std::bit_cast<float>(b); }
inline float FlushDenormal(float x) {
  return std::fabs(x) < std::numeric_limits<float>::min() ? std::copysign(0.0f, x) : x;
}

// logf: the polynomial that XLA:CPU substitutes for llvm.log.f32
// (xla/service/cpu/polynomial_approximations.cc; the Cephes/Eigen plog:
// x = m * 2^e with m in [sqrt(1/2), sqrt(2)), log(m) by a degree-9
// polynomial in three groups of three). The same in both generations.
[[gnu::always_inline]] inline float XlaCpuLogF32(float x) {
  x = FlushDenormal(x);
  const float clamped = x > std::numeric_limits<float>::min() ? x : std::numeric_limits<float>::min();
  const uint32_t b = std::bit_cast<uint32_t>(clamped);
  const float half_m = Bits((b & 0x807fffffu) | 0x3f000000u);  // in [0.5, 1)
  float e = static_cast<float>(static_cast<int32_t>(b >> 23) - 127) + 1.0f;
  const bool below = half_m < Bits(0x3f3504f3);  // sqrt(1/2)
  const float m = (half_m - 1.0f) + (below ? half_m : 0.0f);
  if (below) e = e - 1.0f;
  const float m2 = m * m;
  const float m3 = m2 * m;
  float p0 = std::fma(m, Bits(0x3d9021bb), Bits(0xbdebd1b8));  // 7.0376836e-2, -1.1514610e-1
  p0 = std::fma(m, p0, Bits(0x3def251a));                      // 1.1676999e-1
  float p1 = std::fma(m, Bits(0xbdfe5d4f), Bits(0x3e11e9bf));  // -1.2420141e-1, 1.4249323e-1
  p1 = std::fma(m, p1, Bits(0xbe2aae50));                      // -1.6668057e-1
  float p2 = std::fma(m, Bits(0x3e4cceac), Bits(0xbe7ffffc));  // 2.0000714e-1, -2.4999994e-1
  p2 = std::fma(m, p2, Bits(0x3eaaaaaa));                      // 3.3333331e-1
  float p = std::fma(p0, m3, p1);
  p = std::fma(p, m3, p2);
  const float low = e * Bits(0xb95e8083);  // -2.12194440e-4: log(2) - 0.693359375
  const float tail = std::fma(p, m3, low);
  const float r = std::fma(-0.5f, m2, m) + tail;
  const float y = std::fma(e, 0.693359375f, r);
  if (x == 0.0f) return -std::numeric_limits<float>::infinity();
  if (x == std::numeric_limits<float>::infinity()) return x;
  if (!(x > 0.0f)) return Bits(0xffffffffu);  // x < 0 or NaN: XLA ors in an all-ones mask
  return y;
}

// log1pf: xla/service/elemental_ir_emitter.cc EmitLog1p, the same source in
// both generations: log(1 + x) for |x| >= sqrt(2) - 1, else
// x - x^2/2 + x^3 * P(x)/Q(x) (Cephes' log1p, both Horner chains fused). Only
// the last step's contraction differs: jaxlib 0.4.38 fuses x^3 * P/Q with
// the subtraction of the rounded x^2/2, jax 0.10.2 rounds x^3 * P/Q and
// fuses -x^2/2 into the addition.
[[gnu::always_inline]] inline float XlaCpuLog1pF32(float x, XlaGeneration generation) {
  x = FlushDenormal(x);
  static constexpr uint32_t kNumerator[] = {0x383de04b, 0x3eff40c5, 0x40d284fa, 0x41ef4b9c,
                                            0x4273cc76, 0x426473ad, 0x41a05101};
  static constexpr uint32_t kDenominator[] = {0x3f800000, 0x417101ad, 0x42a6185b, 0x435dc32d,
                                              0x439a8ca3, 0x43586d8a, 0x42707982};
  const float large = XlaCpuLogF32(x + 1.0f);
  const float zero = x * 0.0f;  // shared by both chains, so not fused
  float num = zero + Bits(kNumerator[0]);
  float den = zero + Bits(kDenominator[0]);
  for (int i = 1; i < 7; ++i) {
    num = std::fma(x, num, Bits(kNumerator[i]));
    den = std::fma(x, den, Bits(kDenominator[i]));
  }
  const float ratio = num / den;
  const float x2 = x * x;
  const float x3 = x * x2;
  const float correction = generation == XlaGeneration::kJax04
                               ? std::fma(x3, ratio, -(0.5f * x2))
                               : std::fma(-0.5f, x2, x3 * ratio);
  const float small = x + correction;
  return FlushDenormal(std::fabs(x) < Bits(0x3ed413cd) ? small : large);  // sqrt(2) - 1
}

// chlo.erf_inv on f32: Giles' single-precision approximation, as the chlo
// legalization of both generations expands it (materializeErfInvF32; the
// HLO XLA compiles is the same op for op): w = -log1p(x * -x), a degree-8
// polynomial in t = w - 2.5 (w < 5) or sqrt(w) - 3, times x; +-inf at
// |x| == 1. XLA:CPU fuses the Horner chain into fmas and computes w - 2.5 as
// -2.5 - log1p (the same value). The generations differ only in log1p.
[[gnu::always_inline]] inline float XlaErfInvF32(float x, XlaGeneration generation) {
  static constexpr float kLt5[] = {2.81022636e-08f,  3.43273939e-07f, -3.5233877e-06f,
                                   -4.39150654e-06f, 0.00021858087f,  -0.00125372503f,
                                   -0.00417768164f,  0.246640727f,    1.50140941f};
  static constexpr float kGe5[] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                                   -0.00367342844f,  0.00573950773f,  -0.0076224613f,
                                   0.00943887047f,   1.00167406f,     2.83297682f};
  x = FlushDenormal(x);
  const float log1p = XlaCpuLog1pF32(x * -x, generation);
  const bool lt5 = log1p > -5.0f;  // w < 5 (NaN takes the sqrt branch)
  const float t = lt5 ? -2.5f - log1p : std::sqrt(-log1p) + -3.0f;
  const float* c = lt5 ? kLt5 : kGe5;
  float p = std::fma(c[0], t, c[1]);
  for (int i = 2; i < 9; ++i) p = std::fma(p, t, c[i]);
  if (std::fabs(x) == 1.0f) p = std::numeric_limits<float>::infinity();
  const float y = x * p;
  // |x| > 1 or NaN: log1p's all-ones NaN, negated by sqrt(-w), propagates.
  return std::isnan(y) ? Bits(0x7fffffffu) : FlushDenormal(y);
}

// A NaN operand comes back quieted, its payload and sign kept.
inline float QuietNan(float x) { return Bits(std::bit_cast<uint32_t>(x) | 0x00400000u); }

// expf: the polynomial that XLA:CPU substitutes for llvm.exp.f32
// (polynomial_approximations.cc; the Cephes/Eigen pexp): x clamped to
// [-87.8, 88.8], n = floor(x * log2(e) + 1/2) clamped to [-127, 127],
// r = x - n * log(2) in two fused steps, exp(r) = 1 + r + r^2 * P(r).
// Returns exp(r) and 2^n unmultiplied: logistic fuses the product into its
// "+ 1". The same in both generations.
struct ExpParts {
  float mantissa;  // exp(r)
  float scale;     // 2^n
};
[[gnu::always_inline]] inline ExpParts XlaCpuExpPartsF32(float x) {
  x = FlushDenormal(x);
  x = std::min(std::max(x, -87.8f), 88.8f);
  const float n = std::min(std::max(std::floor(std::fma(x, Bits(0x3fb8aa3b), 0.5f)), -127.0f), 127.0f);
  float r = std::fma(-n, 0.693359375f, x);
  r = std::fma(-n, Bits(0xb95e8083), r);  // -2.12194440e-4
  float p = std::fma(r, Bits(0x39506967), Bits(0x3ab743ce));  // 1.9875691e-4, 1.3981999e-3
  p = std::fma(p, r, Bits(0x3c088908));                       // 8.3334519e-3
  p = std::fma(p, r, Bits(0x3d2aa9c1));                       // 4.1665796e-2
  p = std::fma(p, r, Bits(0x3e2aaaaa));                       // 1.6666665e-1
  p = std::fma(p, r, 0.5f);
  const float mantissa = std::fma(p, r * r, r) + 1.0f;
  return {mantissa, Bits(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23)};
}
[[gnu::always_inline]] inline float XlaCpuExpF32(float x) {
  if (std::isnan(x)) return QuietNan(x);
  const ExpParts e = XlaCpuExpPartsF32(x);
  return FlushDenormal(e.mantissa * e.scale);
}

// stablehlo.logistic: XLA expands it to 1 / (exp(-x) + 1), and XLA:CPU
// fuses exp's final scaling into the "+ 1".
[[gnu::always_inline]] inline float XlaCpuLogisticF32(float x) {
  if (std::isnan(x)) return QuietNan(-x);
  const ExpParts e = XlaCpuExpPartsF32(-x);
  return FlushDenormal(1.0f / std::fma(e.mantissa, e.scale, 1.0f));
}

// tanhf: EmitFastTanh(with_fma = true) of xla/service/llvm_ir/math_ops.cc,
// Eigen's rational ptanh: x for |x| < 4e-4 (the operand's bits, denormal or
// not), else x * P(x^2) / Q(x^2) with x clamped to +-7.99881172 (FMA hosts'
// clamp) and both Horner chains fused. jax 0.10.2's XLA adds sign(x) for
// |x| >= 20, which the clamped rational already gives: the same bits.
[[gnu::always_inline]] inline float XlaCpuTanhF32(float x) {
  static constexpr uint32_t kNumerator[] = {0xa59f25c0, 0x2a61337e, 0xaebd37ff, 0x335c0041,
                                            0x3779434a, 0x3a270ded, 0x3ba059dc};
  static constexpr uint32_t kDenominator[] = {0x35a0d3d8, 0x38f895d6, 0x3b14aa05, 0x3ba059dd};
  if (std::isnan(x)) return QuietNan(x);
  if (std::fabs(x) < 4e-4f) return x;
  const float clamp = Bits(0x40fff644);
  const float xc = std::min(std::max(x, -clamp), clamp);
  const float x2 = xc * xc;
  float num = Bits(kNumerator[0]);
  for (int i = 1; i < 7; ++i) num = std::fma(x2, num, Bits(kNumerator[i]));
  float den = Bits(kDenominator[0]);
  for (int i = 1; i < 4; ++i) den = std::fma(x2, den, Bits(kDenominator[i]));
  return FlushDenormal((xc * num) / den);
}

// expm1f: xla/service/elemental_ir_emitter.cc EmitExpm1, the same in both
// generations: x where x / 2 rounds (flushes) to zero, exp(x) - 1 for
// |x| > 1/2, else tanh(x / 2) * (exp(x) + 1).
[[gnu::always_inline]] inline float XlaCpuExpm1F32(float x) {
  if (std::isnan(x)) return QuietNan(x);
  const float half = FlushDenormal(FlushDenormal(x) * 0.5f);
  if (half == 0.0f) return x;
  const float e = XlaCpuExpF32(x);
  return FlushDenormal(std::fabs(x) > 0.5f ? e - 1.0f : XlaCpuTanhF32(half) * (e + 1.0f));
}

// erff: EmitErfF32 of xla/service/llvm_ir/math_ops.cc (Eigen's rational
// perf), the same in both generations: x * P(x^2) / Q(x^2), both chains
// explicit fmas, sign(x) for |x| >= 3.8323.
[[gnu::always_inline]] inline float XlaCpuErfF32(float x) {
  static constexpr uint32_t kNumerator[] = {0x39702d51, 0x3b5f5da2, 0x3d50b6eb, 0x3e3da740,
                                            0x3f906eba};
  static constexpr uint32_t kDenominator[] = {0xb3fd3906, 0x37c588df, 0x3a856d28, 0x3c6687d4,
                                              0x3de34c21, 0x3efeb44a, 0x3f800000};
  if (std::isnan(x)) return QuietNan(x);
  x = FlushDenormal(x);
  if (std::fabs(x) >= Bits(0x407547cb)) return std::copysign(1.0f, x);
  const float x2 = FlushDenormal(x * x);
  float num = std::fma(x2, Bits(kNumerator[0]), Bits(kNumerator[1]));
  for (int i = 2; i < 5; ++i) num = std::fma(x2, num, Bits(kNumerator[i]));
  float den = std::fma(x2, Bits(kDenominator[0]), Bits(kDenominator[1]));
  for (int i = 2; i < 7; ++i) den = std::fma(x2, den, Bits(kDenominator[i]));
  return FlushDenormal(FlushDenormal(x * num) / den);
}

// rsqrtf. jaxlib 0.4.38: 1 / sqrt(x), both correctly rounded. jax 0.10.2's
// XLA:CPU: the x86 rsqrtss estimate y, refined by one Newton step
// y + (-y / 2) * (x * y * y - 1) (two fmas) for positive normal x; the
// estimate itself elsewhere (0, inf, negative). The estimate is the
// hardware's table, so the bits match JAX's on the same CPU family (and off
// x86 we fall back to the exact quotient).
[[gnu::always_inline]] inline float XlaCpuRsqrtF32(float x, [[maybe_unused]] XlaGeneration generation) {
  x = FlushDenormal(x);
#if defined(__SSE__) || defined(__x86_64__)
  if (generation == XlaGeneration::kCurrent) {
    const float y = _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(x)));
    if (!(x > 0.0f) || x == std::numeric_limits<float>::infinity()) return y;
    const float step = std::fma(x * y, y, -1.0f);
    return FlushDenormal(std::fma(y * -0.5f, step, y));
  }
#endif
  return FlushDenormal(1.0f / std::sqrt(x));
}

// exp and log of f32 (and of f16 / bf16, computed in f32) as XLA:CPU
// expands them; f64 keeps libm's. For the real ops and the parts of the
// complex ones alike.
template <typename C>
[[gnu::always_inline]] inline C XlaCpuExp(C x) {
  if constexpr (std::is_same_v<C, float>) return XlaCpuExpF32(x);
  else return std::exp(x);
}
template <typename C>
[[gnu::always_inline]] inline C XlaCpuLog(C x) {
  if constexpr (std::is_same_v<C, float>) return XlaCpuLogF32(x);
  else return std::log(x);
}

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_XLA_CPU_MATH_H_
