// Which products XLA:CPU never rounds: hlo/'s internal header.
//
// Two XLA:CPU rewrites change f32 and f64 bits against an op-by-op
// evaluation (measured in scripts/stablehlo/README.md; the rules in
// docs/stablehlo.md, "Numerics"):
// - fp-contract=fast (LLVM's DAG combiner, x86 not "aggressive"): an add or
//   subtract with a multiply operand whose one use it is, in the same
//   kernel, is one fused multiply-add, rounded once: a*b + c and c + a*b ->
//   fma(a, b, c); a*b - c -> fma(a, b, -c); c - a*b -> fma(-a, b, c); with
//   both operands such products, the left one.
// - the algebraic simplifier: (y * C1) * C2, C1 and C2 splat constants
//   (or broadcasts of scalar ones) and y not a constant, is y * (C1 * C2);
//   here only where y * C1 has no other use (XLA folds regardless).
// XLA inlines every call first, so "the same kernel" is the same block once
// each private function is seen in its callers: a value flows from a
// func.return to each call's result and from a call's operand to the
// callee's argument. A product returned by a function called from several
// places is marked when every copy's consumer takes it (XLA decides per
// inlined copy; tpumesh rounds them all otherwise). Blocks are function bodies and the
// regions of control ops (a while body is a kernel of its own); the bodies
// of reduce, sort, scatter, ... are not looked into. f16 and bf16 are not
// contracted (XLA computes them in f32 with a rounding after each op).
//
// Contract: PlanProducts reads the module only; about linear in its size
// (calls followed 64 deep, 256 inlined copies of a value at most). A value
// marked other than kRounded is a stablehlo.multiply's result with exactly
// one use in each inlined copy, and every such use is a consumer of the
// kind named.
#ifndef TPUMESH_HLO_CONTRACTION_H_
#define TPUMESH_HLO_CONTRACTION_H_

#include <cstdint>
#include <vector>

#include "hlo/module.h"

namespace tpumesh::hlo {

enum class Product : uint8_t {
  kRounded,      // every other value: as computed
  kFused,        // its consumer, an add or subtract, takes it as an fma
  kFoldedLhs,    // a product of a scalar constant (operand 0) whose consumer,
  kFoldedRhs,    // a multiply by another, takes the constants' product (operand 1)
};

// Indexed by value id (Module::num_values).
std::vector<Product> PlanProducts(const Module& m);

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_CONTRACTION_H_
