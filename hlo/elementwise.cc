#include "hlo/elementwise.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "hlo/attrs.h"
#include "hlo/ops.h"
#include "hlo/special_functions.h"
#include "kernels/bf16.h"

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace tpumesh::hlo {
namespace {

struct Half {
  uint16_t bits;
};

// Storage type -> compute type.
template <typename T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<Half> { using type = float; };
template <> struct ComputeOf<kernels::bf16> { using type = float; };

template <typename T>
inline typename ComputeOf<T>::type Load(const void* p, int64_t i) {
  const T* q = static_cast<const T*>(p) + i;
  if constexpr (std::is_same_v<T, Half>) return HalfToFloat(q->bits);
  else if constexpr (std::is_same_v<T, kernels::bf16>) return kernels::Bf16ToF32(*q);
  else return *q;
}
template <typename T>
inline void Store(void* p, int64_t i, typename ComputeOf<T>::type v) {
  T* q = static_cast<T*>(p) + i;
  if constexpr (std::is_same_v<T, Half>) q->bits = FloatToHalf(v);
  else if constexpr (std::is_same_v<T, kernels::bf16>) *q = kernels::F32ToBf16(v);
  else *q = v;
}

// Calls f(T{}) with T the storage type of `t` (pred: bool).
template <typename F>
Status Visit(ElementType t, F&& f) {
  switch (t) {
    case ElementType::kPred: return f(bool{});
    case ElementType::kI8: return f(int8_t{});
    case ElementType::kI16: return f(int16_t{});
    case ElementType::kI32: return f(int32_t{});
    case ElementType::kI64: return f(int64_t{});
    case ElementType::kU8: return f(uint8_t{});
    case ElementType::kU16: return f(uint16_t{});
    case ElementType::kU32: return f(uint32_t{});
    case ElementType::kU64: return f(uint64_t{});
    case ElementType::kF16: return f(Half{});
    case ElementType::kBF16: return f(kernels::bf16{});
    case ElementType::kF32: return f(float{});
    case ElementType::kF64: return f(double{});
  }
  return InvalidArgumentError("bad element type");
}

template <typename C> constexpr bool kFloat = std::is_floating_point_v<C>;
template <typename C> constexpr bool kInt = std::is_integral_v<C> && !std::is_same_v<C, bool>;

// XLA:CPU's f32 transcendentals, bit for bit. Read off the optimized LLVM IR
// and the machine code that jaxlib 0.4.38 and jax 0.10.2 emit on an x86-64
// host with FMA: XLA:CPU builds its target with AllowFPOpFusion::Fast, so the
// backend contracts an fmul feeding one fadd into a fused multiply-add (and
// std::fma stands exactly where it did), while a product with two users, or
// one the DAG combiner pairs the other way, stays a rounded multiply. XLA
// runs with FTZ/DAZ, so denormal operands read as (signed) zero and denormal
// results flush; subnormals never arise in between for normal operands.
// Plain `a * b + c` below must not be contracted by our own compiler: the
// build has no -march (no FMA to contract to) and each product that XLA
// rounds is a separate statement or an std::fma operand.

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

// f32 (and f16/bf16, computed in f32) use XLA:CPU's expansions; f64 keeps
// libm, and erf_inv's f32 approximation.
template <typename C>
[[gnu::always_inline]] inline C Exp(C x) {
  if constexpr (std::is_same_v<C, float>) return XlaCpuExpF32(x);
  else return std::exp(x);
}
template <typename C>
[[gnu::always_inline]] inline C Expm1(C x) {
  if constexpr (std::is_same_v<C, float>) return XlaCpuExpm1F32(x);
  else return std::expm1(x);
}
template <typename C>
[[gnu::always_inline]] inline C Logistic(C x) {
  if constexpr (std::is_same_v<C, float>) return XlaCpuLogisticF32(x);
  else return C(1) / (C(1) + std::exp(-x));
}
template <typename C>
[[gnu::always_inline]] inline C Tanh(C x) {
  if constexpr (std::is_same_v<C, float>) return XlaCpuTanhF32(x);
  else return std::tanh(x);
}
template <typename C>
[[gnu::always_inline]] inline C Erf(C x) {
  if constexpr (std::is_same_v<C, float>) return XlaCpuErfF32(x);
  else return std::erf(x);
}
template <typename C>
[[gnu::always_inline]] inline C Rsqrt(C x, XlaGeneration generation) {
  if constexpr (std::is_same_v<C, float>) return XlaCpuRsqrtF32(x, generation);
  else return C(1) / std::sqrt(x);
}
template <typename C>
[[gnu::always_inline]] inline C Log(C x) {
  if constexpr (std::is_same_v<C, float>) return XlaCpuLogF32(x);
  else return std::log(x);
}
template <typename C>
[[gnu::always_inline]] inline C Log1p(C x, XlaGeneration generation) {
  if constexpr (std::is_same_v<C, float>) return XlaCpuLog1pF32(x, generation);
  else return std::log1p(x);
}
template <typename C>
[[gnu::always_inline]] inline C ErfInv(C x, XlaGeneration generation) {
  return static_cast<C>(XlaErfInvF32(static_cast<float>(x), generation));
}

template <typename C>
[[gnu::always_inline]] inline C BinOp(Bin k, C x, C y) {
  if constexpr (std::is_same_v<C, bool>) {
    switch (k) {
      case Bin::kAnd: case Bin::kMul: case Bin::kMin: return x && y;
      case Bin::kOr: case Bin::kAdd: case Bin::kMax: return x || y;
      case Bin::kXor: return x != y;
      default: return false;
    }
  } else if constexpr (kFloat<C>) {
    switch (k) {
      case Bin::kAdd: return x + y;
      case Bin::kSub: return x - y;
      case Bin::kMul: return x * y;
      case Bin::kDiv: return x / y;
      case Bin::kRem: return std::fmod(x, y);
      case Bin::kMax: return (std::isnan(x) || std::isnan(y)) ? std::numeric_limits<C>::quiet_NaN() : (x > y ? x : y);
      case Bin::kMin: return (std::isnan(x) || std::isnan(y)) ? std::numeric_limits<C>::quiet_NaN() : (x < y ? x : y);
      case Bin::kPow: return std::pow(x, y);
      case Bin::kAtan2: return std::atan2(x, y);
      case Bin::kNextAfter: return std::nextafter(x, y);
      case Bin::kPolygamma: return static_cast<C>(Polygamma(x, y));
      case Bin::kZeta: return static_cast<C>(HurwitzZeta(x, y));
      default: return 0;
    }
  } else {
    using U = std::make_unsigned_t<C>;
    constexpr int kBits = 8 * sizeof(C);
    switch (k) {
      case Bin::kAdd: return static_cast<C>(static_cast<U>(x) + static_cast<U>(y));
      case Bin::kSub: return static_cast<C>(static_cast<U>(x) - static_cast<U>(y));
      case Bin::kMul: return static_cast<C>(static_cast<U>(x) * static_cast<U>(y));
      case Bin::kDiv:
        if (y == 0) return static_cast<C>(-1);
        if constexpr (std::is_signed_v<C>) {
          if (x == std::numeric_limits<C>::min() && y == -1) return x;
        }
        return x / y;
      case Bin::kRem:
        if (y == 0) return x;
        if constexpr (std::is_signed_v<C>) {
          if (x == std::numeric_limits<C>::min() && y == -1) return 0;
        }
        return x % y;
      case Bin::kMax: return x > y ? x : y;
      case Bin::kMin: return x < y ? x : y;
      case Bin::kPow: {
        if constexpr (std::is_signed_v<C>) {
          if (y < 0) return x == 1 ? 1 : (x == -1 ? ((y & 1) ? -1 : 1) : 0);
        }
        U r = 1, b = static_cast<U>(x);
        U e = static_cast<U>(y);
        while (e) {
          if (e & 1) r *= b;
          b *= b;
          e >>= 1;
        }
        return static_cast<C>(r);
      }
      case Bin::kAnd: return x & y;
      case Bin::kOr: return x | y;
      case Bin::kXor: return x ^ y;
      case Bin::kShl: {
        const U s = static_cast<U>(y);
        return s >= kBits ? 0 : static_cast<C>(static_cast<U>(x) << s);
      }
      case Bin::kShrL: {
        const U s = static_cast<U>(y);
        return s >= kBits ? 0 : static_cast<C>(static_cast<U>(x) >> s);
      }
      case Bin::kShrA: {
        using S = std::make_signed_t<C>;
        const U s = static_cast<U>(y);
        const S v = static_cast<S>(x);
        return static_cast<C>(s >= kBits ? (v < 0 ? -1 : 0) : (v >> s));
      }
      default: return 0;
    }
  }
}

template <typename C>
[[gnu::always_inline]] inline C UnOp(Un k, C x, XlaGeneration generation) {
  if constexpr (std::is_same_v<C, bool>) {
    switch (k) {
      case Un::kNot: return !x;
      case Un::kAbs: case Un::kNeg: case Un::kSign: return x;
      default: return false;
    }
  } else if constexpr (kFloat<C>) {
    switch (k) {
      case Un::kNeg: return -x;
      case Un::kAbs: return std::fabs(x);
      case Un::kExp: return Exp(x);
      case Un::kExpm1: return Expm1(x);
      case Un::kLog: return Log(x);
      case Un::kLog1p: return Log1p(x, generation);
      case Un::kLogistic: return Logistic(x);
      case Un::kTanh: return Tanh(x);
      case Un::kSqrt: return std::sqrt(x);
      case Un::kRsqrt: return Rsqrt(x, generation);
      case Un::kCbrt: return std::cbrt(x);
      case Un::kSin: return std::sin(x);
      case Un::kCos: return std::cos(x);
      case Un::kTan: return std::tan(x);
      case Un::kFloor: return std::floor(x);
      case Un::kCeil: return std::ceil(x);
      case Un::kRoundAfz: return std::round(x);
      case Un::kRoundEven: return std::nearbyint(x);
      case Un::kSign: return std::isnan(x) ? x : (x > 0 ? C(1) : (x < 0 ? C(-1) : x));
      case Un::kErfInv: return ErfInv(x, generation);
      case Un::kErf: return Erf(x);
      case Un::kSquare: return x * x;
      // The special functions, in double and rounded once.
      case Un::kAcos: return static_cast<C>(std::acos(static_cast<double>(x)));
      case Un::kAcosh: return static_cast<C>(std::acosh(static_cast<double>(x)));
      case Un::kAsin: return static_cast<C>(std::asin(static_cast<double>(x)));
      case Un::kAsinh: return static_cast<C>(std::asinh(static_cast<double>(x)));
      case Un::kAtan: return static_cast<C>(std::atan(static_cast<double>(x)));
      case Un::kAtanh: return static_cast<C>(std::atanh(static_cast<double>(x)));
      case Un::kCosh: return static_cast<C>(std::cosh(static_cast<double>(x)));
      case Un::kSinh: return static_cast<C>(std::sinh(static_cast<double>(x)));
      case Un::kLgamma: return static_cast<C>(Lgamma(x));
      case Un::kDigamma: return static_cast<C>(Digamma(x));
      case Un::kErfc: return static_cast<C>(std::erfc(static_cast<double>(x)));
      case Un::kBesselI1e: return static_cast<C>(BesselI1e(x));
      default: return 0;
    }
  } else {
    using U = std::make_unsigned_t<C>;
    switch (k) {
      case Un::kNeg: return static_cast<C>(U(0) - static_cast<U>(x));
      case Un::kAbs:
        if constexpr (std::is_signed_v<C>) return x < 0 ? static_cast<C>(U(0) - static_cast<U>(x)) : x;
        else return x;
      case Un::kSign:
        if constexpr (std::is_signed_v<C>) return x > 0 ? 1 : (x < 0 ? -1 : 0);
        else return x > 0 ? 1 : 0;
      case Un::kNot: return static_cast<C>(~static_cast<U>(x));
      case Un::kSquare: return static_cast<C>(static_cast<U>(x) * static_cast<U>(x));
      case Un::kPopcnt: return static_cast<C>(std::popcount(static_cast<U>(x)));
      case Un::kClz: return static_cast<C>(std::countl_zero(static_cast<U>(x)));
      default: return 0;
    }
  }
}

bool BinAccepts(Bin k, ElementType t) {
  const bool f = IsFloat(t), b = t == ElementType::kPred;
  switch (k) {
    case Bin::kAnd: case Bin::kOr: case Bin::kXor: return !f;
    case Bin::kShl: case Bin::kShrA: case Bin::kShrL: return !f && !b;
    case Bin::kAtan2: case Bin::kPolygamma: case Bin::kZeta: return f;
    // nextafter steps in the element type's own ulps: f32 and f64 only
    case Bin::kNextAfter: return t == ElementType::kF32 || t == ElementType::kF64;
    case Bin::kDiv: case Bin::kRem: case Bin::kPow: case Bin::kSub: return !b;
    default: return true;
  }
}
bool UnAccepts(Un k, ElementType t) {
  const bool f = IsFloat(t), b = t == ElementType::kPred;
  switch (k) {
    case Un::kNot: return !f;
    case Un::kPopcnt: case Un::kClz: return !f && !b;
    case Un::kNeg: case Un::kAbs: case Un::kSign: case Un::kSquare: return !b;
    default: return f;
  }
}

// The loops, one instantiation per op kind: with the kind a constant the
// switch in BinOp / UnOp folds away and the compiler can vectorize the loop
// (a dense f32 add runs at memory speed instead of a branch per element).
// The unit-stride case gets its own loop for the same reason.
// The dense f32 loops once more, compiled for hosts with AVX2 and FMA
// (chosen at run time): std::fma is then one instruction instead of a call
// to libm's fmaf, and the loops vectorize 8 wide. The same bits: an fma is
// exact either way, and this file is built with -ffp-contract=off, so the
// compiler fuses nothing XLA's code did not.
bool HostHasAvx2Fma() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}
#if defined(__x86_64__)
#define TPUMESH_AVX2_FMA __attribute__((target("avx2,fma")))
#else
#define TPUMESH_AVX2_FMA
#endif
template <Un K>
TPUMESH_AVX2_FMA void UnaryDenseAvx2(const float* x, float* o, int64_t b, int64_t e, XlaGeneration g) {
  for (int64_t i = b; i < e; ++i) o[i] = UnOp<float>(K, x[i], g);
}
template <Bin K>
TPUMESH_AVX2_FMA void BinaryDenseAvx2(const float* x, int64_t sx, const float* y, int64_t sy, float* o, int64_t b,
                                      int64_t e) {
  if (sx == 1 && sy == 1) {
    for (int64_t i = b; i < e; ++i) o[i] = BinOp<float>(K, x[i], y[i]);
  } else if (sx == 1) {
    const float v = y[0];
    for (int64_t i = b; i < e; ++i) o[i] = BinOp<float>(K, x[i], v);
  } else {
    const float v = x[0];
    for (int64_t i = b; i < e; ++i) o[i] = BinOp<float>(K, v, y[i]);
  }
}

template <typename T, Bin K>
void BinaryLoop(const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  using C = typename ComputeOf<T>::type;
  const int64_t s0 = c.stride[0], s1 = c.stride[1];
  if constexpr (std::is_same_v<T, float>) {
    const float* x = static_cast<const float*>(c.in[0]);
    const float* y = static_cast<const float*>(c.in[1]);
    float* o = static_cast<float*>(out);
    if ((s0 == 1 || s1 == 1) && s0 + s1 >= 1 && s0 <= 1 && s1 <= 1 && HostHasAvx2Fma()) {
      BinaryDenseAvx2<K>(x, s0, y, s1, o, b, e);
      return;
    }
    if (s0 == 1 && s1 == 1) {
      for (int64_t i = b; i < e; ++i) o[i] = BinOp<float>(K, x[i], y[i]);
      return;
    }
    if (s0 == 1 && s1 == 0) {
      const float v = y[0];
      for (int64_t i = b; i < e; ++i) o[i] = BinOp<float>(K, x[i], v);
      return;
    }
    if (s0 == 0 && s1 == 1) {
      const float v = x[0];
      for (int64_t i = b; i < e; ++i) o[i] = BinOp<float>(K, v, y[i]);
      return;
    }
  }
  for (int64_t i = b; i < e; ++i) Store<T>(out, i, BinOp<C>(K, Load<T>(c.in[0], i * s0), Load<T>(c.in[1], i * s1)));
}
template <typename T, Un K>
void UnaryLoop(const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  using C = typename ComputeOf<T>::type;
  const int64_t s0 = c.stride[0];
  if constexpr (std::is_same_v<T, float>) {
    if (s0 == 1) {
      const float* x = static_cast<const float*>(c.in[0]);
      float* o = static_cast<float*>(out);
      if (HostHasAvx2Fma()) {
        UnaryDenseAvx2<K>(x, o, b, e, c.generation);
        return;
      }
      for (int64_t i = b; i < e; ++i) o[i] = UnOp<float>(K, x[i], c.generation);
      return;
    }
  }
  for (int64_t i = b; i < e; ++i) Store<T>(out, i, UnOp<C>(K, Load<T>(c.in[0], i * s0), c.generation));
}

template <typename T>
Status RunBinary(Bin k, const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  switch (k) {
#define TPUMESH_BIN_CASE(K, name, price) \
  case Bin::K: BinaryLoop<T, Bin::K>(c, b, e, out); break;
    TPUMESH_HLO_BINARY_OPS(TPUMESH_BIN_CASE)
#undef TPUMESH_BIN_CASE
  }
  return OkStatus();
}
template <typename T>
Status RunUnary(Un k, const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  switch (k) {
#define TPUMESH_UN_CASE(K, name, price) \
  case Un::K: UnaryLoop<T, Un::K>(c, b, e, out); break;
    TPUMESH_HLO_UNARY_OPS(TPUMESH_UN_CASE)
#undef TPUMESH_UN_CASE
  }
  return OkStatus();
}

template <typename C>
bool Compare(CompareDirection dir, bool total, C x, C y) {
  if constexpr (kFloat<C>) {
    if (total) {  // IEEE totalOrder on the bits
      using I = std::conditional_t<sizeof(C) == 8, int64_t, int32_t>;
      auto key = [](C v) {
        I i;
        std::memcpy(&i, &v, sizeof(C));
        return i < 0 ? static_cast<I>(~i) ^ std::numeric_limits<I>::min() : i;
      };
      const I a = key(x), b = key(y);
      switch (dir) {
        case CompareDirection::kEq: return a == b;
        case CompareDirection::kNe: return a != b;
        case CompareDirection::kLt: return a < b;
        case CompareDirection::kLe: return a <= b;
        case CompareDirection::kGt: return a > b;
        case CompareDirection::kGe: return a >= b;
      }
    }
  }
  switch (dir) {
    case CompareDirection::kEq: return x == y;
    case CompareDirection::kNe: return x != y;
    case CompareDirection::kLt: return x < y;
    case CompareDirection::kLe: return x <= y;
    case CompareDirection::kGt: return x > y;
    case CompareDirection::kGe: return x >= y;
  }
  return false;
}

// Converts one value of compute type From to storage type To.
template <typename To, typename From>
typename ComputeOf<To>::type ConvertValue(From v) {
  using C = typename ComputeOf<To>::type;
  if constexpr (std::is_same_v<C, bool>) {
    return v != From(0);
  } else if constexpr (kInt<C> && kFloat<From>) {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<From>(std::numeric_limits<C>::min())) return std::numeric_limits<C>::min();
    if (v >= static_cast<From>(std::numeric_limits<C>::max())) return std::numeric_limits<C>::max();
    return static_cast<C>(v);
  } else {
    return static_cast<C>(v);
  }
}

