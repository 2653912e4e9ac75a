// Running a StableHLO module (hlo/module.h) on one emulated device:
// an interpreter over the module's ops, each computed for real on the host
// (dot_general and convolution on kernels/'s MXU matmul) and priced as the
// chip would run it (mesh/cost_model.h). hlo/program.h runs a module over a
// whole mesh.
//
// The ops are one registry (hlo/ops.h: each op's check, run, price and
// sharding rule, resolved per op when the module is read); Verify checks a
// module against it before anything runs.
//
// Contract:
// - Values are Tensors: a StableHLO type and its bytes, little-endian, row
//   major, on the device (counted against its HBM: a device out of room
//   fails with RESOURCE_EXHAUSTED naming it) or on the host. A value is
//   freed after its last use.
// - Arithmetic follows XLA on a CPU: f16 and bf16 elementwise math in f32,
//   rounded once per op; denormals flushed (FTZ/DAZ) in every op; a
//   multiply feeding one add or subtract in the same kernel fused into an
//   fma, chained constant factors folded (hlo/contraction.h); f32 dot_general and convolution in f32 (every
//   product and sum in f32) unless Options::mxu_precision, where each reads
//   its precision_config as a TPU's MXU would (DEFAULT: operands rounded to
//   bf16, one pass; HIGH: bf16x3; HIGHEST: f32). Integer arithmetic wraps;
//   shifts past the width give 0 (or the sign for arithmetic right shifts);
//   integer division by zero gives -1 (remainder: the dividend), as XLA.
//   complex<f32> / complex<f64> compute in their part type as XLA's
//   elemental IR emitter does (hlo/elementwise_complex.h).
// - Same bits for any thread count: work is cut by output element only.
// - Options::dry_run: shapes, HBM and prices only; values with more than
//   kDryRunComputeElements elements are not computed (their bytes are
//   unspecified, mapped lazily), smaller ones are (loop counters and
//   indices, so a fori_loop's trip count is still right) until the run has
//   computed kDryRunComputeWork. Collectives are
//   priced, not run.
// - Errors name the op and its place in the MLIR text: "f.mlir:12:5:
//   stablehlo.dot_general: ...".
#ifndef TPUMESH_HLO_INTERPRETER_H_
#define TPUMESH_HLO_INTERPRETER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "hlo/elementwise.h"
#include "hlo/partition.h"
#include "hlo/module.h"
#include "mesh/array.h"
#include "mesh/collectives.h"
#include "mesh/cost_model.h"

namespace tpumesh::hlo {

inline constexpr int64_t kDryRunComputeElements = 4096;
// What a dry run computes at most in all, in DryRunWork's units (element
// steps: about a second of host time): past it, small values are not
// computed either (a data-dependent loop of small ops ends priced as one
// trip, with the warning of a loop whose count depends on the inputs).
inline constexpr double kDryRunComputeWork = 268435456.0;  // 2^28
// What computing `op` costs a dry run: its operands' and results' elements
// (times its regions' ops, which run per element), its window folds and
// its multiply-adds (dot_general, convolution).
double DryRunWork(const Op& op);
// Options::max_executed_ops of simulate --stablehlo: a few seconds of
// pricing (counted loops are priced by one trip, so only a loop that never
// ends, or a huge unrolled module, reaches it).
inline constexpr int64_t kMaxDryRunOps = int64_t{1} << 20;

struct UnroundedProduct;

struct Tensor {
  Type type;
  mesh::Array data;  // u8 [size_bytes], or num_elements / repeat elements
  // > 0: each element of `data` stands for `repeat` consecutive elements
  // (a broadcast_in_dim along trailing dimensions, the whole shape for a
  // scalar, whose every consumer is elementwise: they read it a row at a
  // time, so the broadcast never fills memory). Internal to the
  // interpreter: such a view never leaves it.
  int64_t repeat = 0;
  // False when its bytes are not the value's: in a dry run, an argument, a
  // value too large to compute, or one computed from such a value. A dry
  // run's while loop whose condition is not known is priced once (Options::warn).
  bool known = true;
  // How XLA's SPMD partitioner would split this value over the devices
  // (hlo/partition.h): pricing only, the bytes above are always the whole
  // value. Empty: every device holds all of it.
  Split split;
  // Set: a product XLA:CPU never rounds (hlo/contraction.h), held as its
  // two factors for its one consumer; `data` is then empty. Internal to the
  // interpreter, like `repeat`.
  std::shared_ptr<const UnroundedProduct> product;

