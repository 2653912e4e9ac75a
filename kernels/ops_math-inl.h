// Per-target vector helpers shared by the ops' Highway bodies: partial-vector
// loads and stores for row tails, and the f32 activation functions (erf,
// sigmoid, GELU in both forms, quick-GELU, SiLU) so that a fused op and the
// standalone activation compute bit-identical values.
//
// Contract: include after "hwy/highway.h" from a file that is itself
// re-included by foreach_target (the usual *-inl.h toggle guard below).
// LoadTail/StoreTail touch exactly n < Lanes(d) elements, never past the end
// (Highway 1.0.3's MaskedLoad reads a whole vector on SSE4). Accuracy, as
// bounded term by term and checked on every compiled target by
// tests/kernels/activation_test.cc: Erf within 3.4e-7 absolute (5.6 u, worst
// near |x| = 3.94; XLA/Eigen's f32 rational approximation, clamped to
// [-4, 4] where erf rounds to +-1 exactly); Sigmoid, SiLU and quick-GELU
// within a few ulp plus the rounding of their argument; both GELUs within
// 4 ulp plus an absolute floor of about 4 |x| u that the f32 formula
// 0.5x(1 + erf) has in PyTorch too (1 + erf cancels for x << 0).
#if defined(TPUMESH_KERNELS_OPS_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TPUMESH_KERNELS_OPS_MATH_INL_H_
#undef TPUMESH_KERNELS_OPS_MATH_INL_H_
#else
#define TPUMESH_KERNELS_OPS_MATH_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tpumesh::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Loads p[0, n) into the low lanes, `fill` in the others. n < Lanes(d).
template <class D>
HWY_INLINE hn::Vec<D> LoadTail(D d, const float* HWY_RESTRICT p, size_t n,
                               float fill) {
  HWY_ALIGN float buf[hn::MaxLanes(d)];
  for (size_t i = 0; i < hn::Lanes(d); ++i) buf[i] = fill;
  std::memcpy(buf, p, n * sizeof(float));
  return hn::Load(d, buf);
}

// Stores the low n lanes of v to p[0, n). n < Lanes(d).
template <class D>
HWY_INLINE void StoreTail(D d, hn::Vec<D> v, float* HWY_RESTRICT p, size_t n) {
  HWY_ALIGN float buf[hn::MaxLanes(d)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, n * sizeof(float));
}

// Sum of all lanes as a scalar.
template <class D>
HWY_INLINE float ReduceSum(D d, hn::Vec<D> v) {
  return hn::GetLane(hn::SumOfLanes(d, v));
}
template <class D>
HWY_INLINE float ReduceMax(D d, hn::Vec<D> v) {
  return hn::GetLane(hn::MaxOfLanes(d, v));
}

// Sums of long rows, accurate and cheap: f32 vector partial sums over chunks
// of kSumChunk elements (4 accumulators, to cover the FMA/add latency), each
// chunk's total added into a double. The f32 error stays that of a
// kSumChunk / (4 lanes) term sum, whatever the row length (a group-norm group
// of SD1.5 is 40960 elements). The order is fixed per target, so the result
// never depends on the thread count.
inline constexpr int64_t kSumChunk = 1024;

// Sum of f(x[i]) for i < n, f a per-lane functor on vectors.
template <class D, class F>
HWY_INLINE double SumChunked(D d, const float* HWY_RESTRICT x, int64_t n,
                             const F& f) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  double total = 0;
  for (int64_t c0 = 0; c0 < n; c0 += kSumChunk) {
    const int64_t c1 = c0 + kSumChunk < n ? c0 + kSumChunk : n;
    auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
    int64_t i = c0;
    for (; i + 4 * lanes <= c1; i += 4 * lanes) {
      a0 = hn::Add(a0, f(hn::LoadU(d, x + i)));
      a1 = hn::Add(a1, f(hn::LoadU(d, x + i + lanes)));
      a2 = hn::Add(a2, f(hn::LoadU(d, x + i + 2 * lanes)));
      a3 = hn::Add(a3, f(hn::LoadU(d, x + i + 3 * lanes)));
    }
    for (; i + lanes <= c1; i += lanes)
      a0 = hn::Add(a0, f(hn::LoadU(d, x + i)));
    if (i < c1) {
      // Lanes past the row end are masked out, whatever f makes of the fill.
      const auto v = f(LoadTail(d, x + i, static_cast<size_t>(c1 - i), 0.0f));
      a1 = hn::Add(a1, hn::IfThenElseZero(
                           hn::FirstN(d, static_cast<size_t>(c1 - i)), v));
    }
    total += ReduceSum(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)));
  }
  return total;
}

