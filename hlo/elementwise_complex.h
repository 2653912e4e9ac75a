// The elementwise ops on complex<f32> and complex<f64> (hlo/elementwise.h's
// EvalElementwise hands them here): hlo/'s internal header.
//
// Contract: out[i] = op(in_0[i * stride_0], ...) as XLA's elemental IR
// emitter computes it, in the part type (f32 for complex<f32>, so the
// rounding of each step is XLA's):
// - stablehlo.complex(x, y) = (x, y); real / imag take a part (of a real
//   operand: itself / 0);
// - add, subtract, negate: per part; multiply: (ac - bd, ad + bc), no inf
//   recovery; divide: Smith's algorithm, then XLA's fix-ups where the
//   quotient is (NaN, NaN): a zero divisor gives (inf with b_r's sign) times
//   the dividend, an infinite dividend over a finite divisor inf times the
//   signed unit directions, a finite dividend over an infinite divisor 0
//   times them;
// - abs: max * sqrt(1 + (min / max)^2) of the parts' magnitudes (never
//   overflows where the result fits), min where that is NaN (0, inf, NaN
//   parts); the result is the part type;
// - exp: e^re (cos im, sin im); log: (log abs, atan2(im, re)); sqrt:
//   sqrt(abs) (cos t/2, sin t/2), t = atan2(im, re), with XLA's infinite and
//   zero cases (sqrt(abs) as sqrt(max) (1 + (min/max)^2)^(1/4): no
//   overflow where abs itself would); sign: z / abs(z), 0 at 0;
// - log1p: (log1p(x (2 + x) + y^2) / 2, atan2(y, 1 + x)), log|1 + z| where
//   the sum would overflow;
// - rsqrt: 1 / sqrt; expm1: (expm1(x) cos y - 2 sin^2(y/2), e^x sin y; 0 for
//   y = 0); tan and tanh: the C library's (std::tan, std::tanh of
//   std::complex), tan of an infinite real part and finite imaginary part
//   (NaN, NaN); power:
//   |a|^c e^(-d arg a) (cos q, sin q), q = c arg a + d log|a| (XLA's
//   formula), 0^0 = 1, 0^b = 0 for re b > 0;
// - compare EQ / NE: both parts equal / either differs (other directions
//   are refused);
// - convert: real -> complex (value, 0), complex -> complex per part,
//   complex -> real the real part (each through stablehlo.convert's scalar
//   rules).
// Any other op on complex elements is InvalidArgument naming it. Pure; no
// allocation.
#ifndef TPUMESH_HLO_ELEMENTWISE_COMPLEX_H_
#define TPUMESH_HLO_ELEMENTWISE_COMPLEX_H_

#include <cstdint>

#include "base/status.h"
#include "hlo/elementwise.h"

namespace tpumesh::hlo {

// Whether the call is one EvalComplexElementwise computes: a complex
// operand or result, or stablehlo.complex / real / imag.
bool IsComplexCall(const ElementwiseCall& call);

// Elements [begin, end) of the call's output.
Status EvalComplexElementwise(const ElementwiseCall& call, int64_t begin, int64_t end, void* out);

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_ELEMENTWISE_COMPLEX_H_
