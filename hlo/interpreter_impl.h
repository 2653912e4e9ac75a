// The StableHLO interpreter's insides (hlo/interpreter.h's RunFunction):
// one Interpreter per run of a function on one device, holding the module,
// the device, the options and what is known about the values (which are
// written to HBM, which may stay broadcast views, when each dies). Each op
// runs by its registry entry (hlo/ops.h). hlo/'s internal header; the
// methods live by concern:
//   interpreter.cc       values, regions, memory, dispatch (RunOp, Compute)
//   interp_data.cc       elementwise ops and data movement
//   interp_matmul.cc     dot_general and convolution
//   interp_linalg.cc     fft, triangular_solve and cholesky
//   interp_reduce.cc     reduce, reduce_window, sort, top_k
//   interp_scatter.cc    gather, scatter, select_and_scatter
//   interp_collective.cc the collectives over the device's pmap
//   interp_control.cc    calls, loops, branches, manual computations, custom
//                        calls, and the shardings XLA's partitioner would make
//   interp_price.cc      the cost model's record of each op, with fusion
// The verifier (verifier.cc) runs before any of it.
#ifndef TPUMESH_HLO_INTERPRETER_IMPL_H_
#define TPUMESH_HLO_INTERPRETER_IMPL_H_

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "hlo/attrs.h"
#include "hlo/contraction.h"
#include "hlo/elementwise.h"
#include "hlo/interpreter.h"
#include "hlo/op_shapes.h"
#include "hlo/ops.h"
#include "hlo/partition.h"
#include "hlo/sharding.h"
#include "kernels/matmul.h"
#include "mesh/collectives.h"

namespace tpumesh::hlo {

// The op of a region's body when the body is one binary elementwise op
// applied to the block's two arguments (a plain sum, max, ...), else null.
const Op* SimpleBody(const Region& r);

// A scatter's dimension numbers checked against its operand and result
// types, and what follows from them (the StableHLO spec's index
// arithmetic): Verify asks it before anything runs, the run uses it.
struct ScatterLayout {
  size_t k = 0;  // inputs (and updates, and results)
  ScatterAttrs attrs;
  Dims update_scatter_dims, window_operand, index_batch_dims;
  int64_t index_vector = 1;  // the index vector's length
};
StatusOr<ScatterLayout> ScatterLayoutOf(const Op& op);

// The most outputs along one spatial dimension a convolution's price counts
// taps for (ValidTaps is linear in them): past it, pricing fails with
// RESOURCE_EXHAUSTED instead of running for hours on a 600-byte module.
inline constexpr int64_t kMaxPricedPositions = int64_t{1} << 27;

// XLA's valid_position_count of spatial dimension k of a convolution: the
// (output, tap) pairs whose tap lands on an element of the (dilated,
// padded) input, counted in O(1) per output.
StatusOr<double> ValidTaps(const ConvShape& cs, size_t k);

class Interpreter {
 public:
  Interpreter(const Module& m, const DeviceSite& site, const Options& o) : m_(m), site_(site), o_(o) {
    if (o_.ops) MarkMaterialized();
    MarkViews();
    products_ = PlanProducts(m_);
  }

  // The entry function: its arguments split as their shardings say
  // (hlo/partition.h; pricing only), and the collectives that make each
  // result as its sharding says.
  StatusOr<std::vector<Tensor>> Entry(const Func& f, std::vector<Tensor> args);

  StatusOr<std::vector<Tensor>> Call(const Func& f, std::vector<Tensor> args);

 private:
  using Env = std::unordered_map<int, Tensor>;

  Status Fail(const Op& op, const std::string& what) const {
    return InvalidArgumentError(m_.Where(op.loc) + ": " + op.name + ": " + what);
  }
  Status At(const Op& op, const Status& s) const {
    if (s.ok()) return s;
    return Status(s.code(), m_.Where(op.loc) + ": " + op.name + ": " + s.message());
  }
  template <typename T>
  StatusOr<T> At(const Op& op, StatusOr<T> v) const {
    if (v.ok()) return v;
    return At(op, v.status());
  }

