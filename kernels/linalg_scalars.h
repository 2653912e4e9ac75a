// The scalars of the double-precision linalg kernels (kernels/cholesky.cc,
// kernels/triangular_solve.cc): S is the stored scalar (float or double), C
// the compute type (double, or std::complex<double> for complex storage,
// which is interleaved (re, im) pairs). Load and Store convert one element
// at index i; Conj is the identity on reals. kernels/'s internal header.
#ifndef TPUMESH_KERNELS_LINALG_SCALARS_H_
#define TPUMESH_KERNELS_LINALG_SCALARS_H_

#include <complex>
#include <cstdint>
#include <type_traits>

namespace tpumesh::kernels::linalg {

inline double Conj(double v) { return v; }
inline std::complex<double> Conj(std::complex<double> v) { return std::conj(v); }

template <typename S, typename C>
C Load(const S* p, int64_t i) {
  if constexpr (std::is_same_v<C, double>) {
    return static_cast<double>(p[i]);
  } else {
    return C(static_cast<double>(p[2 * i]), static_cast<double>(p[2 * i + 1]));
  }
}

template <typename S, typename C>
void Store(S* p, int64_t i, C v) {
  if constexpr (std::is_same_v<C, double>) {
    p[i] = static_cast<S>(v);
  } else {
    p[2 * i] = static_cast<S>(v.real());
    p[2 * i + 1] = static_cast<S>(v.imag());
  }
}

}  // namespace tpumesh::kernels::linalg

#endif  // TPUMESH_KERNELS_LINALG_SCALARS_H_
