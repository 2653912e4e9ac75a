// The typed attributes of the ops that read attributes when they run or
// are priced: compare's direction and type, dot_general's and
// convolution's dimension numbers and precision_config, reduce_precision's
// bit counts, the data ops' axes, slices and padding, reduce's dimensions,
// reduce_window's and select_and_scatter's windows, sort's dimension,
// top_k's k, gather's and scatter's dimension numbers, the collectives'
// replica groups, pairs and dimensions, fft's type and lengths,
// triangular_solve's flags, cholesky's lower. Resolved once when the module is
// read (Op::typed, by the op's registry entry) and checked against the
// op's types there; Verify refuses an op whose attributes do not fit, so
// the refusal comes before anything runs. hlo/'s internal header.
//
// Contract: ResolveAttrs never fails and never indexes out of range; what
// does not fit is OpAttrs::status (InvalidArgument naming the attribute), and `value`
// then holds nothing. What depends on the mesh (a replica group's devices
// against the number of devices) is checked where the op runs. Still read
// by key (hlo/op_shapes.h): a constant's value, the sharding annotations,
// dynamic_slice's slice_sizes (the partitioner's only), and dot_general's
// and convolution's numbers checked against local types when priced.
#ifndef TPUMESH_HLO_ATTRS_H_
#define TPUMESH_HLO_ATTRS_H_

#include <cstdint>
#include <memory>
#include <variant>
#include <vector>

#include "base/status.h"
#include "hlo/module.h"
#include "hlo/op_shapes.h"
#include "kernels/cholesky.h"
#include "kernels/fft.h"
#include "kernels/matmul.h"
#include "kernels/triangular_solve.h"

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
// broadcast_in_dim's broadcast_dimensions, transpose's permutation,
// reverse's and reduce's dimensions.
struct AxesAttrs {
  Dims axes;
};
// iota's iota_dimension, concatenate's dimension, sort's dimension (-1
// when absent), top_k's k.
struct AxisAttrs {
  int64_t axis = 0;
};
struct SliceAttrs {
  Dims start, limit, strides;  // strides: 1s when absent
};
struct PadAttrs {
  Dims low, high, interior;  // interior: 0s when absent
  bool interior_given = false;
};
struct WindowAttrs {  // reduce_window, select_and_scatter; 1s (padding 0s) when absent
  Dims dims, strides, base_dilations, window_dilations, padding;
};
struct GatherAttrs {  // dimension_numbers and slice_sizes
  Dims offset_dims, collapsed_slice_dims, operand_batching_dims, start_indices_batching_dims, start_index_map,
      slice_sizes;
  int64_t index_vector_dim = 0;  // 0 when absent: StableHLO prints it only when not 0
};
struct ScatterAttrs {  // scatter_dimension_numbers
  Dims update_window_dims, inserted_window_dims, input_batching_dims, scatter_indices_batching_dims,
      scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;  // 0 when absent: StableHLO prints it only when not 0
};
struct CollectiveAttrs {
  // replica_groups, each group's devices (a dense form's -1 padding
  // dropped); empty: one group of every device.
  std::vector<std::vector<int64_t>> groups;
  bool dense_groups = false;  // the dense form, whose devices are checked against the mesh
  Dims pairs;                 // collective_permute's source_target_pairs, flat
  int64_t dim = 0;            // all_gather_dim, scatter_dimension, all_to_all's split_dimension
  int64_t concat_dim = 0, split_count = 0;  // all_to_all
};

// stablehlo.fft's fft_type and fft_length, checked against its types
// (kernels::MakeFftShape's rules, and the element types each type takes).
struct FftAttrs {
  kernels::FftShape shape;
};
// stablehlo.triangular_solve's flags, checked against its operand shapes.
struct TriangularSolveAttrs {
  kernels::TriangularSolveShape shape;
};
// stablehlo.cholesky's lower (false when absent, as the spec's default),
// checked against its operand shape.
struct CholeskyAttrs {
  kernels::CholeskyShape shape;
};

struct OpAttrs {
  Status status;  // OK, or what in the attributes does not fit the op
  // precision_config's highest (DEFAULT when absent): dot_general, dot and
  // convolution.
  kernels::Precision precision = kernels::Precision::kDefault;
  std::variant<std::monostate, CompareAttrs, DotAttrs, ConvAttrs, ReducePrecisionAttrs, AxesAttrs, AxisAttrs,
               SliceAttrs, PadAttrs, WindowAttrs, GatherAttrs, ScatterAttrs, CollectiveAttrs, FftAttrs,
               TriangularSolveAttrs, CholeskyAttrs>
      value;
};

// The typed attributes of `op` (found by its entry), checked against its
// operand and result types.
std::shared_ptr<const OpAttrs> ResolveAttrs(const Op& op);
// Op::typed, or resolved now for an op built by hand rather than read.
inline std::shared_ptr<const OpAttrs> AttrsOf(const Op& op) { return op.typed ? op.typed : ResolveAttrs(op); }
// The op's attributes of kind T, or why they do not fit.
template <typename T>
StatusOr<T> TypedAttrs(const Op& op) {
  const auto a = AttrsOf(op);
  TPUMESH_RETURN_IF_ERROR(a->status);
  if (const T* t = std::get_if<T>(&a->value)) return *t;
  return InternalError(op.name + ": its attributes were not resolved");
}

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_ATTRS_H_