  int64_t num_elements() const { return type.num_elements(); }
  template <typename T> const T* as() const { return static_cast<const T*>(data.raw()); }
  template <typename T> T* mutable_as() { return static_cast<T*>(data.mutable_raw()); }
};

// factor[0] * factor[1], each of the product's type or a scalar; for a
// product folded into its consumer, factor[1] is the constant.
struct UnroundedProduct {
  Tensor factor[2];
};

// A tensor of `type` on `device` (the host when null), zero-filled; lazy:
// pages mapped only when touched (a dry run's large values).
StatusOr<Tensor> NewTensor(const Type& type, mesh::Device* device, bool lazy = false,
                           std::string_view what = "value");

struct Options {
  bool dry_run = false;
  bool mxu_precision = false;  // see the contract above
  int threads = 0;             // 0: the caller's TBB arena (the device's inside a pmap)
  // When set, every op executed appends its priced record (OpRecord::module
  // is JAX's name scope from the op's location, name the op).
  std::vector<mesh::OpRecord>* ops = nullptr;
  // Whose math to reproduce bit for bit where XLA generations differ
  // (chlo.erf_inv, log): DetectGeneration's answer unless the user said.
  XlaGeneration generation = XlaGeneration::kJax04;
  // Called after each op device 0 executes, with the count so far (progress
  // for a long run; from device 0's thread). Null: none.
  std::function<void(int64_t executed)> on_op;
  // Polled before each op: once it reads true, the run stops with
  // Cancelled (Ctrl-C in the Python module). Null: never.
  const std::atomic<bool>* cancel = nullptr;
  // Ops executed at most (loops included) before the run stops with an
  // error naming the op (RESOURCE_EXHAUSTED): a dry run of an endless loop
  // ends in seconds (kMaxDryRunOps), a run after 2^32 ops.
  int64_t max_executed_ops = int64_t{1} << 32;
  // A warning the run goes on after (one line, "FILE:LINE:COL: op: ..."):
  // a dry run's loop whose trip count depends on the inputs, priced once.
  // Null: not told.
  std::function<void(const std::string&)> warn;
};

// The XLA generation that wrote `m`: the current jax's when the module has
// sdy ops or names its results "result[...]" (jax.result_info), jax 0.4's
// otherwise ("[0]").
XlaGeneration DetectGeneration(const Module& m);

// The body applications of a reduce_window (results x window) or a
// select_and_scatter (source x window), 0 for any other op: what bounds
// their time, not their tensors' sizes (a window may cover mostly padding).
double WindowFolds(const Op& op);
// The most WindowFolds `run` computes in one op (Verify refuses more
// before anything runs; simulate --stablehlo prices any).
inline constexpr double kMaxWindowFolds = 4294967296.0;  // 2^32

// What a module is verified for: kRun computes every op (`run`); kPrice
// prices them without computing (simulate --stablehlo), so what is priced
// but not computed here passes (a convolution's batch_group_count > 1,
// hlo/op_shapes.h's ConvolutionComputable).
enum class VerifyFor : uint8_t { kRun, kPrice };

// Every op of `m` (in every function and every region, reached or not) is
// in the table (hlo/ops.h), its operand and result types and attributes
// are as the op requires, every func.call names a function of the module
// with matching types, @main exists. The first problem, as one
// "FILE:LINE:COL: op: what" error (Unimplemented for an op not supported),
// before anything runs.
Status Verify(const Module& m, VerifyFor purpose = VerifyFor::kRun);

// Where a run is: the device it computes on, and the collectives of its
// pmap (null when the module has none or in a dry run).
struct DeviceSite {
  mesh::Device* device = nullptr;
  mesh::DeviceContext* collectives = nullptr;
  int device_id = 0;
  int num_devices = 1;
  // The mesh's axes (names and sizes, row-major: device id = position), for
  // sdy.manual_computation's shardings.
  std::vector<mesh::MeshAxis> axes;
  // Where the devices sit, for pricing collectives (null: not priced on the ICI).
  const mesh::Topology* topology = nullptr;
};

// Runs func @name of a verified module with `args` (one per argument, of
// its types) and returns its results.
StatusOr<std::vector<Tensor>> RunFunction(const Module& m, std::string_view name, std::vector<Tensor> args,
                                          const DeviceSite& site, const Options& options);

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_INTERPRETER_H_