  // The broadcast_in_dim results that may stay views (Tensor::repeat): every
  // consumer an elementwise op.
  void MarkViews();

  // How many times each element of a broadcast_in_dim's operand repeats when
  // the broadcast only appends trailing dimensions (the operand's non-unit
  // dims are the result's leading ones, in order): the result's elements
  // after that prefix; 0 when the broadcast has another form.
  static int64_t TrailingRepeat(const Type& in, const Type& out, const Dims& bd);

  // Values whose last use in a block is op i (uses in nested regions count
  // for the op that holds them), defined in that block: freed after op i.
  const std::vector<std::vector<int>>& FreeLists(const Block& b);

  // Runs a one-block region with `args` bound to its arguments; returns what
  // its terminator returns.
  StatusOr<std::vector<Tensor>> RunRegion(const Region& r, std::vector<Tensor> args, Env& env);

  StatusOr<std::vector<const Tensor*>> Operands(const Op& op, Env& env);

  // The values a region (and the regions inside it) uses but does not
  // define: MLIR lets a sort's comparator or a reduce's body name a value
  // of the function around it (jax's programs reach us with their constants
  // hoisted to the function's top). Computed once per region.
  const std::vector<int>& Captures(const Region& r);
  // A fresh env for running region r on its own (per element: a reduce's
  // body, a sort's comparator, a select), holding the values r captures
  // from the env of the op that holds it (enclosing_).
  Env RegionEnv(const Region& r);

  // Whether a dry run computes op: its values are small and the run's
  // budget (kDryRunComputeWork) has room for its DryRunWork, which it spends.
  bool Small(const Op& op);

  // The devices' values live in this host's memory: a result the host
  // cannot hold is refused (RESOURCE_EXHAUSTED) instead of the process being
  // killed when its pages are touched. Large results only (64 MiB and more;
  // /proc/meminfo is read each time); the devices of a pmap allocate at
  // once, so bytes granted but not yet written count as taken.
  static Status CheckHostMemory(int64_t bytes);

  // An operand this elementwise op may write its result into: its last use
  // is here, nothing else holds its bytes, and it has the result's size and
  // element width (out[i] depends on in[i] alone, so in place is safe).
  int Donor(const Op& op, const OpEntry& e, const std::vector<const Tensor*>& in, const std::vector<int>& dying) const;

  Status RunOp(const Op& op, Env& env, const std::vector<int>& dying = {});
  // The env of the op being run (set by RunOp): what RegionEnv captures from.
  Env* enclosing_ = nullptr;
  std::unordered_map<const Region*, std::vector<int>> captures_;

  // ---------------------------------------------------------------- compute

  Status Compute(const OpEntry& e, const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out);

  void ParallelElements(int64_t n, const std::function<void(int64_t, int64_t)>& body);

  // A broadcast view (Tensor::repeat) written out in full.
  StatusOr<Tensor> Dense(const Tensor& v);

  Status Elementwise(const Op& op, const ScalarFn& fn, const std::vector<const Tensor*>& operands, Tensor& out);

  // XLA's rewrites of products (hlo/contraction.h) on an elementwise op's
  // operands: an unrounded product operand of an add or subtract becomes
  // its factors (in[0], in[1]; the other operand in[2]) and `form` the fma
  // to compute; of a multiply, its non-constant factor, with the other
  // operand replaced by the constants' product (a scalar, kept in `held`).
  Status Uncontract(const Op& op, std::vector<const Tensor*>& in, std::vector<Tensor>& held, MulAdd& form);
  // The result of a multiply that PlanProducts marked: its factors, unrounded.
  StatusOr<Tensor> Unrounded(const Op& op, const std::vector<const Tensor*>& in);

