#include "hlo/ops.h"

#include <algorithm>

namespace tpumesh::hlo {
namespace {

constexpr std::string_view kEw = "1 flop per element on the vector unit; operands and result through HBM";
constexpr std::string_view kTr = "1 transcendental per element (the vector unit's transcendental rate)";
constexpr std::string_view kMove = "no flops; operands and result through HBM";
constexpr std::string_view kSliceMove = "no flops; the window read (not the whole operand) and the result through HBM";

// The docs' words for the elementwise prices (one wording per rule; the
// counts are CostPerElement's).
std::string_view ElementwiseDoc(Price p) {
  switch (p) {
    case Price::kTranscendental: return kTr;
    case Price::kErf:
      return "29 flops per element (XLA's ErfImpl32: clamp, x^2, a 7- and a 5-term Horner chain, x times one over "
             "the other, clamp)";
    case Price::kErfInv:
      return "37 flops and 2 transcendentals per element (XLA's expansion: log1p, sqrt and a polynomial with selects)";
    default: return kEw;
  }
}

struct Arity {
  int min, max, results;
};
struct Regions {
  int min = 0, max = -1;
};
constexpr Regions kAnyRegions{0, -1};
constexpr Regions Exactly(int n) { return {n, n}; }

OpEntry Row(std::string_view name, OpClass c, std::string_view category, std::string_view priced, Arity a,
            Regions r, Check check, Run run, Price price, Shard shard, bool fusible) {
  OpEntry e;
  e.name = name;
  e.op_class = c;
  e.category = category;
  e.priced = priced;
  e.min_operands = a.min;
  e.max_operands = a.max;
  e.results = a.results;
  e.min_regions = r.min;
  e.max_regions = r.max;
  e.check = check;
  e.run = run;
  e.price = price;
  e.shard = shard;
  e.fusible = fusible;
  return e;
}

// An elementwise op: its scalar function and price; the rest is the same
// for all of them.
OpEntry Ew(std::string_view name, Arity a, ScalarFn fn, Price price = Price::kFlop) {
  OpEntry e = Row(name, OpClass::kElementwise, "elementwise", ElementwiseDoc(price), a, kAnyRegions,
                  Check::kElementwise, Run::kElementwise, price, Shard::kSameDims, /*fusible=*/true);
  e.scalar = fn;
  return e;
}

std::vector<OpEntry> Build() {
  using C = OpClass;
  using K = ScalarFn::Kind;
  constexpr Arity kUnary{1, 1, 1}, kBinary{2, 2, 1}, kTernary{3, 3, 1}, kNullary{0, 0, 1}, kAny{0, -1, -1};
  std::vector<OpEntry> t;
#define TPUMESH_HLO_UNARY_ROW(k, name, price) \
  t.push_back(Ew(name, kUnary, ScalarFn{K::kUnary, Un::k, Bin::kAdd}, Price::price));
#define TPUMESH_HLO_BINARY_ROW(k, name, price) \
  t.push_back(Ew(name, kBinary, ScalarFn{K::kBinary, Un::kNeg, Bin::k}, Price::price));
  TPUMESH_HLO_UNARY_OPS(TPUMESH_HLO_UNARY_ROW)
  TPUMESH_HLO_BINARY_OPS(TPUMESH_HLO_BINARY_ROW)
#undef TPUMESH_HLO_UNARY_ROW
#undef TPUMESH_HLO_BINARY_ROW
  const std::vector<OpEntry> rest = {
      // elementwise, with more than one scalar function each
      Ew("stablehlo.compare", kBinary, {K::kCompare}),
      Ew("stablehlo.select", kTernary, {K::kSelect}),
      Ew("stablehlo.clamp", kTernary, {K::kClamp}),
      Ew("stablehlo.convert", kUnary, {K::kConvert}),
      Ew("stablehlo.reduce_precision", kUnary, {K::kReducePrecision}),
      Ew("stablehlo.complex", kBinary, {K::kComplex}),
      Ew("stablehlo.real", kUnary, {K::kReal}),
      Ew("stablehlo.imag", kUnary, {K::kImag}),
      // name, class, report type, docs, arity, regions, check, run, price, shard, fusible
      Row("stablehlo.bitcast_convert", C::kData, "data", kMove, kUnary, kAnyRegions, Check::kBitcastConvert,
          Run::kCopy, Price::kFree, Shard::kBitcastConvert, true),
      // data
      Row("stablehlo.constant", C::kData, "data", "free: part of the program", kNullary, kAnyRegions,
          Check::kWhereItRuns, Run::kConstant, Price::kFree, Shard::kWhole, true),
      Row("stablehlo.iota", C::kData, "data", "the result written to HBM", kNullary, kAnyRegions,
          Check::kWhereItRuns, Run::kIota, Price::kWritten, Shard::kWhole, true),
      Row("stablehlo.rng_bit_generator", C::kData, "data",
          "the state and bits written to HBM (the generator's integer ops are not counted); DEFAULT and PHILOX as XLA:CPU's Philox4x32",
          {1, 1, 2}, Exactly(0), Check::kWhereItRuns, Run::kRngBitGenerator, Price::kWritten, Shard::kWhole, false),
      // Priced as moves of their (4-byte) result, though the docs say free.
      Row("stablehlo.replica_id", C::kData, "data", "free", kNullary, kAnyRegions, Check::kWhereItRuns,
          Run::kDeviceId, Price::kMove, Shard::kWhole, false),
      Row("stablehlo.partition_id", C::kData, "data", "free", kNullary, kAnyRegions, Check::kWhereItRuns,
          Run::kDeviceId, Price::kMove, Shard::kWhole, false),
      Row("stablehlo.broadcast_in_dim", C::kData, "data", kMove, kUnary, kAnyRegions, Check::kBroadcastInDim,
          Run::kBroadcastInDim, Price::kMove, Shard::kBroadcastInDim, true),
      Row("stablehlo.reshape", C::kData, "data", "free: a new shape of the same bytes", kUnary, kAnyRegions,
          Check::kReshape, Run::kCopy, Price::kFree, Shard::kReshape, true),
      Row("stablehlo.transpose", C::kData, "data", kMove, kUnary, kAnyRegions, Check::kTranspose,
          Run::kTranspose, Price::kMove, Shard::kTranspose, true),
      Row("stablehlo.slice", C::kData, "data", kSliceMove, kUnary, kAnyRegions, Check::kWhereItRuns, Run::kSlice,
          Price::kMove, Shard::kSlice, true),
      Row("stablehlo.dynamic_slice", C::kData, "data", kSliceMove, {1, -1, 1}, kAnyRegions, Check::kWhereItRuns,
          Run::kDynamicSlice, Price::kMove, Shard::kDynamicSlice, true),
      Row("stablehlo.dynamic_update_slice", C::kData, "data", "the update read and written in place",
          {2, -1, 1}, kAnyRegions, Check::kWhereItRuns, Run::kDynamicUpdateSlice, Price::kUpdate,
          Shard::kDynamicUpdateSlice, false),
      Row("stablehlo.concatenate", C::kData, "data", kMove, {1, -1, 1}, kAnyRegions, Check::kConcatenate,
          Run::kConcatenate, Price::kMove, Shard::kConcatenate, true),
      Row("stablehlo.pad", C::kData, "data", kMove, kBinary, kAnyRegions, Check::kWhereItRuns, Run::kPad,
          Price::kMove, Shard::kPad, true),
      Row("stablehlo.reverse", C::kData, "data", kMove, kUnary, kAnyRegions, Check::kWhereItRuns, Run::kReverse,
          Price::kMove, Shard::kWhole, true),
      // compute
      Row("stablehlo.dot_general", C::kMatmul, "matmul",
          "2 m n k flops on the MXU (systolic cycles in the chip's dataflow), passes by precision_config; operands and result through HBM",
          kBinary, kAnyRegions, Check::kDot, Run::kDot, Price::kDot, Shard::kDot, false),
      Row("stablehlo.dot", C::kMatmul, "matmul", "as dot_general", kBinary, kAnyRegions, Check::kDot, Run::kDot,
          Price::kDot, Shard::kDot, false),
      Row("stablehlo.convolution", C::kConv, "conv",
          "an im2col matmul on the MXU: m = output pixels, n = output features per group, k = taps x input features per group; flops count only taps inside the input (as XLA)",
          kBinary, kAnyRegions, Check::kWhereItRuns, Run::kConvolution, Price::kConvolution, Shard::kConvolution,
          false),
      Row("stablehlo.fft", C::kLinalg, "fft",
          "XLA's count: 8 flops per operand element per log2 of each fft_length, multiplied (kernels/fft.h); operand and result through HBM",
          kUnary, kAnyRegions, Check::kWhereItRuns, Run::kFft, Price::kFft, Shard::kWhole, false),
      Row("stablehlo.triangular_solve", C::kLinalg, "linalg",
          "XLA's count: 2 k flops per element of b, k the order of a; a, b and the result through HBM (custom_call @lapack_?trsm_ffi is read as this op)",
          kBinary, kAnyRegions, Check::kWhereItRuns, Run::kTriangularSolve, Price::kTriangularSolve, Shard::kWhole,
          false),
      Row("stablehlo.cholesky", C::kLinalg, "linalg",
          "XLA's count: n x elements(a) / 3 flops, n the order of a; a and the result through HBM",
          kUnary, kAnyRegions, Check::kWhereItRuns, Run::kCholesky, Price::kCholesky, Shard::kWhole, false),
      Row("stablehlo.reduce", C::kReduce, "reduce", "1 flop per input element reduced; inputs and result through HBM",
          {2, -1, -1}, Exactly(1), Check::kWhereItRuns, Run::kReduce, Price::kReduce, Shard::kReduce, true),
      Row("stablehlo.reduce_window", C::kReduce, "reduce",
          "1 flop per window element; inputs and result through HBM", {2, -1, -1}, Exactly(1),
          Check::kWhereItRuns, Run::kReduceWindow, Price::kReduceWindow, Shard::kReduceWindow, true),
      Row("chlo.top_k", C::kReduce, "reduce", "as a sort of the last dimension", {1, 1, 2}, kAnyRegions,
          Check::kWhereItRuns, Run::kTopK, Price::kTopK, Shard::kTopK, false),
      Row("stablehlo.sort", C::kReduce, "reduce",
          "n ceil(log2 n) comparisons along the dimension, each the comparator's ops", {1, -1, -1}, Exactly(1),
          Check::kWhereItRuns, Run::kSort, Price::kSort, Shard::kSort, false),
      Row("stablehlo.gather", C::kGatherScatter, "data",
          "no flops; indices, the gathered elements and the result through HBM", kBinary, kAnyRegions,
          Check::kWhereItRuns, Run::kGather, Price::kGather, Shard::kGather, false),
      Row("stablehlo.scatter", C::kGatherScatter, "data",
          "1 flop per update; operand, indices, updates and result through HBM", {3, -1, -1}, Exactly(1),
          Check::kWhereItRuns, Run::kScatter, Price::kScatter, Shard::kWhole, false),
      Row("stablehlo.select_and_scatter", C::kGatherScatter, "data",
          "per source element a select per window element and one scatter; operand, source and result through HBM",
          kTernary, Exactly(2), Check::kWhereItRuns, Run::kSelectAndScatter, Price::kSelectAndScatter,
          Shard::kWhole, false),
      // control
      Row("func.call", C::kControl, "control", "the callee's ops", kAny, kAnyRegions, Check::kCall, Run::kCall,
          Price::kRegions, Shard::kRegions, false),
      Row("func.return", C::kControl, "control", "free", kAny, kAnyRegions, Check::kReturn, Run::kReturn,
          Price::kFree, Shard::kRegions, false),
      // A named op with its meaning as a function (decomposition = @f): run
      // as a call of it. JAX's portable artifacts carry the chlo ops VHLO
      // has no version of so (chlo.mulhi: jax.random's Philox).
      Row("stablehlo.composite", C::kControl, "control", "its decomposition's ops", kAny, Exactly(0),
          Check::kCall, Run::kCall, Price::kRegions, Shard::kRegions, false),
      Row("stablehlo.return", C::kControl, "control", "free", kAny, kAnyRegions, Check::kWhereItRuns, Run::kReturn,
          Price::kFree, Shard::kRegions, false),
      Row("stablehlo.while", C::kControl, "control", "the body and condition's ops, every iteration", kAny,
          Exactly(2), Check::kWhile, Run::kWhile, Price::kRegions, Shard::kRegions, false),
      Row("stablehlo.case", C::kControl, "control", "the taken branch's ops", {1, 1, -1}, {1, -1},
          Check::kWhereItRuns, Run::kCase, Price::kRegions, Shard::kRegions, false),
      Row("stablehlo.if", C::kControl, "control", "the taken branch's ops", {1, 1, -1}, Exactly(2),
          Check::kWhereItRuns, Run::kIf, Price::kRegions, Shard::kRegions, false),
      Row("stablehlo.optimization_barrier", C::kControl, "control", "free", kAny, kAnyRegions, Check::kWhereItRuns,
          Run::kPassThrough, Price::kFree, Shard::kRegions, false),
      // collectives
      Row("stablehlo.all_reduce", C::kCollective, "collective",
          "psum on the ICI over each replica group (mesh/interconnect.h)", kUnary, Exactly(1), Check::kWhereItRuns,
          Run::kAllReduce, Price::kCollective, Shard::kWhole, false),
      // XLA's old all-reduce of a sum, with no body (jax 0.4's eager pmap
      // writes it): an all_reduce whose body is an add.
      Row("stablehlo.cross-replica-sum", C::kCollective, "collective",
          "psum on the ICI over each replica group (mesh/interconnect.h)", kUnary, Exactly(0), Check::kWhereItRuns,
          Run::kAllReduce, Price::kCollective, Shard::kWhole, false),
      Row("stablehlo.all_gather", C::kCollective, "collective", "all_gather on the ICI", kUnary, kAnyRegions,
          Check::kWhereItRuns, Run::kAllGather, Price::kCollective, Shard::kWhole, false),
      Row("stablehlo.reduce_scatter", C::kCollective, "collective", "psum_scatter on the ICI", kUnary, Exactly(1),
          Check::kWhereItRuns, Run::kReduceScatter, Price::kCollective, Shard::kWhole, false),
      Row("stablehlo.collective_permute", C::kCollective, "collective", "ppermute on the ICI", kUnary, kAnyRegions,
          Check::kWhereItRuns, Run::kCollectivePermute, Price::kCollective, Shard::kWhole, false),
      Row("stablehlo.all_to_all", C::kCollective, "collective", "all_to_all on the ICI", kUnary, kAnyRegions,
          Check::kWhereItRuns, Run::kAllToAll, Price::kCollective, Shard::kWhole, false),
      // sharding
      Row("sdy.manual_computation", C::kSharding, "control",
          "its body per device; entering and leaving are free (the shards stay in place)", kAny, Exactly(1),
          Check::kWhereItRuns, Run::kManualComputation, Price::kRegions, Shard::kRegions, false),
      Row("sdy.return", C::kControl, "control", "free", kAny, kAnyRegions, Check::kWhereItRuns, Run::kReturn,
          Price::kFree, Shard::kRegions, false),
      Row("sdy.sharding_constraint", C::kSharding, "data", "free", kUnary, kAnyRegions, Check::kWhereItRuns,
          Run::kShardingConstraint, Price::kFree, Shard::kRegions, false),
      // Any operand count: a target's own count is checked where it runs,
      // after the verifier has refused the targets that do not run.
      Row("stablehlo.custom_call", C::kSharding, "data",
          "@Sharding, @SPMDFullToShardShape, @SPMDShardToFullShape: free", kAny, kAnyRegions, Check::kCustomCall,
          Run::kCustomCall, Price::kFree, Shard::kRegions, false),
  };
  t.insert(t.end(), rest.begin(), rest.end());
  std::sort(t.begin(), t.end(), [](const OpEntry& a, const OpEntry& b) { return a.name < b.name; });
  return t;
}

}  // namespace

const std::vector<OpEntry>& OpTable() {
  static const auto* t = new std::vector<OpEntry>(Build());
  return *t;
}

bool CustomCallSupported(std::string_view target) {
  return std::find(std::begin(kCustomCallTargets), std::end(kCustomCallTargets), target) !=
         std::end(kCustomCallTargets);
}

std::string CustomCallRefusal(std::string_view target) {
  // Where the target's code lives, by the prefixes JAX's lowerings use.
  struct Family {
    std::string_view prefix, where;
  };
  static constexpr Family kFamilies[] = {
      {"lapack_", "LAPACK on the host"},
      {"cu", "a CUDA library (cuBLAS, cuSOLVER, cuDNN)"},
      {"hip", "a ROCm library"},
      {"tpu_custom_call", "a Pallas / Mosaic kernel"},
      {"ducc_", "DUCC's FFT on the host"},
  };
  std::string_view where = "code of an XLA backend";
  for (const Family& f : kFamilies)
    if (target.substr(0, f.prefix.size()) == f.prefix) {
      where = f.where;
      break;
    }
  std::string supported;
  for (std::string_view t : kCustomCallTargets) supported += (supported.empty() ? "@" : ", @") + std::string(t);
  return "unsupported custom_call @" + std::string(target) + " (" + std::string(where) +
         "; tpumesh runs StableHLO ops on its own kernels, and of custom calls only " + supported + ")";
}

const OpEntry* FindOp(std::string_view name) {
  const auto& t = OpTable();
  const auto it = std::lower_bound(t.begin(), t.end(), name,
                                   [](const OpEntry& e, std::string_view n) { return e.name < n; });
  return it != t.end() && it->name == name ? &*it : nullptr;
}

ElementwiseCost CostPerElement(Price p) {
  switch (p) {
    case Price::kFlop: return {1, 0};
    case Price::kTranscendental: return {0, 1};
    case Price::kErf: return {29, 0};
    case Price::kErfInv: return {37, 2};
    default: return {};
  }
}

}  // namespace tpumesh::hlo