// FoldRows' loop for storage types whose compute type is themselves (f16
// and bf16 round at every step and go one element at a time instead).
template <typename T, Bin K>
void FoldRowsLoop(const void* x, int64_t len, int64_t rb, int64_t re, void* acc) {
  using C = typename ComputeOf<T>::type;
  for (int64_t o = rb; o < re; ++o) {
    C a = Load<T>(acc, o);
    for (int64_t r = 0; r < len; ++r) a = BinOp<C>(K, a, Load<T>(x, o * len + r));
    Store<T>(acc, o, a);
  }
}

}  // namespace

Status FoldRows(const ElementwiseCall& c, const void* x, int64_t len, int64_t rb, int64_t re, void* acc) {
  const OpEntry* entry = EntryOf(*c.op);
  if (!entry || entry->scalar.kind != ScalarFn::Kind::kBinary)
    return InvalidArgumentError(c.op->name + " is not a binary op");
  const Bin bin = entry->scalar.bin;
  if (!BinAccepts(bin, c.in_type))
    return InvalidArgumentError(c.op->name + " does not take " + std::string(ElementTypeName(c.in_type)));
  if (c.in_type == ElementType::kF16 || c.in_type == ElementType::kBF16) {
    // Narrow floats round after every step: fold one element at a time.
    ElementwiseCall step = c;
    step.stride[0] = step.stride[1] = 0;
    const int w = ElementTypeBytes(c.in_type);
    for (int64_t o = rb; o < re; ++o) {
      uint8_t* a = static_cast<uint8_t*>(acc) + o * w;
      for (int64_t r = 0; r < len; ++r) {
        step.in[0] = a;
        step.in[1] = static_cast<const uint8_t*>(x) + (o * len + r) * w;
        TPUMESH_RETURN_IF_ERROR(EvalElementwise(step, 0, 1, a));
      }
    }
    return OkStatus();
  }
  return Visit(c.in_type, [&](auto t) -> Status {
    using T = decltype(t);
    switch (bin) {
#define TPUMESH_FOLD_CASE(K, name, price) \
  case Bin::K: FoldRowsLoop<T, Bin::K>(x, len, rb, re, acc); break;
      TPUMESH_HLO_BINARY_OPS(TPUMESH_FOLD_CASE)
#undef TPUMESH_FOLD_CASE
    }
    return OkStatus();
  });
}