  // Copies with an index map: out[idx] = in[map(idx)] for every output index.
  // `src_of` gets the output's multi-index and returns the input's linear
  // element index or -1 (a zero / padding value written by the caller).
  template <typename F>
  void IndexCopy(const Tensor& in, Tensor& out, F&& src_of, const uint8_t* fill = nullptr) {
    const int w = ElementTypeBytes(out.type.element);
    const Dims& od = out.type.dims;
    const int64_t n = out.num_elements();
    const uint8_t* src = static_cast<const uint8_t*>(in.data.raw());
    uint8_t* dst = static_cast<uint8_t*>(out.data.mutable_raw());
    ParallelElements(n, [&](int64_t b, int64_t e) {
      Dims idx(od.size(), 0);
      int64_t rem = b;
      for (int k = static_cast<int>(od.size()) - 1; k >= 0; --k) {
        idx[k] = rem % od[k];
        rem /= od[k];
      }
      for (int64_t i = b; i < e; ++i) {
        const int64_t s = src_of(idx);
        if (s >= 0) std::memcpy(dst + i * w, src + s * w, static_cast<size_t>(w));
        else if (fill) std::memcpy(dst + i * w, fill, static_cast<size_t>(w));
        for (int k = static_cast<int>(od.size()) - 1; k >= 0; --k) {
          if (++idx[k] < od[k]) break;
          idx[k] = 0;
        }
      }
    });
  }

  // out[o] = in[base + sum_k o[k] * stride[k]] (strides in elements, 0 for
  // a broadcast dimension, negative for a reversed one): the copy of
  // broadcast_in_dim, transpose, reverse, slice and dynamic_slice, one run
  // along the last dimension at a time.
  void AffineCopy(const Tensor& in, Tensor& out, int64_t base, const Dims& stride);

  // Reads a scalar integer tensor (dynamic_slice's starts, case's index).
  static int64_t ScalarInt(const Tensor& t);
  // Inline: read per index element (gather, scatter, integer dot_general).
  static std::vector<int64_t> IntegersInOrder(const Tensor& t, const Dims& order);
  static int64_t IntAt(const Tensor& t, int64_t i) {
    const void* p = t.data.raw();
    switch (t.type.element) {
      case ElementType::kI8: return static_cast<const int8_t*>(p)[i];
      case ElementType::kI16: return static_cast<const int16_t*>(p)[i];
      case ElementType::kI32: return static_cast<const int32_t*>(p)[i];
      case ElementType::kI64: return static_cast<const int64_t*>(p)[i];
      case ElementType::kU8: case ElementType::kPred: return static_cast<const uint8_t*>(p)[i];
      case ElementType::kU16: return static_cast<const uint16_t*>(p)[i];
      case ElementType::kU32: return static_cast<const uint32_t*>(p)[i];
      case ElementType::kU64:
        return static_cast<int64_t>(
            std::min<uint64_t>(static_cast<const uint64_t*>(p)[i], INT64_MAX));
      default: return 0;
    }
  }

  Status Data(Run run, const Op& op, const std::vector<const Tensor*>& in, Tensor& out);

  // ---- dot_general: lhs -> [B, M, K], rhs -> [B, K, N] (copies only when
  // the dims are not already in that order), one packed matmul per batch.
  kernels::Precision MatmulPrecision(const Op& op) const;

  // t as f32 with its dims reordered to `order`: t's own bytes when it is
  // f32 in that order already, else a converted and permuted copy (kept in
  // `storage`).
  struct F32Operand {
    const float* data = nullptr;
    Tensor storage;
  };
  StatusOr<F32Operand> AsF32Ordered(const Tensor& t, const Dims& order);
  // Writes f32 values into `out` (converting to its element type).
  void StoreF32(const float* v, Tensor& out);
  // n elements converted, spread over the threads (a numeric convert
  // between valid types cannot fail).
  void ConvertParallel(ElementType from, const void* in, ElementType to, int64_t n, void* out);

  Status DotGeneral(const Op& op, const Tensor& l, const Tensor& r, Tensor& out);

  Status IntegerConvolution(const ConvShape& s, const Tensor& l, const Tensor& r, Tensor& out);
  Status ComplexDot(const Tensor& l, const Tensor& r, Tensor& out, const DotDims& d, int64_t B, int64_t M,
                    int64_t K, int64_t N);
  Status IntegerDot(const Tensor& l, const Tensor& r, Tensor& out,
                    const DotDims& d, int64_t B, int64_t M, int64_t K,
                    int64_t N);

