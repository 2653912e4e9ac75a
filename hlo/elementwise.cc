#include "hlo/elementwise.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "hlo/attrs.h"
#include "hlo/elementwise_complex.h"
#include "hlo/ops.h"
#include "hlo/special_functions.h"
#include "hlo/xla_cpu_math.h"
#include "kernels/bf16.h"


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
    case ElementType::kC64:
    case ElementType::kC128: break;  // hlo/elementwise_complex.h
  }
  return InvalidArgumentError("bad element type");
}

template <typename C> constexpr bool kFloat = std::is_floating_point_v<C>;
template <typename C> constexpr bool kInt = std::is_integral_v<C> && !std::is_same_v<C, bool>;

// f32 (and f16/bf16, computed in f32) use XLA:CPU's expansions; f64 keeps
// libm, and erf_inv's f32 approximation.
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
      case Un::kExp: return XlaCpuExp(x);
      case Un::kExpm1: return Expm1(x);
      case Un::kLog: return XlaCpuLog(x);
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
      // XLA's: copysign(x != 0, x), x if NaN. Under FTZ/DAZ (an hlo run) a
      // denormal compares equal to 0, so its sign is a signed zero.
      case Un::kSign: return std::isnan(x) ? x : std::copysign(x != C(0) ? C(1) : C(0), x);
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
      case Un::kChloTan: return std::tan(x);  // jax 0.4's lowering of lax.tan: stablehlo.tan's value
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

