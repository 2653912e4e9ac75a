#include "hlo/ops.h"

#include <algorithm>

namespace tpumesh::hlo {
namespace {

constexpr std::string_view kEw = "1 flop per element on the vector unit; operands and result through HBM";
constexpr std::string_view kTr = "1 transcendental per element (the vector unit's transcendental rate)";
constexpr std::string_view kMove = "no flops; operands and result through HBM";

std::vector<OpEntry> Build() {
  std::vector<OpEntry> t = {
      // elementwise
      {"stablehlo.add", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.subtract", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.multiply", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.divide", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.remainder", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.maximum", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.minimum", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.power", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.atan2", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.and", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.or", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.xor", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.not", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.shift_left", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.shift_right_arithmetic", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.shift_right_logical", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.popcnt", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.count_leading_zeros", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.negate", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.abs", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.sign", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.floor", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.ceil", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.round_nearest_afz", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.round_nearest_even", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.is_finite", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.exponential", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.exponential_minus_one", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.log", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.log_plus_one", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.logistic", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.tanh", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.sqrt", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.rsqrt", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.cbrt", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.sine", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.cosine", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.tan", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.erf_inv", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.erf", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.square", OpClass::kElementwise, "elementwise", kEw},
      {"chlo.acos", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.acosh", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.asin", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.asinh", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.atan", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.atanh", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.cosh", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.sinh", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.lgamma", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.digamma", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.erfc", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.bessel_i1e", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.next_after", OpClass::kElementwise, "elementwise", kEw},
      {"chlo.polygamma", OpClass::kElementwise, "elementwise", kTr},
      {"chlo.zeta", OpClass::kElementwise, "elementwise", kTr},
      {"stablehlo.compare", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.select", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.clamp", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.convert", OpClass::kElementwise, "elementwise", kEw},
      {"stablehlo.bitcast_convert", OpClass::kData, "data", kMove},
      {"stablehlo.reduce_precision", OpClass::kElementwise, "elementwise", kEw},
      // data
      {"stablehlo.constant", OpClass::kData, "data", "free: part of the program"},
      {"stablehlo.iota", OpClass::kData, "data", "the result written to HBM"},
      {"stablehlo.replica_id", OpClass::kData, "data", "free"},
      {"stablehlo.partition_id", OpClass::kData, "data", "free"},
      {"stablehlo.broadcast_in_dim", OpClass::kData, "data", kMove},
      {"stablehlo.reshape", OpClass::kData, "data", "free: a new shape of the same bytes"},
      {"stablehlo.transpose", OpClass::kData, "data", kMove},
      {"stablehlo.slice", OpClass::kData, "data", kMove},
      {"stablehlo.dynamic_slice", OpClass::kData, "data", kMove},
      {"stablehlo.dynamic_update_slice", OpClass::kData, "data", "the update read and written in place"},
      {"stablehlo.concatenate", OpClass::kData, "data", kMove},
      {"stablehlo.pad", OpClass::kData, "data", kMove},
      {"stablehlo.reverse", OpClass::kData, "data", kMove},
      // compute
      {"stablehlo.dot_general", OpClass::kMatmul, "matmul",
       "2 m n k flops on the MXU (systolic cycles in the chip's dataflow), passes by precision_config; operands and result through HBM"},
      {"stablehlo.dot", OpClass::kMatmul, "matmul", "as dot_general"},
      {"stablehlo.convolution", OpClass::kConv, "conv",
       "an im2col matmul on the MXU: m = output pixels, n = output features per group, k = taps x input features per group; flops count only taps inside the input (as XLA)"},
      {"stablehlo.reduce", OpClass::kReduce, "reduce", "1 flop per input element reduced; inputs and result through HBM"},
      {"stablehlo.reduce_window", OpClass::kReduce, "reduce", "1 flop per window element; inputs and result through HBM"},
      {"chlo.top_k", OpClass::kReduce, "reduce", "as a sort of the last dimension"},
      {"stablehlo.sort", OpClass::kReduce, "reduce", "n ceil(log2 n) comparisons along the dimension, each the comparator's ops"},
      {"stablehlo.gather", OpClass::kGatherScatter, "data", "no flops; indices, the gathered elements and the result through HBM"},
      {"stablehlo.scatter", OpClass::kGatherScatter, "data", "1 flop per update; operand, indices, updates and result through HBM"},
      {"stablehlo.select_and_scatter", OpClass::kGatherScatter, "data", "per source element a select per window element and one scatter; operand, source and result through HBM"},
      // control
      {"func.call", OpClass::kControl, "control", "the callee's ops"},
      {"func.return", OpClass::kControl, "control", "free"},
      {"stablehlo.return", OpClass::kControl, "control", "free"},
      {"stablehlo.while", OpClass::kControl, "control", "the body and condition's ops, every iteration"},
      {"stablehlo.case", OpClass::kControl, "control", "the taken branch's ops"},
      {"stablehlo.if", OpClass::kControl, "control", "the taken branch's ops"},
      {"stablehlo.optimization_barrier", OpClass::kControl, "control", "free"},
      // collectives
      {"stablehlo.all_reduce", OpClass::kCollective, "collective", "psum on the ICI over each replica group (mesh/interconnect.h)"},
      {"stablehlo.all_gather", OpClass::kCollective, "collective", "all_gather on the ICI"},
      {"stablehlo.reduce_scatter", OpClass::kCollective, "collective", "psum_scatter on the ICI"},
      {"stablehlo.collective_permute", OpClass::kCollective, "collective", "ppermute on the ICI"},
      {"stablehlo.all_to_all", OpClass::kCollective, "collective", "all_to_all on the ICI"},
      // sharding
      {"sdy.manual_computation", OpClass::kSharding, "control", "its body per device; entering and leaving are free (the shards stay in place)"},
      {"sdy.return", OpClass::kControl, "control", "free"},
      {"sdy.sharding_constraint", OpClass::kSharding, "data", "free"},
      {"stablehlo.custom_call", OpClass::kSharding, "data", "@Sharding, @SPMDFullToShardShape, @SPMDShardToFullShape: free"},
  };
  // Arity: (min operands, max operands, results) by op, one rule per shape
  // of op.
  struct Arity {
    int min, max, results;
  };
  auto arity = [](const OpEntry& e) -> Arity {
    const std::string_view n = e.name;
    if (e.op_class == OpClass::kElementwise) {
      if (n == "stablehlo.select" || n == "stablehlo.clamp") return {3, 3, 1};
      static const char* kBinary[] = {"stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide",
                                      "stablehlo.remainder", "stablehlo.maximum", "stablehlo.minimum", "stablehlo.power",
                                      "stablehlo.atan2", "stablehlo.and", "stablehlo.or", "stablehlo.xor",
                                      "stablehlo.shift_left", "stablehlo.shift_right_arithmetic",
                                      "stablehlo.shift_right_logical", "stablehlo.compare", "chlo.next_after",
                                      "chlo.polygamma", "chlo.zeta"};
      for (const char* b : kBinary)
        if (n == b) return {2, 2, 1};
      return {1, 1, 1};
    }
    if (n == "stablehlo.constant" || n == "stablehlo.iota" || n == "stablehlo.replica_id" ||
        n == "stablehlo.partition_id")
      return {0, 0, 1};
    if (n == "stablehlo.dot_general" || n == "stablehlo.dot" || n == "stablehlo.convolution" ||
        n == "stablehlo.gather" || n == "stablehlo.pad")
      return {2, 2, 1};
    if (n == "stablehlo.dynamic_slice") return {1, -1, 1};
    if (n == "stablehlo.dynamic_update_slice") return {2, -1, 1};
    if (n == "stablehlo.concatenate") return {1, -1, 1};
    if (n == "stablehlo.reduce" || n == "stablehlo.reduce_window") return {2, -1, -1};
    if (n == "stablehlo.scatter") return {3, -1, -1};
    if (n == "stablehlo.select_and_scatter") return {3, 3, 1};
    if (n == "stablehlo.sort") return {1, -1, -1};
    if (n == "chlo.top_k") return {1, 1, 2};
    if (n == "stablehlo.case" || n == "stablehlo.if") return {1, 1, -1};
    if (e.op_class == OpClass::kCollective || n == "stablehlo.custom_call" || n == "sdy.sharding_constraint")
      return {1, 1, 1};
    if (e.op_class == OpClass::kData) return {1, 1, 1};  // broadcast, reshape, transpose, slice, reverse, bitcast
    return {0, -1, -1};  // calls, returns, loops, barriers, manual computations: checked against their types
  };
  for (OpEntry& e : t) {
    const Arity a = arity(e);
    e.min_operands = a.min;
    e.max_operands = a.max;
    e.results = a.results;
  }
  std::sort(t.begin(), t.end(), [](const OpEntry& a, const OpEntry& b) { return a.name < b.name; });
  return t;
}

}  // namespace

const std::vector<OpEntry>& OpTable() {
  static const auto* t = new std::vector<OpEntry>(Build());
  return *t;
}

const OpEntry* FindOp(std::string_view name) {
  const auto& t = OpTable();
  const auto it = std::lower_bound(t.begin(), t.end(), name,
                                   [](const OpEntry& e, std::string_view n) { return e.name < n; });
  return it != t.end() && it->name == name ? &*it : nullptr;
}

}  // namespace tpumesh::hlo
