// The elementwise ops of StableHLO (and chlo.erf_inv) over raw element
// buffers, one function for vectors and for the scalars of a reduce body:
// hlo/'s internal header.
//
// Contract: EvalElementwise computes out[i] = op(in_0[i * stride_0], ...)
// for i in [0, n) (a stride of 0 broadcasts a scalar operand), in the
// compute type of the element type (f32 for f16/bf16, rounded once on
// store); complex operands and results (and stablehlo.complex, real, imag)
// are computed by hlo/elementwise_complex.h. It returns InvalidArgument for
// an element type the op does not take. Pure; no allocation.
#ifndef TPUMESH_HLO_ELEMENTWISE_H_
#define TPUMESH_HLO_ELEMENTWISE_H_

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "hlo/module.h"

namespace tpumesh::hlo {

// Which XLA's math to reproduce bit for bit where the generations differ
// (XLA:CPU's f32 log1p, hence chlo.erf_inv, and rsqrt): the XLA of jax 0.4.x, or
// of the current jax (a module that writes sdy ops is from it).
enum class XlaGeneration { kJax04, kCurrent };

// An add or subtract evaluated with its unrounded multiply operand as one
// fused multiply-add, rounded once (hlo/contraction.h): in_0 * in_1 is the
// product, in_2 the other operand.
enum class MulAdd : uint8_t {
  kNone,
  kAdd,           // a*b + c, c + a*b: fma(a, b, c)
  kProductMinus,  // a*b - c: fma(a, b, -c)
  kMinusProduct,  // c - a*b: fma(-a, b, c)
};

struct ElementwiseCall {
  XlaGeneration generation = XlaGeneration::kJax04;
  const Op* op = nullptr;  // its entry's scalar function (hlo/ops.h); attributes (compare's direction, ...)
  ElementType in_type = ElementType::kF32;   // of operand 0 (select: operand 1)
  ElementType out_type = ElementType::kF32;
  int num_inputs = 0;
  const void* in[3] = {nullptr, nullptr, nullptr};
  int64_t stride[3] = {1, 1, 1};  // in elements; 0 broadcasts
  // Set: op is the add or subtract, of f32 or f64, and this form is computed.
  MulAdd mul_add = MulAdd::kNone;
};

// Elements [begin, end) of the call's output.
Status EvalElementwise(const ElementwiseCall& call, int64_t begin, int64_t end, void* out);

// out[i] = a[i] + b[i] for i in [0, n), as stablehlo.add of element type t
// (out may be a or b): the sum of partial values (an all_reduce's, an
// unreduced array's pieces).
Status AddElements(ElementType t, const void* a, const void* b, int64_t n, void* out);

// out[i] = stablehlo.convert(in[i]) for i in [begin, end): `in` of element
// type `from`, `out` of `to`.
Status ConvertElements(ElementType from, const void* in, ElementType to, int64_t begin, int64_t end, void* out);

// A reduction along rows: for each row o in [row_begin, row_end),
// acc[o] = op(... op(op(acc[o], x[o*len]), x[o*len + 1]) ..., x[o*len + len-1]),
// in that order (the bits of folding one element at a time), where op is the
// binary elementwise op call.op names, of element type call.in_type. Rows
// are contiguous in x; acc holds one element per row.
Status FoldRows(const ElementwiseCall& call, const void* x, int64_t len, int64_t row_begin, int64_t row_end,
                void* acc);

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_ELEMENTWISE_H_