Status ConvertElements(ElementType from, const void* in, ElementType to, int64_t begin, int64_t end, void* out) {
  static const Op* const kConvert = [] {
    auto* op = new Op;
    op->name = "stablehlo.convert";
    op->entry = FindOp(op->name);
    return op;
  }();
  ElementwiseCall c;
  c.op = kConvert;
  c.in_type = from;
  c.out_type = to;
  c.in[0] = in;
  return EvalElementwise(c, begin, end, out);
}

namespace {

Status EvalUnary(Un un, const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  if (!UnAccepts(un, c.in_type))
    return InvalidArgumentError(c.op->name + " does not take " + std::string(ElementTypeName(c.in_type)));
  if (un == Un::kIsFinite) {
      return Visit(c.in_type, [&](auto t) -> Status {
        using T = decltype(t);
        bool* o = static_cast<bool*>(out);
        for (int64_t i = b; i < e; ++i) {
          if constexpr (kFloat<typename ComputeOf<T>::type>) o[i] = std::isfinite(Load<T>(c.in[0], i * c.stride[0]));
          else o[i] = true;
        }
        return OkStatus();
      });
    }
  return Visit(c.in_type, [&](auto t) { return RunUnary<decltype(t)>(un, c, b, e, out); });
}

Status EvalCompare(const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  const auto attrs = AttrsOf(*c.op);
  const auto* cmp = std::get_if<CompareAttrs>(&attrs->value);
  if (!cmp) return InvalidArgumentError("stablehlo.compare: " + attrs->status.message());
  const CompareDirection dir = cmp->direction;
  const bool total = cmp->total_order;
  bool* o = static_cast<bool*>(out);
  return Visit(c.in_type, [&](auto t) -> Status {
    using T = decltype(t);
    using C = typename ComputeOf<T>::type;
    for (int64_t i = b; i < e; ++i)
      o[i] = Compare<C>(dir, total, Load<T>(c.in[0], i * c.stride[0]), Load<T>(c.in[1], i * c.stride[1]));
    return OkStatus();
  });
}

Status EvalSelect(const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  const bool* p = static_cast<const bool*>(c.in[0]);
  const int w = ElementTypeBytes(c.in_type);
  auto* o = static_cast<uint8_t*>(out);
  for (int64_t i = b; i < e; ++i) {
    const void* src = p[i * c.stride[0]] ? c.in[1] : c.in[2];
    const int64_t s = p[i * c.stride[0]] ? c.stride[1] : c.stride[2];
    std::memcpy(o + i * w, static_cast<const uint8_t*>(src) + i * s * w, static_cast<size_t>(w));
  }
  return OkStatus();
}

// clamp(min, x, max)
Status EvalClamp(const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  return Visit(c.in_type, [&](auto t) -> Status {
    using T = decltype(t);
    using C = typename ComputeOf<T>::type;
    for (int64_t i = b; i < e; ++i) {
      const C lo = Load<T>(c.in[0], i * c.stride[0]), x = Load<T>(c.in[1], i * c.stride[1]),
              hi = Load<T>(c.in[2], i * c.stride[2]);
      Store<T>(out, i, BinOp<C>(Bin::kMin, BinOp<C>(Bin::kMax, x, lo), hi));
    }
    return OkStatus();
  });
}

Status EvalConvert(const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  return Visit(c.in_type, [&](auto from) -> Status {
    using F = decltype(from);
    return Visit(c.out_type, [&](auto to) -> Status {
      using T = decltype(to);
      for (int64_t i = b; i < e; ++i)
        Store<T>(out, i, ConvertValue<T>(Load<F>(c.in[0], i * c.stride[0])));
      return OkStatus();
    });
  });
}

Status EvalReducePrecision(const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  const auto attrs = AttrsOf(*c.op);
  const auto* bits = std::get_if<ReducePrecisionAttrs>(&attrs->value);
  if (!bits) return InvalidArgumentError("stablehlo.reduce_precision: " + attrs->status.message());
  if (c.in_type != ElementType::kF32) return InvalidArgumentError("stablehlo.reduce_precision: f32 only");
  const int m = bits->mantissa_bits, x = bits->exponent_bits;
  const float* in = static_cast<const float*>(c.in[0]);
  float* o = static_cast<float*>(out);
  for (int64_t i = b; i < e; ++i) {
    uint32_t u = std::bit_cast<uint32_t>(in[i * c.stride[0]]);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      o[i] = in[i * c.stride[0]];
      continue;
    }
    if (m < 23) {  // round the mantissa to m bits, nearest even
      const uint32_t drop = 23 - m;
      const uint32_t lsb = (u >> drop) & 1u;
      u += ((1u << (drop - 1)) - 1) + lsb;
      u &= ~((1u << drop) - 1);
    }
    if (x < 8) {  // clamp the exponent's range
      const int32_t bias = (1 << (x - 1)) - 1;
      const int32_t exp = static_cast<int32_t>((u >> 23) & 0xff) - 127;
      if (exp > bias) u = (u & 0x80000000u) | 0x7f800000u;
      else if (exp < 1 - bias) u &= 0x80000000u;
    }
    o[i] = std::bit_cast<float>(u);
  }
  return OkStatus();
}

}  // namespace