  // ---- convolution: the input as [N, spatial..., C], the kernel as
  // [spatial..., I, O]; per group an im2col of output pixels x (taps, I/g)
  // times the kernel's [(taps, I/g), O/g] on the matmul kernel.

  Status Convolution(const Op& op, const Tensor& l, const Tensor& r, Tensor& out);

  // ---- fft, triangular_solve and cholesky on kernels/fft.h,
  // kernels/triangular_solve.h and kernels/cholesky.h, by their typed
  // attributes.
  Status Fft(const Op& op, const Tensor& x, Tensor& out);
  Status TriangularSolve(const Op& op, const Tensor& a, const Tensor& b, Tensor& out);
  Status Cholesky(const Op& op, const Tensor& a, Tensor& out);
  // hlo/interp_rng.cc: XLA:CPU's Philox bits and the next state.
  Status RngBitGenerator(const Op& op, const Tensor& state, std::vector<Tensor>& out);

  // ---- reductions. A body that is one binary op runs as EvalElementwise on
  // runs of elements; any other body runs through the interpreter per
  // element (argmax's variadic reduce).
  Status ApplyBody(const Region& body, const Op* simple,
                   const std::vector<const uint8_t*>& acc_in,
                   const std::vector<const uint8_t*>& x,
                   const std::vector<uint8_t*>& acc_out,
                   const std::vector<Type>& scalar_types);

  // acc = body(acc, x) for the k values of one reduction step, where x_i is
  // element `off` of in[first + i]; the result goes to nxt and is swapped in.
  Status Fold(const Region& body, const Op* simple,
              const std::vector<const Tensor*>& in, size_t first, int64_t off,
              const std::vector<Type>& st,
              std::vector<std::vector<uint8_t>>& acc,
              std::vector<std::vector<uint8_t>>& nxt);

  Status Reduce(const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out);

  // A reduce whose body is one binary op: the input seen as [O, R, I] (the
  // reduced dims R between kept dims O and I; transposed to [O, R, 1] first
  // when the reduced dims are not adjacent), each output folded over r = 0,
  // 1, ... in order (the generic path's order, so the same bits), as vector
  // ops over the outputs.
  Status ReduceSimple(const Op& op, const Op* body, const Tensor& x,
                      const Tensor& init, const Dims& kept, const Dims& red,
                      Tensor& out);

  // sort: every operand permuted the same way along `dimension`, in the
  // order the comparator region defines (lhs_0, rhs_0, lhs_1, rhs_1, ...
  // -> i1 "lhs first"), stable (is_stable=false allows any order; stable is
  // one of them). A merge sort: a comparator that is not a strict weak order
  // gives some order, never a read out of bounds.
  Status Sort(const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out);

  // chlo.top_k: the k largest along the last dimension, largest first, and
  // their indices; equal values keep their order. Floats compare in IEEE
  // total order (NaN above +inf, -0 below +0), as XLA's TopK.
  Status TopK(const Op& op, const Tensor& x, std::vector<Tensor>& out);
  static Status TopKRow(const std::vector<double>& key,
                        std::vector<int64_t>& idx, int64_t k, const Tensor& x,
                        int64_t r, int64_t n, int w, std::vector<Tensor>& out);

  Status ReduceWindow(const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out);

  // ---- gather and scatter, by the StableHLO spec's index arithmetic.
  Status Gather(const Op& op, const Tensor& operand, const Tensor& indices, Tensor& out);

  // ---- select_and_scatter (the gradient of max pooling): for each source
  // element, its window over the operand (padding never selected), the
  // element the select region keeps (scanning the window in row-major
  // order, the current choice kept while select(current, next) holds), and
  // the scatter region folds the source into the result there, the sources
  // in row-major order; the result starts as the init value.
  Status SelectAndScatter(const Op& op, const std::vector<const Tensor*>& in, Tensor& out);

  Status Scatter(const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out);

