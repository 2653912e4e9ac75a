// The StableHLO op table: one entry per supported op, read by the verifier,
// the interpreter, the pricing and `tpumesh run --list-ops` / the docs'
// table (docs/stablehlo.md). hlo/'s internal header.
#ifndef TPUMESH_HLO_OPS_H_
#define TPUMESH_HLO_OPS_H_

#include <string_view>
#include <vector>

namespace tpumesh::hlo {

// How an op runs, which decides what the interpreter does with it.
enum class OpClass {
  kElementwise,  // hlo/elementwise.h, with scalar broadcast where the op allows
  kData,         // moves or makes data: reshape, transpose, slice, pad, iota, ...
  kMatmul,       // dot_general, dot: kernels/ matmul
  kConv,         // convolution: im2col + kernels/ matmul
  kReduce,       // reduce, reduce_window, with a body region
  kGatherScatter,
  kControl,      // func.call, while, case, if, return, optimization_barrier
  kCollective,   // all_reduce, all_gather, reduce_scatter, collective_permute, all_to_all
  kSharding,     // sdy.manual_computation, custom_call @Sharding / @SPMD*, sharding constraints
};

struct OpEntry {
  std::string_view name;
  OpClass op_class;
  std::string_view category;  // the report's type: matmul, conv, elementwise, reduce, data, collective, control
  std::string_view priced;    // how the cost model prices it (docs)
  // Operand and result counts the verifier requires: min..max operands
  // (max -1: any more), results exactly `results` (-1: any); the ops with
  // counts that follow other counts (reduce's inputs and inits, dynamic
  // slices' indices) check the rest where they run.
  int min_operands = 0, max_operands = -1, results = -1;
};

// Every supported op, sorted by name.
const std::vector<OpEntry>& OpTable();
const OpEntry* FindOp(std::string_view name);

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_OPS_H_