Status EvalElementwise(const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  const std::string& name = c.op->name;
  const OpEntry* entry = EntryOf(*c.op);
  if (!entry) return UnimplementedError(name + " is not an elementwise op");
  const ScalarFn fn = entry->scalar;
  switch (fn.kind) {
    case ScalarFn::Kind::kBinary:
      if (!BinAccepts(fn.bin, c.in_type))
        return InvalidArgumentError(name + " does not take " + std::string(ElementTypeName(c.in_type)));
      return Visit(c.in_type, [&](auto t) { return RunBinary<decltype(t)>(fn.bin, c, b, e, out); });
    case ScalarFn::Kind::kUnary:
      return EvalUnary(fn.un, c, b, e, out);
    case ScalarFn::Kind::kCompare: return EvalCompare(c, b, e, out);
    case ScalarFn::Kind::kSelect: return EvalSelect(c, b, e, out);
    case ScalarFn::Kind::kClamp: return EvalClamp(c, b, e, out);
    case ScalarFn::Kind::kConvert: return EvalConvert(c, b, e, out);
    case ScalarFn::Kind::kReducePrecision: return EvalReducePrecision(c, b, e, out);
    case ScalarFn::Kind::kNone: break;
  }
  return UnimplementedError(name + " is not an elementwise op");
}

}  // namespace tpumesh::hlo
