#include "hlo/special_functions.h"

#include <cmath>
#include <limits>
#include <numbers>

namespace tpumesh::hlo {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

double Digamma(double x) {
  if (std::isnan(x) || x == -kInf) return kNaN;
  if (x == kInf) return kInf;
  if (x <= 0 && x == std::floor(x)) return kNaN;  // the poles
  if (x < 0) {
    // Reflection: psi(x) = psi(1 - x) - pi / tan(pi x).
    return Digamma(1 - x) - std::numbers::pi / std::tan(std::numbers::pi * x);
  }
  // Recurrence up to x >= 10, then the asymptotic series in 1/x^2.
  double acc = 0;
  while (x < 10) {
    acc -= 1 / x;
    x += 1;
  }
  const double f = 1 / (x * x);
  const double series =
      f * (-1.0 / 12 + f * (1.0 / 120 + f * (-1.0 / 252 + f * (1.0 / 240 + f * (-1.0 / 132 + f * (691.0 / 32760))))));
  return acc + std::log(x) - 0.5 / x + series;
}

double HurwitzZeta(double s, double q) {
  if (std::isnan(s) || std::isnan(q)) return kNaN;
  if (s == 1) return kInf;
  if (s < 1) return kNaN;
  if (q <= 0) {
    if (q == std::floor(q)) return kInf;
    return kNaN;
  }
  // Euler-Maclaurin: the first terms summed, the tail as an integral plus
  // Bernoulli corrections B_2k / (2k)! * s (s+1) ... (s+2k-2) / a^(s+2k-1).
  double sum = std::pow(q, -s);
  double a = q;
  double term = 0;
  for (int i = 0; i < 9 || a <= 9; ++i) {
    a += 1;
    term = std::pow(a, -s);
    sum += term;
    if (std::fabs(term / sum) < 1e-17) return sum;
  }
  sum += term * a / (s - 1) - 0.5 * term;
  // (2k)! / B_2k for k = 1..12
  static constexpr double kFactorialOverBernoulli[] = {
      12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
      -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15, 1.8152105401943546773e17,
      -7.1661652561756670113e18};
  double rising = 1, k = 0;
  for (double c : kFactorialOverBernoulli) {
    rising *= s + k;
    term /= a;
    const double t = rising * term / c;
    sum += t;
    if (std::fabs(t / sum) < 1e-17) break;
    k += 1;
    rising *= s + k;
    term /= a;
    k += 1;
  }
  return sum;
}

double Polygamma(double n, double x) {
  if (std::isnan(n) || std::isnan(x) || n < 0 || n != std::floor(n)) return kNaN;
  if (n == 0) return Digamma(x);
  // psi^(n)(x) = (-1)^(n+1) n! zeta(n+1, x)
  const double sign = std::fmod(n, 2) == 1 ? 1 : -1;
  return sign * std::tgamma(n + 1) * HurwitzZeta(n + 1, x);
}

double Lgamma(double x) {
  int sign = 0;
  return lgamma_r(x, &sign);  // the reentrant one: lgamma writes the global signgam
}

double BesselI1e(double x) {
  if (std::isnan(x)) return x;
  const double ax = std::fabs(x);
  double r;
  if (ax <= 700) {
    r = std::cyl_bessel_i(1.0, ax) * std::exp(-ax);
  } else {
    // e^-x I1(x) ~ (1 - 3/(8x) - 15/(128x^2) - 315/(3072x^3)) / sqrt(2 pi x)
    const double t = 1 / (8 * ax);
    r = (1 - 3 * t - 7.5 * t * t - 52.5 * t * t * t) / std::sqrt(2 * std::numbers::pi * ax);
  }
  return x < 0 ? -r : r;
}

}  // namespace tpumesh::hlo