// The fused multiply-add of MulAdd form F per element, f32 or f64 (the
// negations are sign flips, as XLA's fneg).
template <typename C, MulAdd F>
[[gnu::always_inline]] inline void MulAddLoopBody(const ElementwiseCall& c, int64_t b, int64_t e, C* o) {
  const C* x = static_cast<const C*>(c.in[0]);
  const C* y = static_cast<const C*>(c.in[1]);
  const C* z = static_cast<const C*>(c.in[2]);
  const int64_t s0 = c.stride[0], s1 = c.stride[1], s2 = c.stride[2];
  for (int64_t i = b; i < e; ++i) {
    if constexpr (F == MulAdd::kAdd) o[i] = std::fma(x[i * s0], y[i * s1], z[i * s2]);
    else if constexpr (F == MulAdd::kProductMinus) o[i] = std::fma(x[i * s0], y[i * s1], -z[i * s2]);
    else o[i] = std::fma(-x[i * s0], y[i * s1], z[i * s2]);
  }
}
template <typename C, MulAdd F>
TPUMESH_AVX2_FMA void MulAddLoopAvx2(const ElementwiseCall& c, int64_t b, int64_t e, C* o) {
  MulAddLoopBody<C, F>(c, b, e, o);
}
template <typename C, MulAdd F>
void MulAddLoop(const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  if (HostHasAvx2Fma()) MulAddLoopAvx2<C, F>(c, b, e, static_cast<C*>(out));
  else MulAddLoopBody<C, F>(c, b, e, static_cast<C*>(out));
}
template <typename C>
void MulAddLoop(const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  switch (c.mul_add) {
    case MulAdd::kAdd: MulAddLoop<C, MulAdd::kAdd>(c, b, e, out); break;
    case MulAdd::kProductMinus: MulAddLoop<C, MulAdd::kProductMinus>(c, b, e, out); break;
    case MulAdd::kMinusProduct: MulAddLoop<C, MulAdd::kMinusProduct>(c, b, e, out); break;
    case MulAdd::kNone: break;
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
  if (c.in_type == ElementType::kF16 || c.in_type == ElementType::kBF16 || IsComplex(c.in_type)) {
    // Narrow floats round after every step, complex values are computed
    // apart: fold one element at a time.
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

// reduce_precision on the bits of a float with M mantissa and X exponent
// bits held in U: the mantissa rounded to m bits (nearest even), then
// values past the m/x format's range made inf and those below its smallest
// normal zero (signs kept); NaN as it is. As XLA on the type itself, so an
// f16 subnormal rounds as f16 bits do.
template <typename U, int M, int X>
void ReducePrecisionBits(const ElementwiseCall& c, int64_t b, int64_t e, void* out, int m, int x) {
  constexpr U kSign = U{1} << (M + X), kExpMask = ((U{1} << X) - 1) << M, kAbs = kSign - 1;
  const auto* in = static_cast<const uint8_t*>(c.in[0]);
  auto* o = static_cast<uint8_t*>(out);
  for (int64_t i = b; i < e; ++i) {
    U u;
    std::memcpy(&u, in + i * c.stride[0] * sizeof(U), sizeof(U));
    if ((u & kAbs) > kExpMask) {  // NaN
      std::memcpy(o + i * sizeof(U), &u, sizeof(U));
      continue;
    }
    if (m < M) {
      const int drop = M - m;
      const U lsb = (u >> drop) & U{1};
      u += ((U{1} << (drop - 1)) - 1) + lsb;
      u &= ~((U{1} << drop) - 1);
    }
    if (x < X) {
      const int64_t bias = (int64_t{1} << (x - 1)) - 1, type_bias = (int64_t{1} << (X - 1)) - 1;
      const int64_t exp = static_cast<int64_t>((u & kExpMask) >> M) - type_bias;
      if (exp > bias) u = (u & kSign) | kExpMask;
      else if (exp < 1 - bias) u &= kSign;
    }
    std::memcpy(o + i * sizeof(U), &u, sizeof(U));
  }
}

Status EvalReducePrecision(const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  const auto attrs = AttrsOf(*c.op);
  const auto* bits = std::get_if<ReducePrecisionAttrs>(&attrs->value);
  if (!bits) return InvalidArgumentError("stablehlo.reduce_precision: " + attrs->status.message());
  const int m = bits->mantissa_bits, x = bits->exponent_bits;
  switch (c.in_type) {
    case ElementType::kF16: ReducePrecisionBits<uint16_t, 10, 5>(c, b, e, out, m, x); return OkStatus();
    case ElementType::kBF16: ReducePrecisionBits<uint16_t, 7, 8>(c, b, e, out, m, x); return OkStatus();
    case ElementType::kF32: ReducePrecisionBits<uint32_t, 23, 8>(c, b, e, out, m, x); return OkStatus();
    case ElementType::kF64: ReducePrecisionBits<uint64_t, 52, 11>(c, b, e, out, m, x); return OkStatus();
    default: return InvalidArgumentError("stablehlo.reduce_precision takes f16, bf16, f32 or f64");
  }
}

}  // namespace

Status EvalElementwise(const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  const std::string& name = c.op->name;
  const OpEntry* entry = EntryOf(*c.op);
  if (!entry) return UnimplementedError(name + " is not an elementwise op");
  const ScalarFn fn = entry->scalar;
  if (IsComplexCall(c)) return EvalComplexElementwise(c, b, e, out);
  if (c.mul_add != MulAdd::kNone) {
    if (c.num_inputs != 3 || fn.kind != ScalarFn::Kind::kBinary || (fn.bin != Bin::kAdd && fn.bin != Bin::kSub))
      return InvalidArgumentError(name + " is not an add or subtract of a product");
    if (c.in_type == ElementType::kF32) MulAddLoop<float>(c, b, e, out);
    else if (c.in_type == ElementType::kF64) MulAddLoop<double>(c, b, e, out);
    else return InvalidArgumentError(name + ": a fused multiply-add of " + std::string(ElementTypeName(c.in_type)));
    return OkStatus();
  }
  switch (fn.kind) {
    case ScalarFn::Kind::kComplex:
    case ScalarFn::Kind::kReal:
    case ScalarFn::Kind::kImag: break;  // IsComplexCall
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

Status AddElements(ElementType t, const void* a, const void* b, int64_t n, void* out) {
  static const Op kAdd = [] {
    Op add;
    add.name = "stablehlo.add";
    add.entry = FindOp(add.name);
    return add;
  }();
  ElementwiseCall c;
  c.op = &kAdd;
  c.in_type = c.out_type = t;
  c.num_inputs = 2;
  c.in[0] = a;
  c.in[1] = b;
  return EvalElementwise(c, 0, n, out);
}

}  // namespace tpumesh::hlo
