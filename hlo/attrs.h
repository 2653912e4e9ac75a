// The typed attributes of the ops that read attributes each time they run:
// compare's direction and type, dot_general's and convolution's dimension
// numbers and precision_config, reduce_precision's bit counts. Resolved once
// when the module is read (Op::typed, by the op's registry entry) and
// checked against the op's types there; Verify refuses an op whose
// attributes do not fit, so the refusal comes before anything runs.
// hlo/'s internal header.
//
// Contract: ResolveAttrs never fails and never indexes out of range; what
// does not fit is OpAttrs::status (InvalidArgument naming the attribute, or
// Unimplemented for a convolution's batch_group_count != 1), and `value`
// then holds nothing. The other ops' attributes are still read by key
// (hlo/op_shapes.h) where they run.
#ifndef TPUMESH_HLO_ATTRS_H_
#define TPUMESH_HLO_ATTRS_H_

#include <cstdint>
#include <memory>
#include <variant>

#include "base/status.h"
#include "hlo/module.h"
#include "hlo/op_shapes.h"
#include "kernels/matmul.h"

namespace tpumesh::hlo {

enum class CompareDirection : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };

struct CompareAttrs {
  CompareDirection direction = CompareDirection::kEq;
  bool total_order = false;  // compare_type TOTALORDER: IEEE totalOrder on float bits
};
struct DotAttrs {
  DotDims dims;
};
struct ConvAttrs {
  ConvShape shape;
};
struct ReducePrecisionAttrs {
  int exponent_bits = 8, mantissa_bits = 23;
};

struct OpAttrs {
  Status status;  // OK, or what in the attributes does not fit the op
  // precision_config's highest (DEFAULT when absent): dot_general, dot and
  // convolution.
  kernels::Precision precision = kernels::Precision::kDefault;
  std::variant<std::monostate, CompareAttrs, DotAttrs, ConvAttrs, ReducePrecisionAttrs> value;
};

// The typed attributes of `op` (found by its entry), checked against its
// operand and result types.
std::shared_ptr<const OpAttrs> ResolveAttrs(const Op& op);
// Op::typed, or resolved now for an op built by hand rather than read.
inline std::shared_ptr<const OpAttrs> AttrsOf(const Op& op) { return op.typed ? op.typed : ResolveAttrs(op); }

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_ATTRS_H_
