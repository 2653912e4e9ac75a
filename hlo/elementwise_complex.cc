#include "hlo/elementwise_complex.h"

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <string>

#include "hlo/attrs.h"
#include "hlo/ops.h"
#include "hlo/xla_cpu_math.h"

namespace tpumesh::hlo {
namespace {

template <typename T>
struct Cx {
  T re, im;
};

template <typename T>
Cx<T> LoadCx(const void* p, int64_t i) {
  const T* q = static_cast<const T*>(p) + 2 * i;
  return {q[0], q[1]};
}
template <typename T>
void StoreCx(void* p, int64_t i, Cx<T> v) {
  T* q = static_cast<T*>(p) + 2 * i;
  q[0] = v.re;
  q[1] = v.im;
}

// NaN-propagating max and min, as XLA's EmitFloatMax / EmitFloatMin.
template <typename T>
T MaxNan(T a, T b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : (a > b ? a : b);
}
template <typename T>
T MinNan(T a, T b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : (a < b ? a : b);
}

// |z| and sqrt(|z|) as XLA computes them from the parts' magnitudes
// min <= max: max * sqrt(1 + (min/max)^2) and sqrt(max) * (1 +
// (min/max)^2)^(1/4), neither overflowing where the result fits; min where
// that is NaN ((0, 0), (inf, inf), a NaN part).
template <typename T>
T AbsOrSqrtAbs(Cx<T> z, bool sqrt_of_abs) {
  const T ar = std::fabs(z.re), ai = std::fabs(z.im);
  const T mx = MaxNan(ar, ai), mn = MinNan(ar, ai);
  const T d = mn / mx;
  const T one_p_d2 = T(1) + d * d;
  const T r = sqrt_of_abs ? std::sqrt(mx) * std::pow(one_p_d2, T(0.25)) : mx * std::sqrt(one_p_d2);
  return std::isnan(r) ? mn : r;
}
template <typename T>
T Abs(Cx<T> z) {
  return AbsOrSqrtAbs(z, false);
}

template <typename T>
Cx<T> Mul(Cx<T> a, Cx<T> b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

template <typename T>
Cx<T> Div(Cx<T> a, Cx<T> b) {
  const T inf = std::numeric_limits<T>::infinity();
  const T br_abs = std::fabs(b.re), bi_abs = std::fabs(b.im);
  // Smith's algorithm: divide by the larger part of b.
  Cx<T> c;
  if (br_abs < bi_abs) {
    const T ratio = b.re / b.im, denom = b.im + ratio * b.re;
    c = {(ratio * a.re + a.im) / denom, (ratio * a.im - a.re) / denom};
  } else {
    const T ratio = b.im / b.re, denom = b.re + ratio * b.im;
    c = {(ratio * a.im + a.re) / denom, (a.im - ratio * a.re) / denom};
  }
  if (!(std::isnan(c.re) && std::isnan(c.im))) return c;
  const T ar_abs = std::fabs(a.re), ai_abs = std::fabs(a.im);
  if (br_abs == 0 && bi_abs == 0 && !(std::isnan(a.re) && std::isnan(a.im))) {
    const T s = std::copysign(inf, b.re);
    return {s * a.re, s * a.im};
  }
  const bool a_inf = ar_abs == inf || ai_abs == inf, b_finite = br_abs != inf && bi_abs != inf;
  if (a_inf && b_finite && !std::isnan(b.re) && !std::isnan(b.im)) {
    const T ur = std::copysign(ar_abs == inf ? T(1) : T(0), a.re);
    const T ui = std::copysign(ai_abs == inf ? T(1) : T(0), a.im);
    return {inf * (ur * b.re + ui * b.im), inf * (ui * b.re - ur * b.im)};
  }
  const bool b_inf = br_abs == inf || bi_abs == inf;
  const bool a_finite = ar_abs != inf && ai_abs != inf && !std::isnan(a.re) && !std::isnan(a.im);
  if (b_inf && a_finite) {
    const T ur = std::copysign(br_abs == inf ? T(1) : T(0), b.re);
    const T ui = std::copysign(bi_abs == inf ? T(1) : T(0), b.im);
    return {T(0) * (a.re * ur + a.im * ui), T(0) * (a.im * ur - a.re * ui)};
  }
  return c;
}

template <typename T>
Cx<T> Sqrt(Cx<T> z) {
  const T inf = std::numeric_limits<T>::infinity();
  const T r = AbsOrSqrtAbs(z, true);
  const T t = std::atan2(z.im, z.re) * T(0.5);
  const T cs = std::cos(t), sn = std::sin(t);
  if (r == 0) return {0, 0};
  const T bi_abs = std::fabs(z.im);
  const T re = (bi_abs == inf || z.re == inf) ? inf : (z.re == -inf && bi_abs != inf) ? T(0) : r * cs;
  const T im = (bi_abs == inf || z.re == -inf) ? std::copysign(inf, z.im)
               : std::isnan(r)                 ? std::numeric_limits<T>::quiet_NaN()
               : sn == 0                       ? sn
                                               : r * sn;
  return {re, im};
}

template <typename T>
Cx<T> FromStd(std::complex<T> z) {
  return {z.real(), z.imag()};
}

// a^b = exp(b log a) written out as XLA's elemental emitter does:
// |a|^c e^(-d arg a) (cos q, sin q), q = c arg a + d log|a|; 0^b is 1 for
// b = 0, 0 for re b > 0 (NaN otherwise).
template <typename T>
Cx<T> Pow(Cx<T> a, Cx<T> b) {
  if (a.re == 0 && a.im == 0) {
    if (b.re == 0 && b.im == 0) return {1, 0};
    if (b.re > 0) return {0, 0};
    const T nan = std::numeric_limits<T>::quiet_NaN();
    return {nan, nan};
  }
  const T r = Abs(a), theta = std::atan2(a.im, a.re);
  const T log_r = std::log(r);
  const T mag = std::exp(b.re * log_r - b.im * theta);
  const T q = b.re * theta + b.im * log_r;
  return {mag * std::cos(q), mag * std::sin(q)};
}

template <typename T>
StatusOr<Cx<T>> Unary(Un k, Cx<T> z) {
  switch (k) {
    case Un::kNeg: return Cx<T>{-z.re, -z.im};
    case Un::kExp: {
      const T e = XlaCpuExp(z.re);
      return Cx<T>{e * std::cos(z.im), e * std::sin(z.im)};
    }
    case Un::kLog: return Cx<T>{XlaCpuLog(Abs(z)), std::atan2(z.im, z.re)};
    case Un::kSqrt: return Sqrt(z);
    case Un::kSign: {
      const T a = Abs(z);
      if (a == 0) return Cx<T>{0, 0};
      return Cx<T>{z.re / a, z.im / a};
    }
    case Un::kSquare: return Mul(z, z);
    case Un::kRsqrt: return Div(Cx<T>{1, 0}, Sqrt(z));
    case Un::kLog1p: {
      // log|1 + z| as log1p(x (2 + x) + y^2) / 2 (no cancellation near 0),
      // as log|1 + z| where that sum would overflow; arg(1 + z)
      const T big = std::sqrt(std::numeric_limits<T>::max()) / T(4);
      const T re = std::fabs(z.re) < big && std::fabs(z.im) < big
                       ? T(0.5) * std::log1p(z.re * (T(2) + z.re) + z.im * z.im)
                       : std::log(Abs(Cx<T>{T(1) + z.re, z.im}));
      return Cx<T>{re, std::atan2(z.im, T(1) + z.re)};
    }
    case Un::kExpm1: {
      // e^x cos y - 1 = expm1(x) cos y - 2 sin^2(y/2): no cancellation near 0
      // (the imaginary part of a real argument stays 0, not inf * 0)
      const T h = std::sin(z.im * T(0.5));
      return Cx<T>{std::expm1(z.re) * std::cos(z.im) - T(2) * h * h,
                   z.im == 0 ? z.im : std::exp(z.re) * std::sin(z.im)};
    }
    case Un::kTan: {
      if (std::isinf(z.re) && std::isfinite(z.im)) {  // no value: NaN in both parts, as XLA
        const T nan = std::numeric_limits<T>::quiet_NaN();
        return Cx<T>{nan, nan};
      }
      return FromStd(std::tan(std::complex<T>(z.re, z.im)));
    }
    case Un::kTanh: return FromStd(std::tanh(std::complex<T>(z.re, z.im)));
    default: return InvalidArgumentError("");
  }
}

template <typename T>
StatusOr<Cx<T>> Binary(Bin k, Cx<T> a, Cx<T> b) {
  switch (k) {
    case Bin::kAdd: return Cx<T>{a.re + b.re, a.im + b.im};
    case Bin::kSub: return Cx<T>{a.re - b.re, a.im - b.im};
    case Bin::kMul: return Mul(a, b);
    case Bin::kDiv: return Div(a, b);
    case Bin::kPow: return Pow(a, b);
    default: return InvalidArgumentError("");
  }
}

Status Refuse(const ElementwiseCall& c) {
  return InvalidArgumentError(c.op->name + " does not take " + std::string(ElementTypeName(c.in_type)) +
                              (c.out_type != c.in_type ? " to " + std::string(ElementTypeName(c.out_type)) : ""));
}

// One element of the converts: `from` at p -> `to` at q (through
// stablehlo.convert's scalar rules for a real type at either end).
// p and q may be the same bytes (the result written over its dying operand,
// a complex -> complex convert of one type): the value is made apart first.
Status ConvertOne(ElementType from, const uint8_t* p, ElementType to, uint8_t* q) {
  const ElementType pf = PartType(from), pt = PartType(to);
  const int wt = ElementTypeBytes(pt);
  uint8_t value[16] = {};  // at most complex<f64>
  TPUMESH_RETURN_IF_ERROR(ConvertElements(pf, p, pt, 0, 1, value));
  if (IsComplex(from) && IsComplex(to))
    TPUMESH_RETURN_IF_ERROR(ConvertElements(pf, p + ElementTypeBytes(pf), pt, 0, 1, value + wt));
  std::memcpy(q, value, static_cast<size_t>(IsComplex(to) ? 2 * wt : wt));
  return OkStatus();
}

template <typename T>
Status Eval(const ScalarFn& fn, const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  using K = ScalarFn::Kind;
  const int64_t s0 = c.stride[0], s1 = c.stride[1];
  const bool cx_in = IsComplex(c.in_type);
  switch (fn.kind) {
    case K::kComplex: {
      if (IsComplex(c.in_type)) return Refuse(c);
      const T* x = static_cast<const T*>(c.in[0]);
      const T* y = static_cast<const T*>(c.in[1]);
      for (int64_t i = b; i < e; ++i) StoreCx<T>(out, i, {x[i * s0], y[i * s1]});
      return OkStatus();
    }
    case K::kReal:
    case K::kImag: {
      T* o = static_cast<T*>(out);
      const int part = fn.kind == K::kReal ? 0 : 1;
      const T* x = static_cast<const T*>(c.in[0]);
      for (int64_t i = b; i < e; ++i) o[i] = cx_in ? x[2 * i * s0 + part] : (part ? T(0) : x[i * s0]);
      return OkStatus();
    }
    case K::kUnary: {
      if (!cx_in) return Refuse(c);
      if (fn.un == Un::kAbs) {
        T* o = static_cast<T*>(out);
        for (int64_t i = b; i < e; ++i) o[i] = Abs(LoadCx<T>(c.in[0], i * s0));
        return OkStatus();
      }
      if (fn.un == Un::kIsFinite) return Refuse(c);
      for (int64_t i = b; i < e; ++i) {
        auto v = Unary(fn.un, LoadCx<T>(c.in[0], i * s0));
        if (!v.ok()) return Refuse(c);
        StoreCx<T>(out, i, *v);
      }
      return OkStatus();
    }
    case K::kBinary:
      for (int64_t i = b; i < e; ++i) {
        auto v = Binary(fn.bin, LoadCx<T>(c.in[0], i * s0), LoadCx<T>(c.in[1], i * s1));
        if (!v.ok()) return Refuse(c);
        StoreCx<T>(out, i, *v);
      }
      return OkStatus();
    case K::kCompare: {
      const auto attrs = AttrsOf(*c.op);
      const auto* cmp = std::get_if<CompareAttrs>(&attrs->value);
      if (!cmp) return InvalidArgumentError("stablehlo.compare: " + attrs->status.message());
      if (cmp->direction != CompareDirection::kEq && cmp->direction != CompareDirection::kNe)
        return InvalidArgumentError("stablehlo.compare: complex values compare EQ or NE only");
      const bool eq = cmp->direction == CompareDirection::kEq;
      bool* o = static_cast<bool*>(out);
      for (int64_t i = b; i < e; ++i) {
        const Cx<T> x = LoadCx<T>(c.in[0], i * s0), y = LoadCx<T>(c.in[1], i * s1);
        o[i] = (x.re == y.re && x.im == y.im) == eq;
      }
      return OkStatus();
    }
    default: return Refuse(c);
  }
}

}  // namespace

bool IsComplexCall(const ElementwiseCall& c) {
  const OpEntry* entry = EntryOf(*c.op);
  if (!entry) return false;
  using K = ScalarFn::Kind;
  const K k = entry->scalar.kind;
  if (k == K::kComplex || k == K::kReal || k == K::kImag) return true;
  if (k == K::kSelect) return false;  // moves whole elements of any width
  return IsComplex(c.in_type) || IsComplex(c.out_type);
}

Status EvalComplexElementwise(const ElementwiseCall& c, int64_t b, int64_t e, void* out) {
  const OpEntry* entry = EntryOf(*c.op);
  if (!entry) return UnimplementedError(c.op->name + " is not an elementwise op");
  const ScalarFn fn = entry->scalar;
  if (fn.kind == ScalarFn::Kind::kConvert) {
    const int wi = ElementTypeBytes(c.in_type), wo = ElementTypeBytes(c.out_type);
    const auto* p = static_cast<const uint8_t*>(c.in[0]);
    auto* q = static_cast<uint8_t*>(out);
    for (int64_t i = b; i < e; ++i) TPUMESH_RETURN_IF_ERROR(ConvertOne(c.in_type, p + i * c.stride[0] * wi, c.out_type, q + i * wo));
    return OkStatus();
  }
  // The part type decides the arithmetic: the operand's, or the result's
  // for stablehlo.complex.
  const ElementType part = PartType(fn.kind == ScalarFn::Kind::kComplex ? c.out_type : c.in_type);
  if (part == ElementType::kF32) return Eval<float>(fn, c, b, e, out);
  if (part == ElementType::kF64) return Eval<double>(fn, c, b, e, out);
  return Refuse(c);
}

}  // namespace tpumesh::hlo