  // ---- collectives: every device's operand is gathered to every device
  // (mesh AllGather over all axes, as raw bytes), and each device assembles
  // its result from its replica group's values, in group order: the same
  // bits on every member, for any grouping. Priced on the ICI by the group.
  StatusOr<std::vector<std::vector<int64_t>>> Groups(const Op& op) const;

  StatusOr<std::vector<int64_t>> MyGroup(const Op& op) const;
  // collective_permute's source_target_pairs name devices of the mesh (run
  // and pricing both ask: one check).
  Status CheckPairs(const Op& op) const;

  // Every device's copy of x, indexed by device id.
  StatusOr<std::vector<const uint8_t*>> GatherAll(const Tensor& x, mesh::Array* keep);

  Status Collective(Run run, const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out);

  // y = block `index` of `n` along `dim` of the array at src (of type t).
  static Status CopyBlock(const uint8_t* src, const Type& t, Tensor& y, int64_t dim, int64_t index, int64_t n);

  // ---------------------------------------------------------------- control

  StatusOr<std::vector<Tensor>> Control(Run run, const Op& op, const std::vector<const Tensor*>& in, Env& env);

  // A dry run's counted loop (JAX's fori_loop and scan): a loop argument
  // compared against a constant (or an argument the body returns as it
  // is) and advanced by a constant each trip, from a known start. trips -1:
  // not one. Loops of more than kTripsPricedOnce trips are priced by one
  // trip: its records count for every trip (OpRecord::repeat), the counter
  // leaves with its last value, the other results are not known.
  struct CountedLoop {
    int64_t trips = -1;
    size_t counter = 0;
    int64_t final_value = 0;
  };
  static constexpr int64_t kTripsPricedOnce = 64;
  StatusOr<CountedLoop> Counted(const Op& op, const std::vector<Tensor>& args);
  StatusOr<std::vector<Tensor>> PriceCountedLoop(const Op& op, const CountedLoop& c, std::vector<Tensor> args,
                                                 Env& env);

  // A device's shard of a global value and back, for a sharding.
  StatusOr<Tensor> Slice(const Tensor& global, const Sharding& s, const Type& local, const Op& op);
  StatusOr<Tensor> Assemble(const Tensor& local, const Sharding& s, const Type& global, const Op& op);

  StatusOr<std::vector<Tensor>> Manual(const Op& op, std::vector<Tensor> args, Env& env);

  StatusOr<std::vector<Tensor>> CustomCall(const Op& op, std::vector<Tensor> args);

  // ---------------------------------------------------------------- partitioning

  // How a sharding attribute (GSPMD's mhlo.sharding string in an attribute
  // dict, or Shardy's sdy.sharding) splits a value of `t` on this device;
  // replicated when there is none or it cannot be read.
  Split DeclaredSplit(const Attr& attrs, const Type& t) const;
  Split SplitOfMhlo(const std::string& text, const Type& t) const;
  Split SplitOfSdy(const Attr& sharding, const Type& t) const;

  // A value made to hold `want` (a sharding constraint, a result's
  // sharding): free when it only splits further (each device keeps a piece
  // of what it has), else an all-gather of its pieces first.
  void Constrain(const Location& loc, const std::string& what, Tensor& t, const Split& want);

  // The op's splits (hlo/partition.h): sets the results' splits, prices the
  // all-gathers of operands the partitioned op needs whole, and gives the
  // local types the op is priced on. Partial sums are returned in
  // `reduced_over`, priced after the op by PricePartialSums.
  void Partition(const Op& op, const std::vector<const Tensor*>& in,
                 std::vector<Tensor>& out, std::vector<Type>& in_local,
                 std::vector<Type>& out_local,
                 std::vector<DeviceGroup>& reduced_over);
  void PricePartialSums(const Op& op, const std::vector<Type>& out_local, const std::vector<DeviceGroup>& groups);

  // A collective the partitioned program adds (not in the module): priced
  // on the ICI like the module's own; an all-reduce's sums count as flops,
  // as XLA counts them.
  void PriceReshard(const Location& loc, mesh::CollectiveKind kind,
                    const Type& local, const std::vector<int>& members,
                    const std::string& why);

