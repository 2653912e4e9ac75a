// The interpreter's fft, triangular_solve and cholesky
// (hlo/interpreter_impl.h): the op's typed attributes (hlo/attrs.h, checked
// against its types when the module was read) handed to kernels/fft.h,
// kernels/triangular_solve.h and kernels/cholesky.h,
// on the device's threads.
#include "hlo/attrs.h"
#include "hlo/interpreter_impl.h"
#include "kernels/cholesky.h"
#include "kernels/fft.h"
#include "kernels/triangular_solve.h"

namespace tpumesh::hlo {

Status Interpreter::Fft(const Op& op, const Tensor& x, Tensor& out) {
  TPUMESH_ASSIGN_OR_RETURN(FftAttrs f, TypedAttrs<FftAttrs>(op));
  if (PartType(x.type.element) == ElementType::kF64)
    return kernels::FftF64(f.shape, x.as<double>(), out.mutable_as<double>(), o_.threads);
  return kernels::FftF32(f.shape, x.as<float>(), out.mutable_as<float>(), o_.threads);
}

Status Interpreter::TriangularSolve(const Op& op, const Tensor& a, const Tensor& b, Tensor& out) {
  TPUMESH_ASSIGN_OR_RETURN(TriangularSolveAttrs t, TypedAttrs<TriangularSolveAttrs>(op));
  switch (a.type.element) {
    case ElementType::kF32:
      return kernels::TriangularSolveF32(t.shape, a.as<float>(), b.as<float>(), out.mutable_as<float>(), o_.threads);
    case ElementType::kF64:
      return kernels::TriangularSolveF64(t.shape, a.as<double>(), b.as<double>(), out.mutable_as<double>(),
                                         o_.threads);
    case ElementType::kC64:
      return kernels::TriangularSolveC64(t.shape, a.as<float>(), b.as<float>(), out.mutable_as<float>(), o_.threads);
    case ElementType::kC128:
      return kernels::TriangularSolveC128(t.shape, a.as<double>(), b.as<double>(), out.mutable_as<double>(),
                                          o_.threads);
    default: return InvalidArgumentError("takes f32, f64, complex<f32> or complex<f64>");
  }
}

Status Interpreter::Cholesky(const Op& op, const Tensor& a, Tensor& out) {
  TPUMESH_ASSIGN_OR_RETURN(CholeskyAttrs c, TypedAttrs<CholeskyAttrs>(op));
  switch (a.type.element) {
    case ElementType::kF32: return kernels::CholeskyF32(c.shape, a.as<float>(), out.mutable_as<float>(), o_.threads);
    case ElementType::kF64: return kernels::CholeskyF64(c.shape, a.as<double>(), out.mutable_as<double>(), o_.threads);
    case ElementType::kC64: return kernels::CholeskyC64(c.shape, a.as<float>(), out.mutable_as<float>(), o_.threads);
    case ElementType::kC128:
      return kernels::CholeskyC128(c.shape, a.as<double>(), out.mutable_as<double>(), o_.threads);
    default: return InvalidArgumentError("takes f32, f64, complex<f32> or complex<f64>");
  }
}

}  // namespace tpumesh::hlo
