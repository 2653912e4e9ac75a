// The special functions of the chlo dialect that have no C++ standard
// library counterpart (or none that is thread-safe): digamma, polygamma,
// Hurwitz zeta, lgamma, the exponentially scaled Bessel I1. In double; the
// interpreter rounds to the op's element type once. hlo/'s internal header.
//
// Contract: the values and the edge cases follow XLA's expansions (chlo
// decompositions) as JAX on a CPU returns them: digamma's poles (0, -1,
// -2, ...) give NaN; polygamma(n, x) is NaN unless n is a non-negative
// integer; zeta(s, q) is +inf at s = 1, NaN for s < 1, +inf at q a
// non-positive integer and NaN for other q <= 0; i1e is odd. Accuracy: a
// few ulps of double, far inside f32's rounding.
#ifndef TPUMESH_HLO_SPECIAL_FUNCTIONS_H_
#define TPUMESH_HLO_SPECIAL_FUNCTIONS_H_

namespace tpumesh::hlo {

double Digamma(double x);
double Polygamma(double n, double x);
double HurwitzZeta(double s, double q);
double Lgamma(double x);
double BesselI1e(double x);

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_SPECIAL_FUNCTIONS_H_