// e^x for x <= 0 (a softmax's x - max), in about 18 vector operations and
// no float/int conversions (Highway's Exp takes ~25 with two): n = x / ln 2
// rounded by the 1.5 * 2^23 shifter, r = x - n ln 2 in two FMAs (Cody-Waite,
// Highway's split of ln 2), e^r by Highway's degree-7 polynomial for
// |r| <= ln 2 / 2, and 2^n added into the exponent bits. x < -86 (e^x <
// 4.5e-38, next to f32's smallest normal) and -inf give 0; x > 0 and NaN
// are outside the contract. Within 1 ulp of e^x on [-86, 0] (0.92 seen)
// (tests/kernels/ops_math_test.cc).
template <class D>
HWY_INLINE hn::Vec<D> ExpNonPositive(D d, hn::Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const auto kShifter = hn::Set(d, 12582912.0f);  // 1.5 * 2^23
  const auto kLowest = hn::Set(d, -86.0f);
  const auto xc = hn::Max(x, kLowest);
  const auto t = hn::MulAdd(xc, hn::Set(d, 1.44269504088896341f), kShifter);
  const auto n = hn::Sub(t, kShifter);  // round(x / ln 2), exact
  auto r = hn::MulAdd(n, hn::Set(d, -0.693145751953125f), xc);
  r = hn::MulAdd(n, hn::Set(d, -1.428606765330187045e-6f), r);
  auto p = hn::Set(d, 0.000198527617612853646278381f);
  p = hn::MulAdd(p, r, hn::Set(d, 0.00139304355252534151077271f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.00833336077630519866943359f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.0416664853692054748535156f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.166666671633720397949219f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.5f));
  const auto er = hn::Add(hn::MulAdd(p, hn::Mul(r, r), r), hn::Set(d, 1.0f));
  // t's low mantissa bits hold n (|n| <= 125 < 2^22): its bits minus the
  // shifter's are n as an integer.
  const auto ni = hn::Sub(hn::BitCast(di, t), hn::BitCast(di, kShifter));
  const auto y = hn::BitCast(d, hn::Add(hn::BitCast(di, er), hn::ShiftLeft<23>(ni)));
  return hn::IfThenZeroElse(hn::Lt(x, kLowest), y);
}

// 2^y for y <= 0, to 2.7e-6 relative (about 22 f32 ulp), for values that
// are rounded to bf16 next (2^-9 relative): in 9 vector operations. n =
// round(y) by the 1.5 * 2^23 shifter, f = y - n exact in [-1/2, 1/2], 2^f by
// a degree-4 minimax polynomial (fitted here for relative error), 2^n added
// into the exponent bits. y < -126 (and -inf) gives a value in [0, 2^-126];
// a y just above 0 (a rounding's worth) is as good; NaN is outside the
// contract (tests/kernels/ops_math_test.cc).
template <class D>
HWY_INLINE hn::Vec<D> Exp2NonPositiveCoarse(D d, hn::Vec<D> y) {
  const hn::RebindToSigned<D> di;
  const auto kShifter = hn::Set(d, 12582912.0f);  // 1.5 * 2^23
  const auto yc = hn::Max(y, hn::Set(d, -126.0f));
  const auto t = hn::Add(yc, kShifter);
  const auto f = hn::Sub(yc, hn::Sub(t, kShifter));
  auto p = hn::Set(d, 0.009570102207362652f);
  p = hn::MulAdd(p, f, hn::Set(d, 0.05591786280274391f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.240247443318367f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.6931217908859253f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.9999992847442627f));
  const auto ni = hn::Sub(hn::BitCast(di, t), hn::BitCast(di, kShifter));
  return hn::BitCast(d, hn::Add(hn::BitCast(di, p), hn::ShiftLeft<23>(ni)));
}

