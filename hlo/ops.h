// The StableHLO op registry: one entry per supported op, and everything
// hlo/ does with an op is read from its entry: the verifier's counts and
// check, what the interpreter runs, how the cost model prices it, how XLA's
// partitioner would split it, whether it fuses, and the docs' row
// (docs/stablehlo.md and `tpumesh run --list-ops` print OpTable()).
// hlo/'s internal header.
//
// Contract:
// - Each op is declared once: an elementwise op is one row of
//   TPUMESH_HLO_UNARY_OPS / TPUMESH_HLO_BINARY_OPS below (its scalar math is
//   the case of its enumerator in hlo/elementwise.cc); any other op is one
//   row of ops.cc's table.
// - Every rule (Check, Run, Price, Shard) of every entry is set: kUnset is
//   no rule, and tests/hlo/registry_test.cc walks the table to refuse it.
//   The functions that act on a rule switch over all of its values with no
//   default, so a new value without its code does not build (-Werror=switch
//   on tpumesh_hlo).
// - ParseModule resolves each op's entry once (Op::entry); nothing looks an
//   op up by name while a module runs.
#ifndef TPUMESH_HLO_OPS_H_
#define TPUMESH_HLO_OPS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hlo/module.h"

namespace tpumesh::hlo {

// The elementwise ops with one scalar function each:
// X(enumerator, name, price) with price kFlop or kTranscendental (per
// element on the vector unit), or kErf / kErfInv (the polynomial XLA expands
// them to, CostPerElement). Adding one is
// a row here and its math in hlo/elementwise.cc (UnOp / BinOp).
#define TPUMESH_HLO_UNARY_OPS(X)                                 \
  X(kNeg, "stablehlo.negate", kFlop)                             \
  X(kAbs, "stablehlo.abs", kFlop)                                \
  X(kExp, "stablehlo.exponential", kTranscendental)              \
  X(kExpm1, "stablehlo.exponential_minus_one", kTranscendental)  \
  X(kLog, "stablehlo.log", kTranscendental)                      \
  X(kLog1p, "stablehlo.log_plus_one", kTranscendental)           \
  X(kLogistic, "stablehlo.logistic", kTranscendental)            \
  X(kTanh, "stablehlo.tanh", kTranscendental)                    \
  X(kSqrt, "stablehlo.sqrt", kTranscendental)                    \
  X(kRsqrt, "stablehlo.rsqrt", kTranscendental)                  \
  X(kCbrt, "stablehlo.cbrt", kTranscendental)                    \
  X(kSin, "stablehlo.sine", kTranscendental)                     \
  X(kCos, "stablehlo.cosine", kTranscendental)                   \
  X(kTan, "stablehlo.tan", kTranscendental)                      \
  X(kFloor, "stablehlo.floor", kFlop)                            \
  X(kCeil, "stablehlo.ceil", kFlop)                              \
  X(kRoundAfz, "stablehlo.round_nearest_afz", kFlop)             \
  X(kRoundEven, "stablehlo.round_nearest_even", kFlop)           \
  X(kSign, "stablehlo.sign", kFlop)                              \
  X(kNot, "stablehlo.not", kFlop)                                \
  X(kIsFinite, "stablehlo.is_finite", kFlop)                     \
  X(kPopcnt, "stablehlo.popcnt", kFlop)                          \
  X(kClz, "stablehlo.count_leading_zeros", kFlop)                \
  X(kErfInv, "chlo.erf_inv", kErfInv)                            \
  X(kErf, "chlo.erf", kErf)                                      \
  X(kSquare, "chlo.square", kFlop)                               \
  X(kAcos, "chlo.acos", kTranscendental)                         \
  X(kAcosh, "chlo.acosh", kTranscendental)                       \
  X(kAsin, "chlo.asin", kTranscendental)                         \
  X(kAsinh, "chlo.asinh", kTranscendental)                       \
  X(kAtan, "chlo.atan", kTranscendental)                         \
  X(kAtanh, "chlo.atanh", kTranscendental)                       \
  X(kCosh, "chlo.cosh", kTranscendental)                         \
  X(kSinh, "chlo.sinh", kTranscendental)                         \
  X(kChloTan, "chlo.tan", kTranscendental)                       \
  X(kLgamma, "chlo.lgamma", kTranscendental)                     \
  X(kDigamma, "chlo.digamma", kTranscendental)                   \
  X(kErfc, "chlo.erfc", kTranscendental)                         \
  X(kBesselI1e, "chlo.bessel_i1e", kTranscendental)

#define TPUMESH_HLO_BINARY_OPS(X)                           \
  X(kAdd, "stablehlo.add", kFlop)                           \
  X(kSub, "stablehlo.subtract", kFlop)                      \
  X(kMul, "stablehlo.multiply", kFlop)                      \
  X(kDiv, "stablehlo.divide", kFlop)                        \
  X(kRem, "stablehlo.remainder", kFlop)                     \
  X(kMax, "stablehlo.maximum", kFlop)                       \
  X(kMin, "stablehlo.minimum", kFlop)                       \
  X(kPow, "stablehlo.power", kTranscendental)               \
  X(kAtan2, "stablehlo.atan2", kTranscendental)             \
  X(kAnd, "stablehlo.and", kFlop)                           \
  X(kOr, "stablehlo.or", kFlop)                             \
  X(kXor, "stablehlo.xor", kFlop)                           \
  X(kShl, "stablehlo.shift_left", kFlop)                    \
  X(kShrA, "stablehlo.shift_right_arithmetic", kFlop)       \
  X(kShrL, "stablehlo.shift_right_logical", kFlop)          \
  X(kNextAfter, "chlo.next_after", kFlop)                   \
  X(kPolygamma, "chlo.polygamma", kTranscendental)          \
  X(kZeta, "chlo.zeta", kTranscendental)

#define TPUMESH_HLO_ENUMERATOR(k, name, price) k,
enum class Un : uint8_t { TPUMESH_HLO_UNARY_OPS(TPUMESH_HLO_ENUMERATOR) };
enum class Bin : uint8_t { TPUMESH_HLO_BINARY_OPS(TPUMESH_HLO_ENUMERATOR) };
#undef TPUMESH_HLO_ENUMERATOR

// The report's grouping of an op (and what the interpreter does around it:
// views and in-place results for elementwise ops; control and sharding ops
// run their regions and are not priced themselves).
enum class OpClass : uint8_t {
  kElementwise,  // hlo/elementwise.h, with scalar broadcast where the op allows
  kData,         // moves or makes data: reshape, transpose, slice, pad, iota, ...
  kMatmul,       // dot_general, dot: kernels/ matmul
  kConv,         // convolution: im2col + kernels/ matmul
  kReduce,       // reduce, reduce_window, sort, top_k
  kGatherScatter,
  kControl,      // func.call, while, case, if, return, optimization_barrier
  kCollective,   // all_reduce, all_gather, reduce_scatter, collective_permute, all_to_all
  kSharding,     // sdy.manual_computation, custom_call @Sharding / @SPMD*, sharding constraints
  kLinalg,       // fft, triangular_solve, cholesky: kernels/fft.h, kernels/triangular_solve.h, kernels/cholesky.h
};

// What the verifier checks beyond counts and tensor types (Verify).
enum class Check : uint8_t {
  kUnset,
  kElementwise,    // operand shapes and element types against the result (ScalarFn::kind's exceptions)
  kReshape,        // same elements, same element type
  kBitcastConvert, // same bytes
  kBroadcastInDim,
  kTranspose,
  kDot,            // two operands, one result; the dimension numbers where it runs
  kConcatenate,
  kCall,           // the callee exists, with these types
  kReturn,         // func.return: the function's result types
  kCustomCall,     // a supported target
  kWhile,          // as many results as operands
  kWhereItRuns,    // the op's own shapes and attributes are checked by its run
};

// What the interpreter does to run it.
enum class Run : uint8_t {
  kUnset,
  kElementwise, kConstant, kDeviceId, kCopy, kIota, kBroadcastInDim, kTranspose, kReverse, kSlice,
  kDynamicSlice, kDynamicUpdateSlice, kConcatenate, kPad,
  kDot, kConvolution, kFft, kTriangularSolve, kCholesky, kRngBitGenerator,
  kReduce, kReduceWindow, kSort, kTopK,
  kGather, kScatter, kSelectAndScatter,
  kAllReduce, kAllGather, kReduceScatter, kCollectivePermute, kAllToAll,
  kCall, kReturn, kWhile, kCase, kIf, kPassThrough, kShardingConstraint, kCustomCall, kManualComputation,
};

// How the cost model prices it (one record per executed op, or none).
enum class Price : uint8_t {
  kUnset,
  kFlop,             // 1 flop per element of the result
  kTranscendental,   // 1 transcendental per element
  kErf,              // XLA's expansion (CostPerElement): 29 flops per element
  kErfInv,           // XLA's expansion (CostPerElement): 37 flops and 2 transcendentals per element
  kFree,             // no record
  kMove,             // no flops; operands and result through HBM
  kWritten,          // the result written, nothing read
  kUpdate,           // the update read and written in place
  kDot, kConvolution, kReduce, kReduceWindow, kSort, kTopK, kGather, kScatter, kSelectAndScatter,
  kFft,              // XLA's count (kernels/fft.h FftCost)
  kTriangularSolve,  // XLA's count (kernels/triangular_solve.h TriangularSolveCost)
  kCholesky,         // XLA's count (kernels/cholesky.h CholeskyCost)
  kCollective,
  kRegions,          // no record of its own: the ops of the regions it runs are priced
};

// How XLA's SPMD partitioner would split it (hlo/partition.h's Propagate).
enum class Shard : uint8_t {
  kUnset,
  kSameDims,  // elementwise: splits stay where they are
  kBitcastConvert, kBroadcastInDim, kReshape, kTranspose, kDot, kConvolution, kReduce, kReduceWindow, kSlice,
  kPad, kConcatenate, kDynamicSlice, kDynamicUpdateSlice, kSort, kTopK, kGather,
  kWhole,    // each device computes it on whole operands (split operands are gathered)
  kRegions,  // not partitioned itself: the ops of its regions are
};

// An elementwise op's scalar function (hlo/elementwise.h).
struct ScalarFn {
  // kComplex: two reals -> complex; kReal, kImag: a part of a complex value
  // (hlo/elementwise_complex.h).
  enum class Kind : uint8_t {
    kNone, kUnary, kBinary, kCompare, kSelect, kClamp, kConvert, kReducePrecision, kComplex, kReal, kImag
  };
  Kind kind = Kind::kNone;
  Un un = Un::kNeg;    // kUnary
  Bin bin = Bin::kAdd;  // kBinary
};

struct OpEntry {
  std::string_view name;
  OpClass op_class = OpClass::kData;
  std::string_view category;  // the report's type: matmul, conv, elementwise, reduce, data, collective, control
  std::string_view priced;    // how the cost model prices it (docs)
  // Operand and result counts the verifier requires: min..max operands
  // (max -1: any more), results exactly `results` (-1: any); the ops with
  // counts that follow other counts (reduce's inputs and inits, dynamic
  // slices' indices) check the rest where they run.
  int min_operands = 0, max_operands = -1, results = -1;
  // Regions required: at least min_regions, at most max_regions (-1: any).
  int min_regions = 0, max_regions = -1;
  Check check = Check::kUnset;
  Run run = Run::kUnset;
  Price price = Price::kUnset;
  Shard shard = Shard::kUnset;
  // Takes its operands fused, without a trip through HBM (loop fusion, input
  // fusion into a reduce), as XLA does on a TPU.
  bool fusible = false;
  ScalarFn scalar;  // elementwise ops
};

// Per element, what an elementwise price rule (kFlop, kTranscendental,
// kErf, kErfInv) costs on the vector unit, as XLA's HloCostAnalysis counts
// the ops the op expands to:
// - chlo.erf (f32; chlo's materializeErfApproximationF32, the ErfImpl32
//   rational): clamp to [-4, 4], x^2, a Horner chain of 7 multiply-adds
//   (14 ops) and one of 5 (10 ops), x times the numerator, the division,
//   clamp to [-1, 1]: 29 flops. (The exported modules' HLO keeps erf as
//   one op, which XLA's HloCostAnalysis counts as 1 transcendental; a
//   TPU's vector unit evaluates the polynomial, so that is what is priced.)
// - chlo.erf_inv (f32; Giles' approximation): w = -log1p(-x^2) and
//   sqrt(w) (2 transcendentals); two 9-coefficient Horner chains (one per
//   branch, both evaluated), the branch's compare and selects, x times the
//   polynomial, |x| == 1's infinity: 37 flops (XLA's count of the
//   erfinv program, tests/data/stablehlo/*/manifest.json).
struct ElementwiseCost {
  double flops = 0, transcendentals = 0;
};
ElementwiseCost CostPerElement(Price p);

// Every supported op, sorted by name.
const std::vector<OpEntry>& OpTable();
// By name: the reader (once per op) and --list-ops; null when unsupported.
const OpEntry* FindOp(std::string_view name);
// The op's resolved entry (Op::entry), or found by name for an op built by
// hand rather than read; null when unsupported.
inline const OpEntry* EntryOf(const Op& op) { return op.entry ? op.entry : FindOp(op.name); }

// stablehlo.custom_call's targets: a call runs only when its target is one
// of kCustomCallTargets (each has its case in Interpreter::CustomCall);
// adding a target is a name here and its case there. Any other target is
// refused before anything runs, by CustomCallRefusal.
inline constexpr std::string_view kCustomCallTargets[] = {"Sharding", "SPMDFullToShardShape",
                                                          "SPMDShardToFullShape"};
bool CustomCallSupported(std::string_view target);
// Why a target is refused, a function of its name alone:
// "unsupported custom_call @lapack_spotrf_ffi (LAPACK on the host; ...)".
std::string CustomCallRefusal(std::string_view target);

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_OPS_H_