  // ---------------------------------------------------------------- pricing

  // Fusion, as XLA does it on a TPU: elementwise and layout ops feed their
  // consumers without a trip through HBM (loop fusion, input fusion into a
  // reduce, output fusion after a matmul or conv). A value is written to
  // HBM, and read back by each consumer, only when some consumer cannot
  // take it fused (a matmul, conv, gather, collective, call, loop or the
  // return); arguments live in HBM.
  static bool Fusible(const Op& op);
  void MarkMaterialized();
  // Attention as our models price it (models/nn.h): a dot_general operand
  // that is a softmax (an exponential and a reduce, fused) of another
  // dot_general's product, and feeds that dot_general alone, is not written
  // to HBM. Everything upstream of it back to the scores is fused already,
  // so the ops move Q, K, V and the output, as our Attention record does;
  // that P V dot_general's record carries the attention's AttentionSite, so
  // --attention prices the rest (mesh/cost_model.h FusedAttentionTraffic:
  // flash's K/V re-reads and rescaling, or standard's score traffic).
  void MarkAttention();
  double HbmBytesRead(const Op& op, const std::vector<Type>& in) const;
  double HbmBytesWritten(const Op& op, const std::vector<Type>& out) const;

  // Appends the op's record; an op it cannot price is an error naming
  // why (never a record dropped).
  Status Price(const OpEntry& e, const Op& op, const std::vector<Type>& in, const std::vector<Type>& out,
               double host_seconds = 0);

  // Appends `r` to Options::ops, or, when the same op (`site`) executed
  // before with the same record, counts it there (OpRecord::repeat; its
  // host_seconds the mean): a loop's ops are one record each however many
  // trips it makes, so memory stays O(ops in the module). Returns the
  // record's index.
  size_t Record(const void* site, mesh::OpRecord r);

  // The MXU's share of a record: `count` products of [m, k] x [k, n], each
  // moving its part of the operands and result, at the op's precision.
  double OperandHbmBytes(const Op& op, const std::vector<Type>& in, size_t i) const;
  void AddMxu(const Op& op, double m, double n, double k, double count,
              double a_bytes, double b_bytes, double out_bytes,
              mesh::OpRecord& r) const;

  kernels::Precision PricePrecision(const Op& op) const;

  void PriceCollective(Run run, const Op& op, const Type& x, const std::vector<int64_t>& group, mesh::OpRecord& r);

  const Module& m_;
  DeviceSite site_;
  Options o_;
  int call_depth_ = 0;
  int64_t executed_ = 0;
  double dry_run_work_ = 0;  // spent by Small
  bool dry_run_budget_spent_ = false;  // Small refused an op for the budget
  std::string last_sharding_;
  std::vector<bool> materialized_;  // value id -> written to HBM (pricing)
  // An attention's P V dot_general (MarkAttention) -> which operand is the
  // softmax's P (0 or 1): priced with its AttentionSite.
  std::unordered_map<const Op*, int> attention_dots_;
  std::vector<bool> view_ok_;       // value id -> may be a Tensor::repeat view
  std::vector<Product> products_;   // value id -> how XLA:CPU computes it (hlo/contraction.h)
  // Overlap (mesh/cost_model.h): value id -> the async_id of the collective
  // record that made it (0: none), and the ids read by ops since the last
  // record, which the next record awaits (Record): an op's reads, or a
  // control op's (a loop, a call), whose first priced op then waits.
  std::vector<int64_t> async_of_value_;
  std::vector<int64_t> reads_;
  std::unordered_map<const Block*, std::vector<std::vector<int>>> free_lists_;
  // (site, name, shape) -> its record's index in Options::ops (Record).
  std::unordered_map<std::string, size_t> record_index_;
  // op -> the local types it was last priced on and its record (Price).
  struct Priced {
    std::vector<Type> in, out;
    size_t index = 0;
  };
  std::unordered_map<const Op*, Priced> last_priced_;
};

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_INTERPRETER_IMPL_H_