// erf(x), XLA/Eigen's f32 rational approximation x * P(x^2) / Q(x^2) on
// [-4, 4] (what jax.lax.erf and torch's vectorised GELU compute to within an
// ulp); outside it erf rounds to +-1 in f32.
template <class D>
HWY_INLINE hn::Vec<D> Erf(D d, hn::Vec<D> x) {
  x = hn::Clamp(x, hn::Set(d, -4.0f), hn::Set(d, 4.0f));
  const auto x2 = hn::Mul(x, x);
  auto p = hn::Set(d, -2.72614225801306e-10f);
  p = hn::MulAdd(p, x2, hn::Set(d, 2.77068142495902e-08f));
  p = hn::MulAdd(p, x2, hn::Set(d, -2.10102402082508e-06f));
  p = hn::MulAdd(p, x2, hn::Set(d, -5.69250639462346e-05f));
  p = hn::MulAdd(p, x2, hn::Set(d, -7.34990630326855e-04f));
  p = hn::MulAdd(p, x2, hn::Set(d, -2.95459980854025e-03f));
  p = hn::MulAdd(p, x2, hn::Set(d, -1.60960333262415e-02f));
  auto q = hn::Set(d, -1.45660718464996e-05f);
  q = hn::MulAdd(q, x2, hn::Set(d, -2.13374055278905e-04f));
  q = hn::MulAdd(q, x2, hn::Set(d, -1.68282697438203e-03f));
  q = hn::MulAdd(q, x2, hn::Set(d, -7.37332916720468e-03f));
  q = hn::MulAdd(q, x2, hn::Set(d, -1.42647390514189e-02f));
  return hn::Div(hn::Mul(x, p), q);
}

// 1 / (1 + exp(-x)) without overflow: e = exp(-|x|) <= 1, then 1/(1+e) for
// x >= 0 and e/(1+e) for x < 0. (Highway's Exp is only valid up to +104 and
// returns garbage beyond, so exp(-x) itself must never be formed.)
template <class D>
HWY_INLINE hn::Vec<D> Sigmoid(D d, hn::Vec<D> x) {
  const auto one = hn::Set(d, 1.0f);
  const auto e = hn::Exp(d, hn::Neg(hn::Abs(x)));
  const auto num = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), e, one);
  return hn::Div(num, hn::Add(one, e));
}

// x * sigmoid(x).
template <class D>
HWY_INLINE hn::Vec<D> Silu(D d, hn::Vec<D> x) {
  return hn::Mul(x, Sigmoid(d, x));
}

// x * sigmoid(1.702 x) (CLIP's quick_gelu).
template <class D>
HWY_INLINE hn::Vec<D> QuickGelu(D d, hn::Vec<D> x) {
  return hn::Mul(x, Sigmoid(d, hn::Mul(x, hn::Set(d, 1.702f))));
}

// 0.5 x (1 + erf(x / sqrt(2))), PyTorch's F.gelu(approximate="none").
template <class D>
HWY_INLINE hn::Vec<D> GeluErf(D d, hn::Vec<D> x) {
  const auto half_x = hn::Mul(x, hn::Set(d, 0.5f));
  const auto e = Erf(d, hn::Mul(x, hn::Set(d, 0.70710678118654752f)));
  return hn::MulAdd(half_x, e, half_x);
}

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), F.gelu(approximate="tanh").
template <class D>
HWY_INLINE hn::Vec<D> GeluTanh(D d, hn::Vec<D> x) {
  const auto x3 = hn::Mul(hn::Mul(x, x), x);
  const auto inner = hn::Mul(hn::Set(d, 0.79788456080286536f),
                             hn::MulAdd(x3, hn::Set(d, 0.044715f), x));
  const auto half_x = hn::Mul(x, hn::Set(d, 0.5f));
  return hn::MulAdd(half_x, hn::Tanh(d, inner), half_x);
}

}  // namespace HWY_NAMESPACE
}  // namespace tpumesh::kernels
HWY_AFTER_NAMESPACE();

#endif  // TPUMESH_KERNELS_OPS_MATH_INL_H_ toggle
