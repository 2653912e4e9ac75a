// The StableHLO interpreter (hlo/interpreter.h): a walk over a function's
// ops with an environment of values, each op dispatched by its class in the
// op table (hlo/ops.h), priced as it runs.
#include "hlo/interpreter.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <unordered_map>

#include "base/host_memory.h"
#include "base/printable.h"
#include "hlo/elementwise.h"
#include "hlo/op_shapes.h"
#include "hlo/ops.h"
#include "hlo/partition.h"
#include "hlo/sharding.h"
#include "kernels/matmul.h"
#include "kernels/ops_parallel.h"

namespace tpumesh::hlo {

StatusOr<Tensor> NewTensor(const Type& type, mesh::Device* device, bool lazy, std::string_view what) {
  if (type.kind != Type::Kind::kTensor)
    return UnimplementedError("values of type " + type.ToString() + " (tuples, tokens) are not supported");
  Tensor t;
  t.type = type;
  const int64_t bytes = type.size_bytes();
  if (device) {
    TPUMESH_ASSIGN_OR_RETURN(t.data, mesh::Array::Allocate(*device, mesh::DType::kU8, {bytes}, what, lazy));
  } else {
    t.data = lazy ? mesh::Array::LazyZeros(mesh::DType::kU8, {bytes}) : mesh::Array::Host(mesh::DType::kU8, {bytes});
  }
  return t;
}

namespace {


// The op of a region's body when the body is one binary elementwise op
// applied to the block's two arguments (a plain sum, max, ...), else null.
const Op* SimpleBody(const Region& r) {
  if (r.blocks.size() != 1) return nullptr;
  const Block& b = r.blocks[0];
  if (b.args.size() != 2 || b.ops.size() != 2) return nullptr;
  const Op& op = b.ops[0];
  const Op& ret = b.ops[1];
  if (op.operands.size() != 2 || op.results.size() != 1 || ret.operands.size() != 1 || ret.operands[0] != op.results[0])
    return nullptr;
  const bool args = (op.operands[0] == b.args[0] && op.operands[1] == b.args[1]) ||
                    (op.operands[0] == b.args[1] && op.operands[1] == b.args[0]);
  if (!args) return nullptr;
  const OpEntry* e = EntryOf(op);
  if (!e || e->scalar.kind != ScalarFn::Kind::kBinary) return nullptr;
  switch (e->scalar.bin) {
    case Bin::kAdd: case Bin::kMul: case Bin::kMax: case Bin::kMin: case Bin::kAnd: case Bin::kOr: case Bin::kXor:
      return &op;
    default:
      return nullptr;
  }
}

// ---------------------------------------------------------------- verify

class Verifier {
 public:
  explicit Verifier(const Module& m) : m_(m) {}
  Status Run() {
    const Func* main = m_.FindFunc("main");
    if (!main) return InvalidArgumentError(m_.file + ": no @main function");
    for (const Func& f : m_.funcs) TPUMESH_RETURN_IF_ERROR(Region(f.body, &f));
    return OkStatus();
  }

 private:
  Status Fail(const Op& op, const std::string& what) const {
    return InvalidArgumentError(m_.Where(op.loc) + ": " + op.name + ": " + what);
  }
  Status Region(const hlo::Region& r, const Func* f) {
    for (const Block& b : r.blocks) {
      for (size_t i = 0; i < b.args.size(); ++i) TypeOf(b.args[i]) = &b.arg_types[i];
      for (const Op& op : b.ops) {
        for (size_t i = 0; i < op.operands.size(); ++i) {
          const Type* t = TypeOf(op.operands[i]);
          if (t && !(*t == op.operand_types[i]))
            return Fail(op, "operand " + std::to_string(i) + " is declared " + op.operand_types[i].ToString() +
                                " but " + m_.value_names[static_cast<size_t>(op.operands[i])] + " is " + t->ToString());
        }
        for (size_t i = 0; i < op.results.size(); ++i) TypeOf(op.results[i]) = &op.result_types[i];
        TPUMESH_RETURN_IF_ERROR(OneOp(op, f));
        for (const hlo::Region& inner : op.regions) TPUMESH_RETURN_IF_ERROR(Region(inner, nullptr));
      }
    }
    return OkStatus();
  }
  // The type a value was defined with (null until its definition is seen).
  const Type*& TypeOf(int v) {
    if (types_.size() < static_cast<size_t>(m_.num_values)) types_.resize(static_cast<size_t>(m_.num_values), nullptr);
    return types_[static_cast<size_t>(v)];
  }
  std::vector<const Type*> types_;
  Status OneOp(const Op& op, const Func* f) {
    const OpEntry* e = EntryOf(op);
    if (!e)
      return UnimplementedError(m_.Where(op.loc) + ": unsupported op " + Quoted(op.name) +
                                " (docs/stablehlo.md lists the supported ops)");
    const int n_in = static_cast<int>(op.operands.size()), n_out = static_cast<int>(op.results.size());
    if (n_in < e->min_operands || (e->max_operands >= 0 && n_in > e->max_operands))
      return Fail(op, "takes " +
                          (e->max_operands == e->min_operands ? std::to_string(e->min_operands)
                           : e->max_operands < 0            ? "at least " + std::to_string(e->min_operands)
                                                             : std::to_string(e->min_operands) + " to " +
                                                                   std::to_string(e->max_operands)) +
                          " operands, has " + std::to_string(n_in));
    if (e->results >= 0 && n_out != e->results)
      return Fail(op, "has " + std::to_string(e->results) + " result(s), not " + std::to_string(n_out));
    if (e->check == Check::kWhile && n_out != n_in) return Fail(op, "needs as many results as operands");
    for (const Type& t : op.result_types)
      if (t.kind != Type::Kind::kTensor) return Fail(op, "results of type " + t.ToString() + " are not supported");
    for (const Type& t : op.operand_types)
      if (t.kind != Type::Kind::kTensor) return Fail(op, "operands of type " + t.ToString() + " are not supported");
    const int n_regions = static_cast<int>(op.regions.size());
    if (e->min_regions == e->max_regions && n_regions != e->min_regions)
      return Fail(op, "needs " + std::to_string(e->min_regions) + " region(s), has " + std::to_string(n_regions));
    if (n_regions < e->min_regions) return Fail(op, "needs at least one branch");
    for (const hlo::Region& r : op.regions)
      if (r.blocks.size() != 1) return Fail(op, "regions must have one block");
    const auto& in = op.operand_types;
    const auto& out = op.result_types;
    switch (e->check) {
      case Check::kUnset:
        return Fail(op, "internal: no check in the op table");
      case Check::kElementwise:
        return CheckElementwise(op, e->scalar);
      case Check::kReshape:
      case Check::kBitcastConvert:
        if (in.size() != 1 || out.size() != 1) return Fail(op, "needs one operand and one result");
        if (in[0].size_bytes() != out[0].size_bytes() ||
            (e->check == Check::kReshape &&
             (in[0].num_elements() != out[0].num_elements() || in[0].element != out[0].element)))
          return Fail(op, "cannot turn " + in[0].ToString() + " into " + out[0].ToString());
        return OkStatus();
      case Check::kBroadcastInDim: {
        if (in.size() != 1 || out.size() != 1) return Fail(op, "needs one operand and one result");
        TPUMESH_ASSIGN_OR_RETURN(Dims dims, Wrap(op, IntsAttr(op, "broadcast_dimensions")));
        if (dims.size() != in[0].dims.size()) return Fail(op, "broadcast_dimensions has the wrong length");
        for (size_t i = 0; i < dims.size(); ++i) {
          if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(out[0].dims.size()))
            return Fail(op, "broadcast_dimensions out of range");
          if (in[0].dims[i] != 1 && in[0].dims[i] != out[0].dims[static_cast<size_t>(dims[i])])
            return Fail(op, "cannot broadcast " + in[0].ToString() + " to " + out[0].ToString());
        }
        if (in[0].element != out[0].element) return Fail(op, "element types differ");
        return OkStatus();
      }
      case Check::kTranspose: {
        TPUMESH_ASSIGN_OR_RETURN(Dims perm, Wrap(op, IntsAttr(op, "permutation")));
        if (in.size() != 1 || perm.size() != in[0].dims.size()) return Fail(op, "permutation has the wrong length");
        Dims expect;
        std::vector<bool> seen(perm.size(), false);
        for (int64_t p : perm) {
          if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[static_cast<size_t>(p)])
            return Fail(op, "bad permutation");
          seen[static_cast<size_t>(p)] = true;
          expect.push_back(in[0].dims[static_cast<size_t>(p)]);
        }
        if (out.size() != 1 || out[0].dims != expect) return Fail(op, "result shape does not match the permutation");
        return OkStatus();
      }
      case Check::kDot:
        if (in.size() != 2 || out.size() != 1) return Fail(op, "needs two operands and one result");
        return OkStatus();  // checked fully where it runs (the shapes are the op's own)
      case Check::kCall: {
        const Func* callee = m_.FindFunc(op.callee);
        if (!callee) return Fail(op, "calls unknown function @" + op.callee);
        if (callee->arg_types != in || callee->result_types != out)
          return Fail(op, "types do not match @" + op.callee + "'s");
        return OkStatus();
      }
      case Check::kReturn:
        if (f && in != f->result_types)
          return Fail(op, "returns " + TypesToString(in) + " but @" + f->name + " declares " +
                              TypesToString(f->result_types));
        return OkStatus();
      case Check::kCustomCall: {
        static const char* kTargets[] = {"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"};
        for (const char* t : kTargets)
          if (op.callee == t) return OkStatus();
        return UnimplementedError(m_.Where(op.loc) + ": unsupported op " +
                                  Quoted("stablehlo.custom_call @" + op.callee) +
                                  " (supported custom calls: Sharding, SPMDFullToShardShape, SPMDShardToFullShape)");
      }
      case Check::kConcatenate: {
        TPUMESH_ASSIGN_OR_RETURN(int64_t d, Wrap(op, IntAttr(op, "dimension")));
        if (out.size() != 1 || in.empty() || d < 0 || d >= static_cast<int64_t>(out[0].dims.size()))
          return Fail(op, "bad dimension");
        int64_t total = 0;
        for (const Type& t : in) {
          if (t.dims.size() != out[0].dims.size()) return Fail(op, "operand ranks differ");
          for (size_t k = 0; k < t.dims.size(); ++k)
            if (static_cast<int64_t>(k) != d && t.dims[k] != out[0].dims[k]) return Fail(op, "operand shapes differ");
          total += t.dims[static_cast<size_t>(d)];
        }
        if (total != out[0].dims[static_cast<size_t>(d)]) return Fail(op, "result size along the dimension is wrong");
        return OkStatus();
      }
      case Check::kWhile:
      case Check::kWhereItRuns:
        return OkStatus();
    }
    return OkStatus();
  }
  // An elementwise op's operands against its result: the same shape (a
  // scalar where the op broadcasts one) and element type, except where its
  // scalar function converts or compares.
  Status CheckElementwise(const Op& op, const ScalarFn& fn) const {
    using K = ScalarFn::Kind;
    const auto& in = op.operand_types;
    const auto& out = op.result_types;
    if (out.size() != 1) return Fail(op, "needs one result");
    const Type& r = out[0];
    for (size_t i = 0; i < in.size(); ++i) {
      const bool may_be_scalar = (fn.kind == K::kSelect && i == 0) || (fn.kind == K::kClamp && i != 1);
      if (in[i].dims != r.dims && !(may_be_scalar && in[i].dims.empty()))
        return Fail(op, "operand " + std::to_string(i) + " is " + in[i].ToString() + " but the result is " +
                            r.ToString());
    }
    const size_t arity = fn.kind == K::kSelect || fn.kind == K::kClamp ? 3 : fn.kind == K::kCompare ? 2 : 0;
    if (arity && in.size() != arity) return Fail(op, "needs " + std::to_string(arity) + " operands");
    if (fn.kind == K::kCompare && r.element != ElementType::kPred) return Fail(op, "result must be i1");
    if (fn.kind == K::kSelect && in[0].element != ElementType::kPred) return Fail(op, "predicate must be i1");
    const bool converts = fn.kind == K::kConvert || fn.kind == K::kCompare ||
                          (fn.kind == K::kUnary && fn.un == Un::kIsFinite);
    if (!converts) {
      const size_t first = fn.kind == K::kSelect ? 1 : 0;
      for (size_t i = first; i < in.size(); ++i)
        if (in[i].element != r.element)
          return Fail(op, "operand " + std::to_string(i) + " is " + in[i].ToString() + ", result " + r.ToString());
    }
    return OkStatus();
  }
  template <typename T>
  StatusOr<T> Wrap(const Op& op, StatusOr<T> v) const {
    if (v.ok()) return v;
    return InvalidArgumentError(m_.Where(op.loc) + ": " + v.status().message());
  }

  const Module& m_;
};

// ---------------------------------------------------------------- interpreter

class Interpreter {
 public:
  Interpreter(const Module& m, const DeviceSite& site, const Options& o) : m_(m), site_(site), o_(o) {
    if (o_.ops) MarkMaterialized();
    MarkViews();
  }

  // The entry function: its arguments split as their shardings say
  // (hlo/partition.h; pricing only), and the collectives that make each
  // result as its sharding says.
  StatusOr<std::vector<Tensor>> Entry(const Func& f, std::vector<Tensor> args) {
    for (size_t i = 0; i < args.size() && i < f.arg_attrs.size(); ++i) args[i].split = DeclaredSplit(f.arg_attrs[i], args[i].type);
    TPUMESH_ASSIGN_OR_RETURN(std::vector<Tensor> res, Call(f, std::move(args)));
    for (size_t i = 0; i < res.size() && i < f.result_attrs.size(); ++i)
      Constrain(f.loc, "result " + std::to_string(i), res[i], DeclaredSplit(f.result_attrs[i], res[i].type));
    return res;
  }

  StatusOr<std::vector<Tensor>> Call(const Func& f, std::vector<Tensor> args) {
    if (++call_depth_ > 256) return InvalidArgumentError(m_.Where(f.loc) + ": calls nested deeper than 256");
    Env env;
    auto r = RunRegion(f.body, std::move(args), env);
    --call_depth_;
    return r;
  }

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
  void MarkViews() {
    view_ok_.assign(static_cast<size_t>(m_.num_values), false);
    std::vector<bool> other_use(static_cast<size_t>(m_.num_values), false);
    std::function<void(const Region&)> walk = [&](const Region& r) {
      for (const Block& b : r.blocks)
        for (const Op& op : b.ops) {
          const OpEntry* e = EntryOf(op);
          const bool ew = e && e->op_class == OpClass::kElementwise;
          for (int v : op.operands)
            if (!ew) other_use[static_cast<size_t>(v)] = true;
          if (e && e->run == Run::kBroadcastInDim && op.results.size() == 1)
            view_ok_[static_cast<size_t>(op.results[0])] = true;
          for (const Region& inner : op.regions) walk(inner);
        }
    };
    for (const Func& f : m_.funcs) walk(f.body);
    for (size_t v = 0; v < view_ok_.size(); ++v) view_ok_[v] = view_ok_[v] && !other_use[v];
  }

  // How many times each element of a broadcast_in_dim's operand repeats when
  // the broadcast only appends trailing dimensions (the operand's non-unit
  // dims are the result's leading ones, in order): the result's elements
  // after that prefix; 0 when the broadcast has another form.
  static int64_t TrailingRepeat(const Type& in, const Type& out, const Dims& bd) {
    size_t prefix = 0;  // result dims [0, prefix) come from the operand
    for (size_t i = 0; i < bd.size(); ++i) {
      if (in.dims[i] == 1) continue;
      if (bd[i] != static_cast<int64_t>(prefix) || in.dims[i] != out.dims[static_cast<size_t>(bd[i])]) return 0;
      ++prefix;
    }
    int64_t repeat = 1;
    for (size_t k = prefix; k < out.dims.size(); ++k) repeat *= out.dims[k];
    return repeat;
  }

  // Values whose last use in a block is op i (uses in nested regions count
  // for the op that holds them), defined in that block: freed after op i.
  const std::vector<std::vector<int>>& FreeLists(const Block& b) {
    auto it = free_lists_.find(&b);
    if (it != free_lists_.end()) return it->second;
    std::unordered_map<int, size_t> defined_here;
    for (int a : b.args) defined_here[a] = 0;
    for (size_t i = 0; i < b.ops.size(); ++i)
      for (int r : b.ops[i].results) defined_here[r] = i;
    std::unordered_map<int, size_t> last;
    std::function<void(const Op&, size_t)> uses = [&](const Op& op, size_t i) {
      for (int v : op.operands) last[v] = i;
      for (const Region& r : op.regions)
        for (const Block& bb : r.blocks)
          for (const Op& inner : bb.ops) uses(inner, i);
    };
    for (size_t i = 0; i < b.ops.size(); ++i) uses(b.ops[i], i);
    std::vector<std::vector<int>> lists(b.ops.size());
    for (const auto& [v, i] : last)
      if (defined_here.count(v)) lists[i].push_back(v);
    return free_lists_.emplace(&b, std::move(lists)).first->second;
  }

  // Runs a one-block region with `args` bound to its arguments; returns what
  // its terminator returns.
  StatusOr<std::vector<Tensor>> RunRegion(const Region& r, std::vector<Tensor> args, Env& env) {
    if (r.blocks.size() != 1) return InvalidArgumentError("regions must have one block");
    const Block& b = r.blocks[0];
    if (args.size() != b.args.size())
      return InvalidArgumentError("a region of " + std::to_string(b.args.size()) + " arguments got " +
                                  std::to_string(args.size()));
    for (size_t i = 0; i < args.size(); ++i) {
      if (!(args[i].type == b.arg_types[i]))
        return InvalidArgumentError("a region's argument " + std::to_string(i) + " is declared " +
                                    b.arg_types[i].ToString() + " but its value is " + args[i].type.ToString());
      env[b.args[i]] = std::move(args[i]);
    }
    const auto& frees = FreeLists(b);
    for (size_t i = 0; i < b.ops.size(); ++i) {
      const Op& op = b.ops[i];
      if (const OpEntry* e = EntryOf(op); e && e->run == Run::kReturn) {
        std::vector<Tensor> out;
        for (int v : op.operands) {
          auto it = env.find(v);
          if (it == env.end()) return Fail(op, "operand not available");
          out.push_back(it->second);
        }
        for (int a : b.args) env.erase(a);
        for (size_t k = 0; k <= i; ++k)
          for (int res : b.ops[k].results) env.erase(res);
        return out;
      }
      if (o_.cancel != nullptr && o_.cancel->load(std::memory_order_relaxed))
        return CancelledError("interrupted after " + std::to_string(executed_) + " ops");
      if (++executed_ > o_.max_executed_ops)
        return Fail(op, "more than " + std::to_string(o_.max_executed_ops) +
                            " ops executed (a loop whose trip count depends on data cannot be priced without computing it: use `tpumesh run`)");
      TPUMESH_RETURN_IF_ERROR(RunOp(op, env, frees[i]));
      for (int v : frees[i]) env.erase(v);
      if (o_.on_op && site_.device_id == 0) o_.on_op(executed_);
    }
    return InvalidArgumentError("a region without a terminator");
  }

  StatusOr<std::vector<const Tensor*>> Operands(const Op& op, Env& env) {
    std::vector<const Tensor*> in;
    for (int v : op.operands) {
      auto it = env.find(v);
      if (it == env.end()) return Fail(op, "operand " + m_.value_names[static_cast<size_t>(v)] + " is not available");
      in.push_back(&it->second);
    }
    return in;
  }

  bool Small(const Op& op) const {
    for (const Type& t : op.result_types)
      if (t.num_elements() > kDryRunComputeElements) return false;
    for (const Type& t : op.operand_types)
      if (t.num_elements() > kDryRunComputeElements) return false;
    return true;
  }

  // The devices' values live in this host's memory: a result the host
  // cannot hold is refused (RESOURCE_EXHAUSTED) instead of the process being
  // killed when its pages are touched. Large results only (64 MiB and more;
  // /proc/meminfo is read each time); the devices of a pmap allocate at
  // once, so bytes granted but not yet written count as taken.
  static Status CheckHostMemory(int64_t bytes) {
    static std::atomic<int64_t> granted{0};
    constexpr int64_t kCheckFrom = int64_t{64} << 20;
    if (bytes < kCheckFrom) return OkStatus();
    // MemAvailable counts page cache the kernel may not give back in time:
    // keep an eighth of the host (at least 1 GiB) free.
    static const int64_t kMargin =
        std::max<int64_t>(int64_t{1} << 30, static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / 8);
    const int64_t have = HostMemoryAvailable();
    if (have < 0) return OkStatus();
    const int64_t pending = granted.fetch_add(bytes);
    struct Release {
      std::atomic<int64_t>& g;
      int64_t b;
      ~Release() { g.fetch_sub(b); }
    } release{granted, bytes};
    if (pending + bytes > have - kMargin)
      return ResourceExhaustedError("host memory: the result needs " + mesh::FormatBytes(bytes) + "; this host has " +
                                    mesh::FormatBytes(std::max<int64_t>(have - pending, 0)) + " available and keeps " +
                                    mesh::FormatBytes(kMargin) +
                                    " of it free (the emulated devices' values live in host memory: fewer devices, "
                                    "a smaller module, or simulate --stablehlo, which allocates nothing)");
    return OkStatus();
  }

  // An operand this elementwise op may write its result into: its last use
  // is here, nothing else holds its bytes, and it has the result's size and
  // element width (out[i] depends on in[i] alone, so in place is safe).
  int Donor(const Op& op, const OpEntry& e, const std::vector<const Tensor*>& in, const std::vector<int>& dying) const {
    if (o_.dry_run || e.op_class != OpClass::kElementwise || op.result_types.size() != 1) return -1;
    const Type& r = op.result_types[0];
    for (size_t k = 0; k < in.size(); ++k) {
      if (std::find(dying.begin(), dying.end(), op.operands[k]) == dying.end()) continue;
      if (std::count(op.operands.begin(), op.operands.end(), op.operands[k]) != 1) continue;
      if (in[k]->type.size_bytes() != r.size_bytes() || in[k]->num_elements() != r.num_elements()) continue;
      if (ElementTypeBytes(in[k]->type.element) != ElementTypeBytes(r.element)) continue;
      if (in[k]->repeat || in[k]->data.storage_users() != 1 || in[k]->data.device() != site_.device) continue;
      return static_cast<int>(k);
    }
    return -1;
  }

  Status RunOp(const Op& op, Env& env, const std::vector<int>& dying = {}) {
    const OpEntry* e = EntryOf(op);
    if (!e) return UnimplementedError(m_.Where(op.loc) + ": unsupported op " + Quoted(op.name));
    TPUMESH_ASSIGN_OR_RETURN(std::vector<const Tensor*> in, Operands(op, env));
    for (size_t i = 0; i < in.size(); ++i)  // the types the op was written with are the values' own
      if (!(in[i]->type == op.operand_types[i]))
        return Fail(op, "operand " + std::to_string(i) + " is declared " + op.operand_types[i].ToString() +
                            " but its value is " + in[i]->type.ToString());
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Tensor> out;
    const size_t records_before = o_.ops ? o_.ops->size() : 0;
    if (e->op_class == OpClass::kControl || e->op_class == OpClass::kSharding) {
      TPUMESH_ASSIGN_OR_RETURN(out, Control(e->run, op, in, env));
    } else {
      const bool compute = !o_.dry_run || (Small(op) && e->op_class != OpClass::kCollective);
      if (compute && !o_.dry_run && e->run == Run::kBroadcastInDim &&
          view_ok_[static_cast<size_t>(op.results[0])] && in[0]->repeat == 0) {
        auto bd = IntsAttr(op, "broadcast_dimensions");
        const int64_t repeat = bd.ok() && bd->size() == in[0]->type.dims.size()
                                   ? TrailingRepeat(in[0]->type, op.result_types[0], *bd)
                                   : 0;
        if (repeat > 1) {
          Tensor x;
          x.type = op.result_types[0];
          x.repeat = repeat;
          x.data = in[0]->data;  // the operand's own bytes, read a row at a time
          out.push_back(std::move(x));
          std::vector<Type> in_local, out_local;
          std::vector<DeviceGroup> partial;
          Partition(op, in, out, in_local, out_local, partial);
          if (o_.ops) Price(*e, op, in_local, out_local);
          env[op.results[0]] = std::move(out[0]);
          return OkStatus();
        }
      }
      if (const int k = Donor(op, *e, in, dying); k >= 0) {
        Tensor x;
        x.type = op.result_types[0];
        x.data = in[static_cast<size_t>(k)]->data;
        out.push_back(std::move(x));
      } else {
        int64_t bytes = 0;
        for (const Type& t : op.result_types) bytes += t.size_bytes();
        if (compute) TPUMESH_RETURN_IF_ERROR(At(op, CheckHostMemory(bytes)));
        for (const Type& t : op.result_types) {
          TPUMESH_ASSIGN_OR_RETURN(Tensor x, At(op, NewTensor(t, site_.device, !compute, op.name)));
          out.push_back(std::move(x));
        }
      }
      if (compute) TPUMESH_RETURN_IF_ERROR(At(op, Compute(*e, op, in, out)));
      else if (e->op_class == OpClass::kCollective && site_.collectives == nullptr && !o_.dry_run)
        return Fail(op, "a collective outside a mesh");
      std::vector<Type> in_local, out_local;
      std::vector<DeviceGroup> partial;
      Partition(op, in, out, in_local, out_local, partial);
      if (o_.ops && e->op_class != OpClass::kControl) {
        Price(*e, op, in_local, out_local);
        if (!o_.dry_run && o_.ops->size() > records_before)
          o_.ops->back().host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        PricePartialSums(op, out_local, partial);
      }
    }
    if (out.size() != op.results.size()) return Fail(op, "internal: result count");
    for (size_t i = 0; i < out.size(); ++i) {
      if (!(out[i].type == op.result_types[i]))
        return Fail(op, "result " + std::to_string(i) + " is " + out[i].type.ToString() + ", declared " +
                            op.result_types[i].ToString());
      env[op.results[i]] = std::move(out[i]);
    }
    return OkStatus();
  }

  // ---------------------------------------------------------------- compute

  Status Compute(const OpEntry& e, const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
    switch (e.run) {
      case Run::kElementwise: return Elementwise(op, e.scalar, in, out[0]);
      case Run::kConstant:
      case Run::kDeviceId:
      case Run::kCopy:
      case Run::kIota:
      case Run::kBroadcastInDim:
      case Run::kTranspose:
      case Run::kReverse:
      case Run::kSlice:
      case Run::kDynamicSlice:
      case Run::kDynamicUpdateSlice:
      case Run::kConcatenate:
      case Run::kPad: return Data(e.run, op, in, out[0]);
      case Run::kDot: return DotGeneral(op, *in[0], *in[1], out[0]);
      case Run::kConvolution: return Convolution(op, *in[0], *in[1], out[0]);
      case Run::kReduce: return Reduce(op, in, out);
      case Run::kReduceWindow: return ReduceWindow(op, in, out);
      case Run::kSort: return Sort(op, in, out);
      case Run::kTopK: return TopK(op, *in[0], out);
      case Run::kGather: return Gather(op, *in[0], *in[1], out[0]);
      case Run::kScatter: return Scatter(op, in, out);
      case Run::kSelectAndScatter: return SelectAndScatter(op, in, out[0]);
      case Run::kAllReduce:
      case Run::kAllGather:
      case Run::kReduceScatter:
      case Run::kCollectivePermute:
      case Run::kAllToAll: return Collective(e.run, op, in, out);
      case Run::kUnset:
      case Run::kCall:
      case Run::kReturn:
      case Run::kWhile:
      case Run::kCase:
      case Run::kIf:
      case Run::kPassThrough:
      case Run::kShardingConstraint:
      case Run::kCustomCall:
      case Run::kManualComputation: break;
    }
    return UnimplementedError("not computed here");
  }

  void ParallelElements(int64_t n, const std::function<void(int64_t, int64_t)>& body) {
    constexpr int64_t kChunk = 1 << 15;
    const int64_t tasks = (n + kChunk - 1) / kChunk;
    if (tasks <= 1) {
      if (n > 0) body(0, n);
      return;
    }
    kernels::ParallelForTasks(tasks, o_.threads, [&](int64_t tb, int64_t te) {
      body(tb * kChunk, std::min(n, te * kChunk));
    });
  }

  // A broadcast view (Tensor::repeat) written out in full.
  StatusOr<Tensor> Dense(const Tensor& v) {
    TPUMESH_ASSIGN_OR_RETURN(Tensor d, NewTensor(v.type, site_.device, false, "broadcast"));
    const int w = ElementTypeBytes(v.type.element);
    const uint8_t* src = static_cast<const uint8_t*>(v.data.raw());
    uint8_t* dst = static_cast<uint8_t*>(d.data.mutable_raw());
    const int64_t rows = v.num_elements() / v.repeat;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < v.repeat; ++j) std::memcpy(dst + (r * v.repeat + j) * w, src + r * w, static_cast<size_t>(w));
    return d;
  }

  Status Elementwise(const Op& op, const ScalarFn& fn, const std::vector<const Tensor*>& in, Tensor& out) {
    ElementwiseCall c;
    c.generation = o_.generation;
    c.op = &op;
    c.in_type = fn.kind == ScalarFn::Kind::kSelect ? in[1]->type.element : in[0]->type.element;
    c.out_type = out.type.element;
    c.num_inputs = static_cast<int>(in.size());
    if (in.size() > 3) return InvalidArgumentError("too many operands");
    for (size_t i = 0; i < in.size(); ++i) {
      c.in[i] = in[i]->data.raw();
      c.stride[i] = in[i]->num_elements() == 1 && out.num_elements() != 1 ? 0 : 1;
    }
    Status st;
    std::mutex mu;
    void* o = out.data.mutable_raw();
    // Broadcast views (Tensor::repeat): rows of `repeat` elements, each view
    // operand read as the scalar of its row. One row length for all views
    // (a view of another length is filled in first).
    int64_t row = 0;
    std::vector<Tensor> filled;
    filled.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i]->repeat == 0) continue;
      if (row == 0 || in[i]->repeat == row) {
        row = in[i]->repeat;
        c.stride[i] = 0;
        continue;
      }
      TPUMESH_ASSIGN_OR_RETURN(Tensor dense, Dense(*in[i]));
      filled.push_back(std::move(dense));
      c.in[i] = filled.back().data.raw();
      c.stride[i] = 1;
    }
    if (row > 0) {
      const int64_t rows = out.num_elements() / row;
      const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / row);
      kernels::ParallelForTasks((rows + grain - 1) / grain, o_.threads, [&](int64_t tb, int64_t te) {
        ElementwiseCall rc = c;
        for (int64_t r = tb * grain; r < std::min(rows, te * grain); ++r) {
          for (size_t i = 0; i < in.size(); ++i)
            if (in[i]->repeat == row)
              rc.in[i] = static_cast<const uint8_t*>(in[i]->data.raw()) + r * ElementTypeBytes(in[i]->type.element);
          Status s = EvalElementwise(rc, r * row, (r + 1) * row, o);
          if (!s.ok()) {
            std::lock_guard<std::mutex> l(mu);
            st = s;
            return;
          }
        }
      });
      return st;
    }
    ParallelElements(out.num_elements(), [&](int64_t b, int64_t e) {
      Status s = EvalElementwise(c, b, e, o);
      if (!s.ok()) {
        std::lock_guard<std::mutex> l(mu);
        st = s;
      }
    });
    return st;
  }

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
  void AffineCopy(const Tensor& in, Tensor& out, int64_t base, const Dims& stride) {
    const int w = ElementTypeBytes(out.type.element);
    const Dims& od = out.type.dims;
    const int64_t n = out.num_elements();
    if (n == 0) return;
    const uint8_t* src = static_cast<const uint8_t*>(in.data.raw());
    uint8_t* dst = static_cast<uint8_t*>(out.data.mutable_raw());
    if (od.empty()) {
      std::memcpy(dst, src + base * w, static_cast<size_t>(w));
      return;
    }
    const size_t r = od.size();
    const int64_t len = od[r - 1], step = stride[r - 1];
    const int64_t rows = n / len;
    auto run = [&](int64_t row_begin, int64_t row_end) {
      Dims idx(r, 0);
      int64_t rem = row_begin;
      for (int k = static_cast<int>(r) - 2; k >= 0; --k) {
        idx[static_cast<size_t>(k)] = rem % od[static_cast<size_t>(k)];
        rem /= od[static_cast<size_t>(k)];
      }
      for (int64_t row = row_begin; row < row_end; ++row) {
        int64_t off = base;
        for (size_t k = 0; k + 1 < r; ++k) off += idx[k] * stride[k];
        uint8_t* d = dst + row * len * w;
        const uint8_t* sp = src + off * w;
        if (step == 1) {
          std::memcpy(d, sp, static_cast<size_t>(len * w));
        } else if (w == 4) {
          const uint32_t* s4 = reinterpret_cast<const uint32_t*>(sp);
          uint32_t* d4 = reinterpret_cast<uint32_t*>(d);
          for (int64_t i = 0; i < len; ++i) d4[i] = s4[i * step];
        } else if (w == 2) {
          const uint16_t* s2 = reinterpret_cast<const uint16_t*>(sp);
          uint16_t* d2 = reinterpret_cast<uint16_t*>(d);
          for (int64_t i = 0; i < len; ++i) d2[i] = s2[i * step];
        } else {
          for (int64_t i = 0; i < len; ++i) std::memcpy(d + i * w, sp + i * step * w, static_cast<size_t>(w));
        }
        for (int k = static_cast<int>(r) - 2; k >= 0; --k) {
          if (++idx[static_cast<size_t>(k)] < od[static_cast<size_t>(k)]) break;
          idx[static_cast<size_t>(k)] = 0;
        }
      }
    };
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(len, 1));
    const int64_t tasks = (rows + grain - 1) / grain;
    if (tasks <= 1) {
      run(0, rows);
      return;
    }
    kernels::ParallelForTasks(tasks, o_.threads, [&](int64_t tb, int64_t te) {
      run(tb * grain, std::min(rows, te * grain));
    });
  }

  // Reads a scalar integer tensor (dynamic_slice's starts, case's index).
  static int64_t ScalarInt(const Tensor& t) {
    const void* p = t.data.raw();
    switch (t.type.element) {
      case ElementType::kI8: return *static_cast<const int8_t*>(p);
      case ElementType::kI16: return *static_cast<const int16_t*>(p);
      case ElementType::kI32: return *static_cast<const int32_t*>(p);
      case ElementType::kI64: return *static_cast<const int64_t*>(p);
      case ElementType::kU8: case ElementType::kPred: return *static_cast<const uint8_t*>(p);
      case ElementType::kU16: return *static_cast<const uint16_t*>(p);
      case ElementType::kU32: return *static_cast<const uint32_t*>(p);
      case ElementType::kU64: return static_cast<int64_t>(std::min<uint64_t>(*static_cast<const uint64_t*>(p), INT64_MAX));
      default: return 0;
    }
  }
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
      case ElementType::kU64: return static_cast<int64_t>(std::min<uint64_t>(static_cast<const uint64_t*>(p)[i], INT64_MAX));
      default: return 0;
    }
  }

  Status Data(Run run, const Op& op, const std::vector<const Tensor*>& in, Tensor& out) {
    const int w = ElementTypeBytes(out.type.element);
    uint8_t* dst = static_cast<uint8_t*>(out.data.mutable_raw());
    if (run == Run::kConstant) {
      const Attr* v = op.Find("value");
      if (!v || v->kind != Attr::Kind::kDense || !(v->type == out.type))
        return InvalidArgumentError("value does not match the result type");
      const int64_t count = out.num_elements();
      if (v->splat || (count > 1 && static_cast<int64_t>(v->bytes.size()) == w)) {
        for (int64_t i = 0; i < count; ++i) std::memcpy(dst + i * w, v->bytes.data(), static_cast<size_t>(w));
      } else if (!v->bytes.empty()) {
        std::memcpy(dst, v->bytes.data(), std::min<size_t>(v->bytes.size(), static_cast<size_t>(count * w)));
      }
      return OkStatus();
    }
    if (run == Run::kDeviceId) {
      const uint32_t id = static_cast<uint32_t>(site_.device_id);
      std::memcpy(dst, &id, 4);
      return OkStatus();
    }
    if (run == Run::kCopy) {
      std::memcpy(dst, in[0]->data.raw(), static_cast<size_t>(out.type.size_bytes()));
      return OkStatus();
    }
    if (run == Run::kIota) {
      TPUMESH_ASSIGN_OR_RETURN(int64_t d, IntAttr(op, "iota_dimension"));
      if (d < 0 || d >= static_cast<int64_t>(out.type.dims.size())) return InvalidArgumentError("bad iota_dimension");
      const Dims st = Strides(out.type.dims);
      const int64_t count = out.num_elements();
      const int64_t dim = out.type.dims[static_cast<size_t>(d)], stride = st[static_cast<size_t>(d)];
      // The indices as i64 a run at a time, written through convert.
      Status status;
      std::mutex mu;
      ParallelElements(count, [&](int64_t b, int64_t e) {
        constexpr int64_t kRun = 4096;  // a thread's range may be half the array: a run at a time
        int64_t idx[kRun];
        for (int64_t r = b; r < e; r += kRun) {
          const int64_t n = std::min(kRun, e - r);
          for (int64_t i = 0; i < n; ++i) idx[i] = ((r + i) / stride) % dim;
          Status s = ConvertElements(ElementType::kI64, idx, out.type.element, 0, n, dst + r * w);
          if (!s.ok()) {
            std::lock_guard<std::mutex> l(mu);
            status = s;
            return;
          }
        }
      });
      return status;
    }
    if (run == Run::kBroadcastInDim) {
      TPUMESH_ASSIGN_OR_RETURN(Dims bd, IntsAttr(op, "broadcast_dimensions"));
      const Dims& id = in[0]->type.dims;
      const Dims is = Strides(id);
      Dims st(out.type.dims.size(), 0);
      for (size_t k = 0; k < bd.size(); ++k)
        if (id[k] != 1) st[static_cast<size_t>(bd[k])] += is[k];
      AffineCopy(*in[0], out, 0, st);
      return OkStatus();
    }
    if (run == Run::kTranspose) {
      TPUMESH_ASSIGN_OR_RETURN(Dims perm, IntsAttr(op, "permutation"));
      const Dims is = Strides(in[0]->type.dims);
      Dims st(perm.size());
      for (size_t k = 0; k < perm.size(); ++k) st[k] = is[static_cast<size_t>(perm[k])];
      AffineCopy(*in[0], out, 0, st);
      return OkStatus();
    }
    if (run == Run::kReverse) {
      TPUMESH_ASSIGN_OR_RETURN(Dims dims, IntsAttr(op, "dimensions"));
      const Dims& d = in[0]->type.dims;
      const Dims is = Strides(d);
      std::vector<bool> rev(d.size(), false);
      for (int64_t k : dims) {
        if (k < 0 || k >= static_cast<int64_t>(d.size())) return InvalidArgumentError("bad dimensions");
        rev[static_cast<size_t>(k)] = true;
      }
      int64_t b0 = 0;
      Dims st(d.size());
      for (size_t k = 0; k < d.size(); ++k) {
        st[k] = rev[k] ? -is[k] : is[k];
        if (rev[k]) b0 += (d[k] - 1) * is[k];
      }
      AffineCopy(*in[0], out, b0, st);
      return OkStatus();
    }
    if (run == Run::kSlice) {
      TPUMESH_ASSIGN_OR_RETURN(Dims start, IntsAttr(op, "start_indices"));
      TPUMESH_ASSIGN_OR_RETURN(Dims limit, IntsAttr(op, "limit_indices"));
      TPUMESH_ASSIGN_OR_RETURN(Dims stride, IntsAttr(op, "strides", Dims(start.size(), 1)));
      const Dims& d = in[0]->type.dims;
      if (start.size() != d.size() || limit.size() != d.size() || stride.size() != d.size())
        return InvalidArgumentError("slice indices have the wrong length");
      for (size_t k = 0; k < d.size(); ++k) {
        if (start[k] < 0 || limit[k] > d[k] || start[k] > limit[k] || stride[k] < 1)
          return InvalidArgumentError("slice out of range");
        if ((limit[k] - start[k] + stride[k] - 1) / stride[k] != out.type.dims[k])
          return InvalidArgumentError("result shape does not match the slice");
      }
      const Dims is = Strides(d);
      int64_t b0 = 0;
      Dims st(d.size());
      for (size_t k = 0; k < d.size(); ++k) {
        b0 += start[k] * is[k];
        st[k] = stride[k] * is[k];
      }
      AffineCopy(*in[0], out, b0, st);
      return OkStatus();
    }
    if (run == Run::kDynamicSlice) {
      const Dims& d = in[0]->type.dims;
      if (in.size() != d.size() + 1) return InvalidArgumentError("needs one start index per dimension");
      if (out.type.dims.size() != d.size()) return InvalidArgumentError("result rank differs from the operand's");
      for (size_t k = 0; k < d.size(); ++k)
        if (out.type.dims[k] > d[k]) return InvalidArgumentError("slice larger than the operand");
      Dims start(d.size());
      for (size_t k = 0; k < d.size(); ++k)
        start[k] = std::clamp<int64_t>(ScalarInt(*in[k + 1]), 0, d[k] - out.type.dims[k]);
      const Dims is = Strides(d);
      int64_t b0 = 0;
      for (size_t k = 0; k < d.size(); ++k) b0 += start[k] * is[k];
      AffineCopy(*in[0], out, b0, is);
      return OkStatus();
    }
    if (run == Run::kDynamicUpdateSlice) {
      const Dims& d = in[0]->type.dims;
      const Dims& ud = in[1]->type.dims;
      if (in.size() != d.size() + 2 || ud.size() != d.size()) return InvalidArgumentError("bad operands");
      std::memcpy(dst, in[0]->data.raw(), static_cast<size_t>(out.type.size_bytes()));
      Dims start(d.size());
      for (size_t k = 0; k < d.size(); ++k) {
        if (ud[k] > d[k]) return InvalidArgumentError("update larger than the operand");
        start[k] = std::clamp<int64_t>(ScalarInt(*in[k + 2]), 0, d[k] - ud[k]);
      }
      const Dims os = Strides(d);
      const uint8_t* src = static_cast<const uint8_t*>(in[1]->data.raw());
      const int64_t cnt = in[1]->num_elements();
      Dims idx(ud.size(), 0);
      for (int64_t i = 0; i < cnt; ++i) {
        int64_t o = 0;
        for (size_t k = 0; k < d.size(); ++k) o += (start[k] + idx[k]) * os[k];
        std::memcpy(dst + o * w, src + i * w, static_cast<size_t>(w));
        for (int k = static_cast<int>(ud.size()) - 1; k >= 0; --k) {
          if (++idx[k] < ud[k]) break;
          idx[k] = 0;
        }
      }
      return OkStatus();
    }
    if (run == Run::kConcatenate) {
      TPUMESH_ASSIGN_OR_RETURN(int64_t dim, IntAttr(op, "dimension"));
      const Dims& od = out.type.dims;
      int64_t outer = 1, inner = 1;
      for (int64_t k = 0; k < dim; ++k) outer *= od[static_cast<size_t>(k)];
      for (size_t k = static_cast<size_t>(dim) + 1; k < od.size(); ++k) inner *= od[k];
      int64_t offset = 0;
      const int64_t row = od[static_cast<size_t>(dim)] * inner * w;
      for (const Tensor* t : in) {
        const int64_t part = t->type.dims[static_cast<size_t>(dim)] * inner * w;
        const uint8_t* src = static_cast<const uint8_t*>(t->data.raw());
        for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * row + offset, src + o * part, static_cast<size_t>(part));
        offset += part;
      }
      return OkStatus();
    }
    if (run == Run::kPad) {
      const Dims& d = in[0]->type.dims;
      TPUMESH_ASSIGN_OR_RETURN(Dims lo, IntsAttr(op, "edge_padding_low"));
      TPUMESH_ASSIGN_OR_RETURN(Dims hi, IntsAttr(op, "edge_padding_high"));
      TPUMESH_ASSIGN_OR_RETURN(Dims interior, IntsAttr(op, "interior_padding", Dims(d.size(), 0)));
      if (lo.size() != d.size() || hi.size() != d.size() || interior.size() != d.size())
        return InvalidArgumentError("padding has the wrong length");
      for (size_t k = 0; k < d.size(); ++k) {
        if (interior[k] < 0) return InvalidArgumentError("negative interior padding");
        const int64_t size = lo[k] + hi[k] + d[k] + std::max<int64_t>(d[k] - 1, 0) * interior[k];
        if (size != out.type.dims[k]) return InvalidArgumentError("result shape does not match the padding");
      }
      const Dims is = Strides(d);
      const uint8_t* fill = static_cast<const uint8_t*>(in[1]->data.raw());
      IndexCopy(*in[0], out, [&](const Dims& o) -> int64_t {
        int64_t s = 0;
        for (size_t k = 0; k < d.size(); ++k) {
          const int64_t p = o[k] - lo[k];
          if (p < 0 || p % (interior[k] + 1)) return -1;
          const int64_t q = p / (interior[k] + 1);
          if (q >= d[k]) return -1;
          s += q * is[k];
        }
        return s;
      }, fill);
      return OkStatus();
    }
    return UnimplementedError("not a data op");
  }

  // ---- dot_general: lhs -> [B, M, K], rhs -> [B, K, N] (copies only when
  // the dims are not already in that order), one packed matmul per batch.
  kernels::Precision MatmulPrecision(const Op& op) const {
    if (!o_.mxu_precision) return kernels::Precision::kHighest;
    const Attr* p = op.Find("precision_config");
    std::string w = "DEFAULT";
    if (p && p->kind == Attr::Kind::kList && !p->list.empty()) {
      for (const Attr& a : p->list)
        if (a.kind == Attr::Kind::kWord && a.s > w) w = a.s;  // HIGHEST > HIGH > DEFAULT (lexically)
    }
    if (w == "HIGHEST") return kernels::Precision::kHighest;
    if (w == "HIGH") return kernels::Precision::kHigh;
    return kernels::Precision::kDefault;
  }

  // t as f32 with its dims reordered to `order`: t's own bytes when it is
  // f32 in that order already, else a converted and permuted copy (kept in
  // `storage`).
  struct F32Operand {
    const float* data = nullptr;
    Tensor storage;
  };
  StatusOr<F32Operand> AsF32Ordered(const Tensor& t, const Dims& order) {
    F32Operand r;
    bool identity = true;
    for (size_t k = 0; k < order.size(); ++k) identity &= order[k] == static_cast<int64_t>(k);
    const Tensor* src = &t;
    Tensor converted;
    if (t.type.element != ElementType::kF32) {
      Type ft = t.type;
      ft.element = ElementType::kF32;
      TPUMESH_ASSIGN_OR_RETURN(converted, NewTensor(ft, nullptr));
      ConvertParallel(t.type.element, t.data.raw(), ElementType::kF32, t.num_elements(), converted.data.mutable_raw());
      src = &converted;
    }
    if (identity) {
      r.storage = src == &t ? Tensor() : std::move(converted);
      r.data = src == &t ? t.as<float>() : r.storage.as<float>();
      return r;
    }
    Type pt = src->type;
    pt.dims.clear();
    const Dims is = Strides(src->type.dims);
    Dims st;
    for (int64_t k : order) {
      pt.dims.push_back(src->type.dims[static_cast<size_t>(k)]);
      st.push_back(is[static_cast<size_t>(k)]);
    }
    TPUMESH_ASSIGN_OR_RETURN(r.storage, NewTensor(pt, nullptr));
    AffineCopy(*src, r.storage, 0, st);
    r.data = r.storage.as<float>();
    return r;
  }
  // Writes f32 values into `out` (converting to its element type).
  void StoreF32(const float* v, Tensor& out) {
    ConvertParallel(ElementType::kF32, v, out.type.element, out.num_elements(), out.data.mutable_raw());
  }
  // n elements converted, spread over the threads (a numeric convert
  // between valid types cannot fail).
  void ConvertParallel(ElementType from, const void* in, ElementType to, int64_t n, void* out) {
    ParallelElements(n, [&](int64_t b, int64_t e) { ConvertElements(from, in, to, b, e, out).IgnoreError(); });
  }

  Status DotGeneral(const Op& op, const Tensor& l, const Tensor& r, Tensor& out) {
    TPUMESH_ASSIGN_OR_RETURN(DotDims d, GetDotDims(op, l.type, r.type));
    Dims expect;
    for (int64_t k : d.lb) expect.push_back(l.type.dims[static_cast<size_t>(k)]);
    for (int64_t k : d.lf) expect.push_back(l.type.dims[static_cast<size_t>(k)]);
    for (int64_t k : d.rf) expect.push_back(r.type.dims[static_cast<size_t>(k)]);
    if (expect != out.type.dims)
      return InvalidArgumentError("result " + out.type.ToString() + " does not match the operands " + l.type.ToString() +
                                  " x " + r.type.ToString());
    const int64_t B = Prod(l.type, d.lb), M = Prod(l.type, d.lf), K = Prod(l.type, d.lc), N = Prod(r.type, d.rf);
    if (!IsFloat(l.type.element) || !IsFloat(r.type.element) || !IsFloat(out.type.element)) {
      return IntegerDot(l, r, out, d, B, M, K, N);
    }
    Dims lo = d.lb, ro = d.rb;
    lo.insert(lo.end(), d.lf.begin(), d.lf.end());
    lo.insert(lo.end(), d.lc.begin(), d.lc.end());
    ro.insert(ro.end(), d.rc.begin(), d.rc.end());
    ro.insert(ro.end(), d.rf.begin(), d.rf.end());
    TPUMESH_ASSIGN_OR_RETURN(F32Operand a, AsF32Ordered(l, lo));
    TPUMESH_ASSIGN_OR_RETURN(F32Operand b, AsF32Ordered(r, ro));
    // The product straight into the result when it is f32.
    const bool direct = out.type.element == ElementType::kF32;
    std::vector<float> tmp(direct ? 0 : static_cast<size_t>(B * M * N));
    float* c = direct ? out.mutable_as<float>() : tmp.data();
    kernels::MatmulOptions mo;
    mo.precision = MatmulPrecision(op);
    for (int64_t bi = 0; bi < B; ++bi) {
      if (K == 0 || M == 0 || N == 0) continue;
      TPUMESH_ASSIGN_OR_RETURN(kernels::PackedMatrix p, kernels::PackedMatrix::Pack(K, N, b.data + bi * K * N, N, mo));
      TPUMESH_RETURN_IF_ERROR(kernels::Matmul(M, a.data + bi * M * K, K, p, c + bi * M * N, N, o_.threads));
    }
    if (K == 0) std::fill(c, c + B * M * N, 0.0f);
    if (!direct) StoreF32(c, out);
    return OkStatus();
  }

  Status IntegerDot(const Tensor& l, const Tensor& r, Tensor& out, const DotDims& d, int64_t B, int64_t M, int64_t K,
                    int64_t N) {
    if (IsFloat(l.type.element) || IsFloat(r.type.element) || IsFloat(out.type.element))
      return UnimplementedError("mixed float and integer dot_general");
    Dims lo = d.lb, ro = d.rb;
    lo.insert(lo.end(), d.lf.begin(), d.lf.end());
    lo.insert(lo.end(), d.lc.begin(), d.lc.end());
    ro.insert(ro.end(), d.rc.begin(), d.rc.end());
    ro.insert(ro.end(), d.rf.begin(), d.rf.end());
    auto ordered = [&](const Tensor& t, const Dims& order) {
      std::vector<int64_t> v(static_cast<size_t>(t.num_elements()));
      Dims od;
      for (int64_t k : order) od.push_back(t.type.dims[static_cast<size_t>(k)]);
      const Dims is = Strides(t.type.dims);
      Dims idx(od.size(), 0);
      for (size_t i = 0; i < v.size(); ++i) {
        int64_t s = 0;
        for (size_t k = 0; k < od.size(); ++k) s += idx[k] * is[static_cast<size_t>(order[k])];
        v[i] = IntAt(t, s);
        for (int k = static_cast<int>(od.size()) - 1; k >= 0; --k) {
          if (++idx[k] < od[k]) break;
          idx[k] = 0;
        }
      }
      return v;
    };
    const auto a = ordered(l, lo), b = ordered(r, ro);
    std::vector<int64_t> c(static_cast<size_t>(B * M * N), 0);
    for (int64_t bi = 0; bi < B; ++bi)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K; ++k) {
          const int64_t x = a[static_cast<size_t>((bi * M + i) * K + k)];
          for (int64_t j = 0; j < N; ++j)
            c[static_cast<size_t>((bi * M + i) * N + j)] += x * b[static_cast<size_t>((bi * K + k) * N + j)];
        }
    return ConvertElements(ElementType::kI64, c.data(), out.type.element, 0, out.num_elements(), out.data.mutable_raw());
  }

  // ---- convolution: the input as [N, spatial..., C], the kernel as
  // [spatial..., I, O]; per group an im2col of output pixels x (taps, I/g)
  // times the kernel's [(taps, I/g), O/g] on the matmul kernel.

  Status Convolution(const Op& op, const Tensor& l, const Tensor& r, Tensor& out) {
    TPUMESH_ASSIGN_OR_RETURN(ConvShape s, GetConvShape(op, l.type, r.type, out.type));
    if (!IsFloat(l.type.element) || !IsFloat(r.type.element)) return UnimplementedError("integer convolution");
    const size_t ns = s.in_sp.size();
    TPUMESH_ASSIGN_OR_RETURN(F32Operand xo, AsF32Ordered(l, s.in_order));
    TPUMESH_ASSIGN_OR_RETURN(F32Operand wo, AsF32Ordered(r, s.k_order));
    const float* x = xo.data;
    const float* w = wo.data;
    int64_t taps = 1, pixels = 1, in_pixels = 1;
    for (size_t k = 0; k < ns; ++k) {
      taps *= s.k_sp[k];
      pixels *= s.out_sp[k];
      in_pixels *= s.in_sp[k];
    }
    const int64_t G = s.groups, ig = s.cin / G, og = s.cout / G, K = taps * ig;
    bool out_identity = true;
    for (size_t k = 0; k < s.out_order.size(); ++k) out_identity &= s.out_order[k] == static_cast<int64_t>(k);
    // [N, spatial..., O]: the result itself when it is f32 in that layout.
    const bool direct = out_identity && out.type.element == ElementType::kF32;
    std::vector<float> y_storage(direct ? 0 : static_cast<size_t>(s.batch * pixels * s.cout));
    float* y = direct ? out.mutable_as<float>() : y_storage.data();
    kernels::MatmulOptions mo;
    mo.precision = MatmulPrecision(op);
    // Each output pixel's input position per tap, or -1 (padding / a hole).
    const Dims osd = Strides(s.out_sp), ksd = Strides(s.k_sp), isd = Strides(s.in_sp);
    auto source = [&](int64_t p, int64_t t) -> int64_t {
      int64_t off = 0;
      for (size_t k = 0; k < ns; ++k) {
        const int64_t o = (p / osd[k]) % s.out_sp[k];
        int64_t kk = (t / ksd[k]) % s.k_sp[k];
        if (s.reverse[k]) kk = s.k_sp[k] - 1 - kk;
        const int64_t pos = o * s.stride[k] + kk * s.rhs_dil[k] - s.pad_lo[k];  // in the dilated input
        if (pos < 0 || pos % s.lhs_dil[k]) return -1;
        const int64_t q = pos / s.lhs_dil[k];
        if (q >= s.in_sp[k]) return -1;
        off += q * isd[k];
      }
      return off;
    };
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(pixels, (int64_t{1} << 21) / std::max<int64_t>(1, K)));
    for (int64_t g = 0; g < G; ++g) {
      std::vector<float> wg(static_cast<size_t>(K * og));  // [(taps, ig), og]
      for (int64_t t = 0; t < taps; ++t)
        for (int64_t i = 0; i < ig; ++i)
          std::memcpy(wg.data() + (t * ig + i) * og, w + (t * ig + i) * s.cout + g * og,
                      static_cast<size_t>(og) * sizeof(float));
      TPUMESH_ASSIGN_OR_RETURN(kernels::PackedMatrix p, kernels::PackedMatrix::Pack(K, og, wg.data(), og, mo));
      const int64_t chunks = (pixels + chunk - 1) / chunk;
      Status st;
      std::mutex mu;
      kernels::ParallelForTasks(s.batch * chunks, o_.threads, [&](int64_t tb, int64_t te) {
        std::vector<float> col(static_cast<size_t>(chunk * K)), res(static_cast<size_t>(chunk * og));
        for (int64_t task = tb; task < te; ++task) {
          const int64_t n = task / chunks, p0 = (task % chunks) * chunk, p1 = std::min(pixels, p0 + chunk);
          const float* xn = x + n * in_pixels * s.cin;
          for (int64_t p = p0; p < p1; ++p) {
            float* row = col.data() + (p - p0) * K;
            for (int64_t t = 0; t < taps; ++t) {
              const int64_t src = source(p, t);
              if (src < 0) std::memset(row + t * ig, 0, static_cast<size_t>(ig) * sizeof(float));
              else std::memcpy(row + t * ig, xn + src * s.cin + g * ig, static_cast<size_t>(ig) * sizeof(float));
            }
          }
          Status ms = kernels::Matmul(p1 - p0, col.data(), K, p, res.data(), og, 1);
          if (!ms.ok()) {
            std::lock_guard<std::mutex> l(mu);
            st = ms;
            return;
          }
          for (int64_t p = p0; p < p1; ++p)
            std::memcpy(y + (n * pixels + p) * s.cout + g * og, res.data() + (p - p0) * og,
                        static_cast<size_t>(og) * sizeof(float));
        }
      });
      TPUMESH_RETURN_IF_ERROR(st);
    }
    // y is [N, spatial..., O]: write it in the output's layout.
    if (direct) return OkStatus();
    Dims y_dims = {s.batch};
    y_dims.insert(y_dims.end(), s.out_sp.begin(), s.out_sp.end());
    y_dims.push_back(s.cout);
    Tensor yt;
    yt.type = out.type;
    yt.type.element = ElementType::kF32;
    yt.type.dims = y_dims;
    TPUMESH_ASSIGN_OR_RETURN(yt.data, mesh::Array::Host(mesh::DType::kF32, {static_cast<int64_t>(y_storage.size())})
                                          .View(mesh::DType::kU8, {yt.type.size_bytes()}));
    std::memcpy(yt.data.mutable_raw(), y, y_storage.size() * sizeof(float));
    if (out_identity) {
      StoreF32(yt.as<float>(), out);
      return OkStatus();
    }
    // out dim out_order[j] holds y's dim j
    Type pt = yt.type;
    pt.dims = out.type.dims;
    TPUMESH_ASSIGN_OR_RETURN(Tensor permuted, NewTensor(pt, nullptr));
    const Dims ys = Strides(y_dims);
    Dims st(out.type.dims.size());
    for (size_t j = 0; j < s.out_order.size(); ++j) st[static_cast<size_t>(s.out_order[j])] = ys[j];
    AffineCopy(yt, permuted, 0, st);
    StoreF32(permuted.as<float>(), out);
    return OkStatus();
  }

  // ---- reductions. A body that is one binary op runs as EvalElementwise on
  // runs of elements; any other body runs through the interpreter per
  // element (argmax's variadic reduce).
  Status ApplyBody(const Region& body, const Op* simple, const std::vector<const uint8_t*>& acc_in,
                   const std::vector<const uint8_t*>& x, const std::vector<uint8_t*>& acc_out,
                   const std::vector<Type>& scalar_types) {
    if (simple) {
      ElementwiseCall c;
      c.generation = o_.generation;
      c.op = simple;
      c.in_type = c.out_type = scalar_types[0].element;
      c.in[0] = acc_in[0];
      c.in[1] = x[0];
      return EvalElementwise(c, 0, 1, acc_out[0]);
    }
    const size_t k = acc_in.size();
    std::vector<Tensor> args;
    for (size_t i = 0; i < 2 * k; ++i) {
      TPUMESH_ASSIGN_OR_RETURN(Tensor t, NewTensor(scalar_types[i % k], nullptr));
      std::memcpy(t.data.mutable_raw(), i < k ? acc_in[i] : x[i - k], static_cast<size_t>(ElementTypeBytes(scalar_types[i % k].element)));
      args.push_back(std::move(t));
    }
    Env env;
    TPUMESH_ASSIGN_OR_RETURN(std::vector<Tensor> r, RunRegion(body, std::move(args), env));
    if (r.size() != k) return InvalidArgumentError("the body returns the wrong number of values");
    for (size_t i = 0; i < k; ++i)
      std::memcpy(acc_out[i], r[i].data.raw(), static_cast<size_t>(ElementTypeBytes(scalar_types[i].element)));
    return OkStatus();
  }

  // acc = body(acc, x) for the k values of one reduction step, where x_i is
  // element `off` of in[first + i]; the result goes to nxt and is swapped in.
  Status Fold(const Region& body, const Op* simple, const std::vector<const Tensor*>& in, size_t first,
              int64_t off, const std::vector<Type>& st, std::vector<std::vector<uint8_t>>& acc,
              std::vector<std::vector<uint8_t>>& nxt) {
    const size_t k = acc.size();
    std::vector<const uint8_t*> ai(k), xi(k);
    std::vector<uint8_t*> ao(k);
    for (size_t i = 0; i < k; ++i) {
      ai[i] = acc[i].data();
      xi[i] = static_cast<const uint8_t*>(in[first + i]->data.raw()) + off * ElementTypeBytes(st[i].element);
      ao[i] = nxt[i].data();
    }
    TPUMESH_RETURN_IF_ERROR(ApplyBody(body, simple, ai, xi, ao, st));
    std::swap(acc, nxt);
    return OkStatus();
  }

  Status Reduce(const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
    const size_t k = in.size() / 2;
    if (k == 0 || in.size() != 2 * k || out.size() != k || op.regions.size() != 1)
      return InvalidArgumentError("needs inputs, as many inits and a body");
    TPUMESH_ASSIGN_OR_RETURN(Dims dims, IntsAttr(op, "dimensions"));
    const Dims& d = in[0]->type.dims;
    std::vector<bool> reduced(d.size(), false);
    for (int64_t x : dims) {
      if (x < 0 || x >= static_cast<int64_t>(d.size()) || reduced[static_cast<size_t>(x)])
        return InvalidArgumentError("bad dimensions");
      reduced[static_cast<size_t>(x)] = true;
    }
    Dims kept, red;
    for (size_t i = 0; i < d.size(); ++i) (reduced[i] ? red : kept).push_back(static_cast<int64_t>(i));
    Dims od;
    for (int64_t i : kept) od.push_back(d[static_cast<size_t>(i)]);
    std::vector<Type> st;
    for (size_t i = 0; i < k; ++i) {
      if (in[i]->type.dims != d) return InvalidArgumentError("inputs differ in shape");
      if (out[i].type.dims != od) return InvalidArgumentError("result " + out[i].type.ToString() + " does not match the reduction");
      st.push_back(in[k + i]->type);
    }
    const Op* simple = k == 1 ? SimpleBody(op.regions[0]) : nullptr;
    if (simple) return ReduceSimple(op, simple, *in[0], *in[1], kept, red, out[0]);
    const Dims is = Strides(d);
    int64_t rcount = 1;
    for (int64_t i : red) rcount *= d[static_cast<size_t>(i)];
    const int64_t n_out = out[0].num_elements();
    Status status;
    std::mutex mu;
    auto body = [&](int64_t b, int64_t e) {
      Dims oi(kept.size(), 0), ri(red.size(), 0);
      std::vector<std::vector<uint8_t>> acc(k), nxt(k);
      for (size_t i = 0; i < k; ++i) {
        acc[i].resize(8);
        nxt[i].resize(8);
      }
      for (int64_t o = b; o < e; ++o) {
        int64_t rem = o, base = 0;
        for (int j = static_cast<int>(kept.size()) - 1; j >= 0; --j) {
          const int64_t v = rem % od[static_cast<size_t>(j)];
          rem /= od[static_cast<size_t>(j)];
          base += v * is[static_cast<size_t>(kept[static_cast<size_t>(j)])];
        }
        for (size_t i = 0; i < k; ++i)
          std::memcpy(acc[i].data(), in[k + i]->data.raw(), static_cast<size_t>(ElementTypeBytes(st[i].element)));
        std::fill(ri.begin(), ri.end(), 0);
        for (int64_t r = 0; r < rcount; ++r) {
          int64_t off = base;
          for (size_t j = 0; j < red.size(); ++j) off += ri[j] * is[static_cast<size_t>(red[j])];
          Status s = Fold(op.regions[0], simple, in, 0, off, st, acc, nxt);
          if (!s.ok()) {
            std::lock_guard<std::mutex> l(mu);
            status = s;
            return;
          }
          for (int j = static_cast<int>(red.size()) - 1; j >= 0; --j) {
            if (++ri[static_cast<size_t>(j)] < d[static_cast<size_t>(red[static_cast<size_t>(j)])]) break;
            ri[static_cast<size_t>(j)] = 0;
          }
        }
        for (size_t i = 0; i < k; ++i) {
          const int w = ElementTypeBytes(st[i].element);
          std::memcpy(static_cast<uint8_t*>(out[i].data.mutable_raw()) + o * w, acc[i].data(), static_cast<size_t>(w));
        }
      }
    };
    if (!simple) body(0, n_out);  // the interpreter is not re-entrant across threads
    else ParallelElements(n_out, body);
    return status;
  }

  // A reduce whose body is one binary op: the input seen as [O, R, I] (the
  // reduced dims R between kept dims O and I; transposed to [O, R, 1] first
  // when the reduced dims are not adjacent), each output folded over r = 0,
  // 1, ... in order (the generic path's order, so the same bits), as vector
  // ops over the outputs.
  Status ReduceSimple(const Op& op, const Op* body, const Tensor& x, const Tensor& init, const Dims& kept,
                      const Dims& red, Tensor& out) {
    const Dims& d = x.type.dims;
    const int w = ElementTypeBytes(x.type.element);
    bool adjacent = true;
    for (size_t j = 1; j < red.size(); ++j) adjacent &= red[j] == red[j - 1] + 1;
    const Tensor* src = &x;
    Tensor moved;
    int64_t O = 1, R = 1, I = 1;
    if (red.empty()) {
      std::memcpy(out.data.mutable_raw(), x.data.raw(), static_cast<size_t>(x.type.size_bytes()));
      return OkStatus();
    }
    if (adjacent) {
      for (int64_t j = 0; j < red.front(); ++j) O *= d[static_cast<size_t>(j)];
      for (int64_t j : red) R *= d[static_cast<size_t>(j)];
      for (size_t j = static_cast<size_t>(red.back()) + 1; j < d.size(); ++j) I *= d[j];
    } else {
      Type t = x.type;
      t.dims.clear();
      Dims perm = kept;
      perm.insert(perm.end(), red.begin(), red.end());
      for (int64_t j : perm) t.dims.push_back(d[static_cast<size_t>(j)]);
      TPUMESH_ASSIGN_OR_RETURN(moved, NewTensor(t, nullptr));
      const Dims is = Strides(d);
      Dims st;
      for (int64_t j : perm) st.push_back(is[static_cast<size_t>(j)]);
      AffineCopy(x, moved, 0, st);
      src = &moved;
      for (int64_t j : kept) O *= d[static_cast<size_t>(j)];
      for (int64_t j : red) R *= d[static_cast<size_t>(j)];
    }
    uint8_t* acc = static_cast<uint8_t*>(out.data.mutable_raw());
    for (int64_t i = 0; i < O * I; ++i) std::memcpy(acc + i * w, init.data.raw(), static_cast<size_t>(w));
    ElementwiseCall c;
    c.generation = o_.generation;
    c.op = body;
    c.in_type = c.out_type = x.type.element;
    const uint8_t* xs = static_cast<const uint8_t*>(src->data.raw());
    Status status;
    std::mutex mu;
    auto fail = [&](const Status& st) {
      std::lock_guard<std::mutex> l(mu);
      status = st;
    };
    if (I == 1) {  // each output folds one contiguous row
      const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(R, 1));
      kernels::ParallelForTasks((O + grain - 1) / grain, o_.threads, [&](int64_t tb, int64_t te) {
        Status st = FoldRows(c, xs, R, tb * grain, std::min(O, te * grain), acc);
        if (!st.ok()) fail(st);
      });
    } else {
      kernels::ParallelForTasks(O, o_.threads, [&](int64_t ob, int64_t oe) {
        for (int64_t o = ob; o < oe; ++o) {
          ElementwiseCall cc = c;
          uint8_t* a = acc + o * I * w;
          cc.in[0] = a;
          for (int64_t r = 0; r < R; ++r) {
            cc.in[1] = xs + (o * R + r) * I * w;
            Status st = EvalElementwise(cc, 0, I, a);
            if (!st.ok()) return fail(st);
          }
        }
      });
    }
    (void)op;
    return status;
  }

  // sort: every operand permuted the same way along `dimension`, in the
  // order the comparator region defines (lhs_0, rhs_0, lhs_1, rhs_1, ...
  // -> i1 "lhs first"), stable (is_stable=false allows any order; stable is
  // one of them). A merge sort: a comparator that is not a strict weak order
  // gives some order, never a read out of bounds.
  Status Sort(const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
    const size_t k = in.size();
    if (k == 0 || out.size() != k || op.regions.size() != 1) return InvalidArgumentError("needs operands and a comparator");
    const Dims& d = in[0]->type.dims;
    TPUMESH_ASSIGN_OR_RETURN(int64_t dim, IntAttr(op, "dimension", -1));
    if (dim < 0) dim += static_cast<int64_t>(d.size());
    if (dim < 0 || dim >= static_cast<int64_t>(d.size())) return InvalidArgumentError("bad dimension");
    for (size_t i = 0; i < k; ++i)
      if (in[i]->type.dims != d || !(out[i].type == in[i]->type)) return InvalidArgumentError("operands differ in shape");
    const Block& body = op.regions[0].blocks[0];
    if (body.args.size() != 2 * k) return InvalidArgumentError("the comparator takes two scalars per operand");
    std::vector<Tensor> scalars;
    for (size_t i = 0; i < 2 * k; ++i) {
      Type t = in[i / 2]->type;
      t.dims.clear();
      TPUMESH_ASSIGN_OR_RETURN(Tensor x, NewTensor(t, nullptr));
      scalars.push_back(std::move(x));
    }
    const int64_t n = d[static_cast<size_t>(dim)];
    int64_t inner = 1;
    for (size_t j = static_cast<size_t>(dim) + 1; j < d.size(); ++j) inner *= d[j];
    const int64_t outer = in[0]->num_elements() / std::max<int64_t>(n * inner, 1);
    std::vector<int64_t> perm(static_cast<size_t>(n));
    Status status;
    Env env;
    for (int64_t o = 0; o < outer && status.ok(); ++o) {
      for (int64_t t = 0; t < inner && status.ok(); ++t) {
        const int64_t base = o * n * inner + t;
        std::iota(perm.begin(), perm.end(), 0);
        auto less = [&](int64_t a, int64_t b) {
          if (!status.ok()) return false;
          for (size_t i = 0; i < k; ++i) {
            const int w = ElementTypeBytes(in[i]->type.element);
            const uint8_t* src = static_cast<const uint8_t*>(in[i]->data.raw());
            std::memcpy(scalars[2 * i].data.mutable_raw(), src + (base + a * inner) * w, static_cast<size_t>(w));
            std::memcpy(scalars[2 * i + 1].data.mutable_raw(), src + (base + b * inner) * w, static_cast<size_t>(w));
          }
          auto r = RunRegion(op.regions[0], scalars, env);
          if (!r.ok() || r->size() != 1 || (*r)[0].type.element != ElementType::kPred) {
            status = r.ok() ? InvalidArgumentError("the comparator must return one i1") : r.status();
            return false;
          }
          return *(*r)[0].as<bool>();
        };
        std::stable_sort(perm.begin(), perm.end(), less);
        for (size_t i = 0; i < k; ++i) {
          const int w = ElementTypeBytes(in[i]->type.element);
          const uint8_t* src = static_cast<const uint8_t*>(in[i]->data.raw());
          uint8_t* dst = static_cast<uint8_t*>(out[i].data.mutable_raw());
          for (int64_t j = 0; j < n; ++j)
            std::memcpy(dst + (base + j * inner) * w, src + (base + perm[static_cast<size_t>(j)] * inner) * w,
                        static_cast<size_t>(w));
        }
      }
    }
    return status;
  }

  // chlo.top_k: the k largest along the last dimension, largest first, and
  // their indices; equal values keep their order. Floats compare in IEEE
  // total order (NaN above +inf, -0 below +0), as XLA's TopK.
  Status TopK(const Op& op, const Tensor& x, std::vector<Tensor>& out) {
    TPUMESH_ASSIGN_OR_RETURN(int64_t k, IntAttr(op, "k"));
    const Dims& d = x.type.dims;
    if (d.empty() || out.size() != 2 || k < 0 || k > d.back()) return InvalidArgumentError("bad k for the last dimension");
    const int64_t n = d.back(), rows = x.num_elements() / std::max<int64_t>(n, 1);
    if (out[0].num_elements() != rows * k || out[1].num_elements() != rows * k ||
        out[1].type.element != ElementType::kI32)
      return InvalidArgumentError("results must be [..., k] values and i32 indices");
    // A key per element that orders as the values do (total order for floats).
    std::vector<double> key(static_cast<size_t>(n));
    std::vector<int64_t> idx(static_cast<size_t>(n));
    const int w = ElementTypeBytes(x.type.element);
    if (IsFloat(x.type.element)) {
      Dims order(d.size());
      std::iota(order.begin(), order.end(), 0);
      TPUMESH_ASSIGN_OR_RETURN(F32Operand fo, AsF32Ordered(x, order));
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = fo.data + r * n;
        for (int64_t j = 0; j < n; ++j) {
          int32_t b;
          std::memcpy(&b, row + j, 4);
          key[static_cast<size_t>(j)] = static_cast<double>(b < 0 ? ~b ^ INT32_MIN : b);
        }
        TPUMESH_RETURN_IF_ERROR(TopKRow(key, idx, k, x, r, n, w, out));
      }
      return OkStatus();
    }
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < n; ++j) key[static_cast<size_t>(j)] = static_cast<double>(IntAt(x, r * n + j));
      TPUMESH_RETURN_IF_ERROR(TopKRow(key, idx, k, x, r, n, w, out));
    }
    return OkStatus();
  }
  static Status TopKRow(const std::vector<double>& key, std::vector<int64_t>& idx, int64_t k, const Tensor& x, int64_t r,
                        int64_t n, int w, std::vector<Tensor>& out) {
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int64_t a, int64_t b) { return key[static_cast<size_t>(a)] > key[static_cast<size_t>(b)]; });
    const uint8_t* src = static_cast<const uint8_t*>(x.data.raw());
    uint8_t* vals = static_cast<uint8_t*>(out[0].data.mutable_raw());
    int32_t* ids = out[1].mutable_as<int32_t>();
    for (int64_t j = 0; j < k; ++j) {
      const int64_t from = idx[static_cast<size_t>(j)];
      std::memcpy(vals + (r * k + j) * w, src + (r * n + from) * w, static_cast<size_t>(w));
      ids[r * k + j] = static_cast<int32_t>(from);
    }
    return OkStatus();
  }

  Status ReduceWindow(const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
    const size_t k = in.size() / 2;
    if (k == 0 || in.size() != 2 * k || out.size() != k || op.regions.size() != 1)
      return InvalidArgumentError("needs inputs, as many inits and a body");
    const Dims& d = in[0]->type.dims;
    const size_t rank = d.size();
    TPUMESH_ASSIGN_OR_RETURN(Dims win, IntsAttr(op, "window_dimensions"));
    TPUMESH_ASSIGN_OR_RETURN(Dims stride, IntsAttr(op, "window_strides", Dims(rank, 1)));
    TPUMESH_ASSIGN_OR_RETURN(Dims bdil, IntsAttr(op, "base_dilations", Dims(rank, 1)));
    TPUMESH_ASSIGN_OR_RETURN(Dims wdil, IntsAttr(op, "window_dilations", Dims(rank, 1)));
    TPUMESH_ASSIGN_OR_RETURN(Dims pad, IntsAttr(op, "padding", Dims(2 * rank, 0)));
    if (win.size() != rank || stride.size() != rank || bdil.size() != rank || wdil.size() != rank || pad.size() != 2 * rank)
      return InvalidArgumentError("window attributes have the wrong length");
    const Dims& od = out[0].type.dims;
    for (size_t j = 0; j < rank; ++j) {
      if (win[j] < 1 || stride[j] < 1 || bdil[j] < 1 || wdil[j] < 1) return InvalidArgumentError("bad window");
      const int64_t ext = (d[j] - 1) * bdil[j] + 1 + pad[2 * j] + pad[2 * j + 1];
      const int64_t wext = (win[j] - 1) * wdil[j] + 1;
      const int64_t expect = ext < wext ? 0 : (ext - wext) / stride[j] + 1;
      if (od.size() != rank || od[j] != expect) return InvalidArgumentError("result shape does not match the window");
    }
    std::vector<Type> st;
    for (size_t i = 0; i < k; ++i) st.push_back(in[k + i]->type);
    const Op* simple = k == 1 ? SimpleBody(op.regions[0]) : nullptr;
    const Dims is = Strides(d), ws = Strides(win);
    int64_t wcount = 1;
    for (int64_t x : win) wcount *= x;
    Status status;
    std::mutex mu;
    auto body = [&](int64_t b, int64_t e) {
      std::vector<std::vector<uint8_t>> acc(k, std::vector<uint8_t>(8)), nxt(k, std::vector<uint8_t>(8));
      Dims oi(rank);
      for (int64_t o = b; o < e; ++o) {
        int64_t rem = o;
        for (int j = static_cast<int>(rank) - 1; j >= 0; --j) {
          oi[static_cast<size_t>(j)] = rem % od[static_cast<size_t>(j)];
          rem /= od[static_cast<size_t>(j)];
        }
        for (size_t i = 0; i < k; ++i)
          std::memcpy(acc[i].data(), in[k + i]->data.raw(), static_cast<size_t>(ElementTypeBytes(st[i].element)));
        for (int64_t t = 0; t < wcount; ++t) {
          int64_t off = 0;
          bool inside = true;
          for (size_t j = 0; j < rank && inside; ++j) {
            const int64_t wj = (t / ws[j]) % win[j];
            const int64_t pos = oi[j] * stride[j] + wj * wdil[j] - pad[2 * j];
            if (pos < 0 || pos % bdil[j]) inside = false;
            else if (pos / bdil[j] >= d[j]) inside = false;
            else off += (pos / bdil[j]) * is[j];
          }
          // A position in the padding holds the init value (the inputs k..2k-1).
          Status s = Fold(op.regions[0], simple, in, inside ? 0 : k, inside ? off : 0, st, acc, nxt);
          if (!s.ok()) {
            std::lock_guard<std::mutex> l(mu);
            status = s;
            return;
          }
        }
        for (size_t i = 0; i < k; ++i) {
          const int w = ElementTypeBytes(st[i].element);
          std::memcpy(static_cast<uint8_t*>(out[i].data.mutable_raw()) + o * w, acc[i].data(), static_cast<size_t>(w));
        }
      }
    };
    if (!simple) body(0, out[0].num_elements());
    else ParallelElements(out[0].num_elements(), body);
    return status;
  }

  // ---- gather and scatter, by the StableHLO spec's index arithmetic.
  Status Gather(const Op& op, const Tensor& operand, const Tensor& indices, Tensor& out) {
    const Attr* dn = op.Find("dimension_numbers");
    const Dims offset_dims = DictInts(dn, "offset_dims"), collapsed = DictInts(dn, "collapsed_slice_dims"),
               obatch = DictInts(dn, "operand_batching_dims"), ibatch = DictInts(dn, "start_indices_batching_dims"),
               start_map = DictInts(dn, "start_index_map");
    const int64_t ivd = DictInt(dn, "index_vector_dim", static_cast<int64_t>(indices.type.dims.size()));
    TPUMESH_ASSIGN_OR_RETURN(Dims sizes, IntsAttr(op, "slice_sizes"));
    const Dims& od = operand.type.dims;
    const Dims& id = indices.type.dims;
    const Dims& rd = out.type.dims;
    if (sizes.size() != od.size()) return InvalidArgumentError("slice_sizes has the wrong length");
    for (size_t k = 0; k < od.size(); ++k)
      if (sizes[k] < 0 || sizes[k] > od[k]) return InvalidArgumentError("slice_sizes past the operand");
    auto in_range = [](const Dims& ds, size_t rank) {
      for (int64_t v : ds)
        if (v < 0 || v >= static_cast<int64_t>(rank)) return false;
      return true;
    };
    if (!in_range(offset_dims, rd.size()) || !in_range(collapsed, od.size()) || !in_range(obatch, od.size()) ||
        !in_range(ibatch, id.size()) || !in_range(start_map, od.size()) || obatch.size() != ibatch.size() ||
        ivd < 0 || ivd > static_cast<int64_t>(id.size()) || std::count(ibatch.begin(), ibatch.end(), ivd))
      return InvalidArgumentError("dimension numbers out of range");
    Dims batch_dims;  // result dims not in offset_dims
    for (int64_t k = 0; k < static_cast<int64_t>(rd.size()); ++k)
      if (std::find(offset_dims.begin(), offset_dims.end(), k) == offset_dims.end()) batch_dims.push_back(k);
    Dims offset_operand;  // operand dims that the offset dims walk
    for (int64_t k = 0; k < static_cast<int64_t>(od.size()); ++k)
      if (std::find(collapsed.begin(), collapsed.end(), k) == collapsed.end() &&
          std::find(obatch.begin(), obatch.end(), k) == obatch.end())
        offset_operand.push_back(k);
    if (offset_operand.size() != offset_dims.size()) return InvalidArgumentError("offset_dims do not match slice_sizes");
    const int64_t idx_vec = ivd < static_cast<int64_t>(id.size()) ? id[static_cast<size_t>(ivd)] : 1;
    if (static_cast<int64_t>(start_map.size()) != idx_vec) return InvalidArgumentError("start_index_map has the wrong length");
    const Dims is = Strides(id), os = Strides(od);
    // indices' batch dims: all but index_vector_dim, in order
    Dims ibd;
    for (int64_t k = 0; k < static_cast<int64_t>(id.size()); ++k)
      if (k != ivd) ibd.push_back(k);
    if (ibd.size() != batch_dims.size()) return InvalidArgumentError("result rank does not match the indices");
    IndexCopy(operand, out, [&](const Dims& r) -> int64_t {
      Dims full(od.size(), 0);
      int64_t ibase = 0;
      for (size_t j = 0; j < batch_dims.size(); ++j) ibase += r[static_cast<size_t>(batch_dims[j])] * is[static_cast<size_t>(ibd[j])];
      for (int64_t v = 0; v < idx_vec; ++v) {
        const int64_t at = ibase + (ivd < static_cast<int64_t>(id.size()) ? v * is[static_cast<size_t>(ivd)] : 0);
        const size_t dim = static_cast<size_t>(start_map[static_cast<size_t>(v)]);
        full[dim] = std::clamp<int64_t>(IntAt(indices, at), 0, od[dim] - sizes[dim]);
      }
      for (size_t j = 0; j < obatch.size(); ++j) {  // batching dims take the batch index
        const size_t ib = static_cast<size_t>(ibatch[j]);
        const auto pos = std::find(ibd.begin(), ibd.end(), static_cast<int64_t>(ib)) - ibd.begin();
        full[static_cast<size_t>(obatch[j])] = r[static_cast<size_t>(batch_dims[static_cast<size_t>(pos)])];
      }
      int64_t s = 0;
      for (size_t j = 0; j < offset_operand.size(); ++j)
        full[static_cast<size_t>(offset_operand[j])] += r[static_cast<size_t>(offset_dims[j])];
      for (size_t j = 0; j < od.size(); ++j) s += full[j] * os[j];
      return s;
    });
    return OkStatus();
  }

  // ---- select_and_scatter (the gradient of max pooling): for each source
  // element, its window over the operand (padding never selected), the
  // element the select region keeps (scanning the window in row-major
  // order, the current choice kept while select(current, next) holds), and
  // the scatter region folds the source into the result there, the sources
  // in row-major order; the result starts as the init value.
  Status SelectAndScatter(const Op& op, const std::vector<const Tensor*>& in, Tensor& out) {
    if (in.size() != 3 || op.regions.size() != 2) return InvalidArgumentError("needs operand, source, init and two regions");
    const Tensor& x = *in[0];
    const Tensor& src = *in[1];
    const Tensor& init = *in[2];
    const Dims& d = x.type.dims;
    const size_t rank = d.size();
    TPUMESH_ASSIGN_OR_RETURN(Dims win, IntsAttr(op, "window_dimensions", Dims(rank, 1)));
    TPUMESH_ASSIGN_OR_RETURN(Dims stride, IntsAttr(op, "window_strides", Dims(rank, 1)));
    TPUMESH_ASSIGN_OR_RETURN(Dims pad, IntsAttr(op, "padding", Dims(2 * rank, 0)));
    if (win.size() != rank || stride.size() != rank || pad.size() != 2 * rank)
      return InvalidArgumentError("window attributes have the wrong length");
    const Dims& sd = src.type.dims;
    if (sd.size() != rank) return InvalidArgumentError("the source's rank is not the operand's");
    for (size_t j = 0; j < rank; ++j) {
      if (win[j] < 1 || stride[j] < 1) return InvalidArgumentError("bad window");
      const int64_t ext = d[j] + pad[2 * j] + pad[2 * j + 1];
      const int64_t expect = ext < win[j] ? 0 : (ext - win[j]) / stride[j] + 1;
      if (sd[j] != expect)
        return InvalidArgumentError("source " + src.type.ToString() + " does not match the windows over " + x.type.ToString());
    }
    const ElementType et = x.type.element;
    if (src.type.element != et || init.type.element != et || init.num_elements() != 1 || out.type != x.type)
      return InvalidArgumentError("operand, source, init and result must share the element type");
    const int w = ElementTypeBytes(et);
    uint8_t* o = static_cast<uint8_t*>(out.data.mutable_raw());
    const uint8_t* xv = static_cast<const uint8_t*>(x.data.raw());
    const uint8_t* sv = static_cast<const uint8_t*>(src.data.raw());
    for (int64_t i = 0; i < out.num_elements(); ++i) std::memcpy(o + i * w, init.data.raw(), static_cast<size_t>(w));
    // The select region: one compare of its two arguments runs as that
    // compare; anything else through the interpreter.
    const Region& sel = op.regions[0];
    const Op* compare = nullptr;
    if (sel.blocks.size() == 1 && sel.blocks[0].ops.size() == 2 && sel.blocks[0].args.size() == 2) {
      const Op& c = sel.blocks[0].ops[0];
      const OpEntry* ce = EntryOf(c);
      if (ce && ce->scalar.kind == ScalarFn::Kind::kCompare && c.operands.size() == 2 && c.operands[0] == sel.blocks[0].args[0] &&
          c.operands[1] == sel.blocks[0].args[1] && c.results.size() == 1 &&
          sel.blocks[0].ops[1].operands == std::vector<int>{c.results[0]})
        compare = &c;
    }
    const Type scalar{Type::Kind::kTensor, et, {}, {}};
    auto select = [&](const uint8_t* a, const uint8_t* b) -> StatusOr<bool> {
      bool keep = false;
      if (compare) {
        ElementwiseCall c;
        c.generation = o_.generation;
        c.op = compare;
        c.in_type = et;
        c.out_type = ElementType::kPred;
        c.num_inputs = 2;
        c.in[0] = a;
        c.in[1] = b;
        TPUMESH_RETURN_IF_ERROR(EvalElementwise(c, 0, 1, &keep));
        return keep;
      }
      std::vector<Tensor> args;
      for (const uint8_t* v : {a, b}) {
        TPUMESH_ASSIGN_OR_RETURN(Tensor t, NewTensor(scalar, nullptr));
        std::memcpy(t.data.mutable_raw(), v, static_cast<size_t>(w));
        args.push_back(std::move(t));
      }
      Env env;
      TPUMESH_ASSIGN_OR_RETURN(std::vector<Tensor> r, RunRegion(sel, std::move(args), env));
      if (r.size() != 1 || r[0].type.element != ElementType::kPred || r[0].num_elements() != 1)
        return InvalidArgumentError("the select region must return one i1");
      return *r[0].as<bool>();
    };
    const Op* simple = SimpleBody(op.regions[1]);
    const std::vector<Type> st = {scalar};
    std::vector<uint8_t> acc(8);
    const Dims xs = Strides(d), ws = Strides(win);
    int64_t wcount = 1;
    for (int64_t v : win) wcount *= v;
    Dims si(rank, 0);
    for (int64_t s_off = 0; s_off < src.num_elements(); ++s_off) {
      int64_t rem = s_off;
      for (int j = static_cast<int>(rank) - 1; j >= 0; --j) {
        si[static_cast<size_t>(j)] = rem % sd[static_cast<size_t>(j)];
        rem /= sd[static_cast<size_t>(j)];
      }
      int64_t chosen = -1;
      for (int64_t t = 0; t < wcount; ++t) {
        int64_t off = 0;
        bool inside = true;
        for (size_t j = 0; j < rank && inside; ++j) {
          const int64_t pos = si[j] * stride[j] + (t / ws[j]) % win[j] - pad[2 * j];
          inside = pos >= 0 && pos < d[j];
          off += pos * xs[j];
        }
        if (!inside) continue;
        if (chosen < 0) {
          chosen = off;
          continue;
        }
        TPUMESH_ASSIGN_OR_RETURN(bool keep, select(xv + chosen * w, xv + off * w));
        if (!keep) chosen = off;
      }
      if (chosen < 0) continue;
      TPUMESH_RETURN_IF_ERROR(ApplyBody(op.regions[1], simple, {o + chosen * w}, {sv + s_off * w}, {acc.data()}, st));
      std::memcpy(o + chosen * w, acc.data(), static_cast<size_t>(w));
    }
    return OkStatus();
  }

  Status Scatter(const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
    const size_t k = (in.size() - 1) / 2;
    if (in.size() != 2 * k + 1 || k == 0 || out.size() != k || op.regions.size() != 1)
      return InvalidArgumentError("needs inputs, indices, as many updates and a body");
    const Tensor& indices = *in[k];
    const Attr* dn = op.Find("scatter_dimension_numbers");
    const Dims uwd = DictInts(dn, "update_window_dims"), inserted = DictInts(dn, "inserted_window_dims"),
               ibatch = DictInts(dn, "input_batching_dims"), sibatch = DictInts(dn, "scatter_indices_batching_dims"),
               to_operand = DictInts(dn, "scatter_dims_to_operand_dims");
    const Dims& id = indices.type.dims;
    const int64_t ivd = DictInt(dn, "index_vector_dim", static_cast<int64_t>(id.size()));
    const Dims& od = in[0]->type.dims;
    const Dims& ud = in[k + 1]->type.dims;
    auto in_range = [](const Dims& ds, size_t rank) {
      for (int64_t v : ds)
        if (v < 0 || v >= static_cast<int64_t>(rank)) return false;
      return true;
    };
    for (size_t i = 0; i < k; ++i)
      if (in[i]->type.dims != od || !(out[i].type == in[i]->type) || in[k + 1 + i]->type.dims != ud)
        return InvalidArgumentError("inputs, updates and results differ in shape");
    if (!in_range(uwd, ud.size()) || !in_range(inserted, od.size()) || !in_range(ibatch, od.size()) ||
        !in_range(sibatch, id.size()) || !in_range(to_operand, od.size()) || ibatch.size() != sibatch.size() ||
        ivd < 0 || ivd > static_cast<int64_t>(id.size()) || std::count(sibatch.begin(), sibatch.end(), ivd))
      return InvalidArgumentError("dimension numbers out of range");
    for (size_t i = 0; i < k; ++i)
      std::memcpy(out[i].data.mutable_raw(), in[i]->data.raw(), static_cast<size_t>(out[i].type.size_bytes()));
    Dims update_scatter_dims;
    for (int64_t j = 0; j < static_cast<int64_t>(ud.size()); ++j)
      if (std::find(uwd.begin(), uwd.end(), j) == uwd.end()) update_scatter_dims.push_back(j);
    Dims window_operand;
    for (int64_t j = 0; j < static_cast<int64_t>(od.size()); ++j)
      if (std::find(inserted.begin(), inserted.end(), j) == inserted.end() &&
          std::find(ibatch.begin(), ibatch.end(), j) == ibatch.end())
        window_operand.push_back(j);
    if (window_operand.size() != uwd.size()) return InvalidArgumentError("update_window_dims do not match the operand");
    Dims ibd;
    for (int64_t j = 0; j < static_cast<int64_t>(id.size()); ++j)
      if (j != ivd) ibd.push_back(j);
    if (ibd.size() != update_scatter_dims.size()) return InvalidArgumentError("updates do not match the indices");
    const int64_t idx_vec = ivd < static_cast<int64_t>(id.size()) ? id[static_cast<size_t>(ivd)] : 1;
    if (static_cast<int64_t>(to_operand.size()) != idx_vec) return InvalidArgumentError("scatter_dims_to_operand_dims has the wrong length");
    const Dims is = Strides(id), os = Strides(od);
    std::vector<Type> st;
    for (size_t i = 0; i < k; ++i) {
      Type t = in[i]->type;
      t.dims.clear();
      st.push_back(t);
    }
    const Op* simple = k == 1 ? SimpleBody(op.regions[0]) : nullptr;
    const int64_t n = in[k + 1]->num_elements();
    Dims u(ud.size(), 0);
    std::vector<std::vector<uint8_t>> tmp(k, std::vector<uint8_t>(8));
    for (int64_t e = 0; e < n; ++e) {
      Dims full(od.size(), 0);
      int64_t ibase = 0;
      for (size_t j = 0; j < update_scatter_dims.size(); ++j)
        ibase += u[static_cast<size_t>(update_scatter_dims[j])] * is[static_cast<size_t>(ibd[j])];
      for (int64_t v = 0; v < idx_vec; ++v) {
        const int64_t at = ibase + (ivd < static_cast<int64_t>(id.size()) ? v * is[static_cast<size_t>(ivd)] : 0);
        full[static_cast<size_t>(to_operand[static_cast<size_t>(v)])] = IntAt(indices, at);
      }
      for (size_t j = 0; j < ibatch.size(); ++j) {
        const auto pos = std::find(ibd.begin(), ibd.end(), sibatch[j]) - ibd.begin();
        full[static_cast<size_t>(ibatch[j])] = u[static_cast<size_t>(update_scatter_dims[static_cast<size_t>(pos)])];
      }
      bool inside = true;
      for (size_t j = 0; j < window_operand.size(); ++j)
        full[static_cast<size_t>(window_operand[j])] += u[static_cast<size_t>(uwd[j])];
      for (size_t j = 0; j < od.size(); ++j) inside &= full[j] >= 0 && full[j] < od[j];
      if (inside) {
        int64_t off = 0;
        for (size_t j = 0; j < od.size(); ++j) off += full[j] * os[j];
        std::vector<const uint8_t*> ai, xi;
        std::vector<uint8_t*> ao;
        for (size_t i = 0; i < k; ++i) {
          const int w = ElementTypeBytes(st[i].element);
          ai.push_back(static_cast<const uint8_t*>(out[i].data.raw()) + off * w);
          xi.push_back(static_cast<const uint8_t*>(in[k + 1 + i]->data.raw()) + e * w);
          ao.push_back(tmp[i].data());
        }
        TPUMESH_RETURN_IF_ERROR(ApplyBody(op.regions[0], simple, ai, xi, ao, st));
        for (size_t i = 0; i < k; ++i) {
          const int w = ElementTypeBytes(st[i].element);
          std::memcpy(static_cast<uint8_t*>(out[i].data.mutable_raw()) + off * w, tmp[i].data(), static_cast<size_t>(w));
        }
      }
      for (int j = static_cast<int>(ud.size()) - 1; j >= 0; --j) {
        if (++u[static_cast<size_t>(j)] < ud[static_cast<size_t>(j)]) break;
        u[static_cast<size_t>(j)] = 0;
      }
    }
    return OkStatus();
  }

  // ---- collectives: every device's operand is gathered to every device
  // (mesh AllGather over all axes, as raw bytes), and each device assembles
  // its result from its replica group's values, in group order: the same
  // bits on every member, for any grouping. Priced on the ICI by the group.
  StatusOr<std::vector<std::vector<int64_t>>> Groups(const Op& op) const {
    std::vector<std::vector<int64_t>> groups;
    const Attr* rg = op.Find("replica_groups");
    if (rg && rg->kind == Attr::Kind::kDense && rg->type.dims.size() == 2 && rg->type.num_elements() > 0) {
      TPUMESH_ASSIGN_OR_RETURN(Dims flat, rg->Ints());
      const int64_t per = rg->type.dims[1];
      for (int64_t g = 0; g < rg->type.dims[0]; ++g) {
        std::vector<int64_t> grp;
        for (int64_t j = 0; j < per; ++j) {
          const int64_t d = flat[static_cast<size_t>(g * per + j)];
          if (d < 0) continue;  // padding of ragged groups
          if (d >= site_.num_devices)
            return InvalidArgumentError("replica group names device " + std::to_string(d) + " of a mesh of " +
                                        std::to_string(site_.num_devices));
          grp.push_back(d);
        }
        groups.push_back(std::move(grp));
      }
    } else if (rg && rg->kind == Attr::Kind::kList && !rg->list.empty()) {
      for (const Attr& g : rg->list) {
        TPUMESH_ASSIGN_OR_RETURN(Dims grp, g.Ints());
        groups.push_back(grp);
      }
    } else {
      std::vector<int64_t> all(static_cast<size_t>(site_.num_devices));
      std::iota(all.begin(), all.end(), 0);
      groups.push_back(all);
    }
    return groups;
  }

  StatusOr<std::vector<int64_t>> MyGroup(const Op& op) const {
    TPUMESH_ASSIGN_OR_RETURN(auto groups, Groups(op));
    for (auto& g : groups)
      if (std::find(g.begin(), g.end(), site_.device_id) != g.end()) return g;
    return InvalidArgumentError("device " + std::to_string(site_.device_id) + " is in no replica group");
  }

  // Every device's copy of x, indexed by device id.
  StatusOr<std::vector<const uint8_t*>> GatherAll(const Tensor& x, mesh::Array* keep) {
    if (!site_.collectives) return FailedPreconditionError("collectives need a mesh (run the module with tpumesh run)");
    std::vector<std::string> axes;
    for (const auto& a : site_.axes) axes.push_back(a.name);
    const int64_t bytes = x.type.size_bytes();
    TPUMESH_ASSIGN_OR_RETURN(mesh::Array view, x.data.View(mesh::DType::kU8, {std::max<int64_t>(bytes, 0)}));
    TPUMESH_ASSIGN_OR_RETURN(*keep, site_.collectives->AllGather(view, axes, 0, false));
    std::vector<const uint8_t*> out;
    for (int d = 0; d < site_.num_devices; ++d) out.push_back(static_cast<const uint8_t*>(keep->raw()) + d * bytes);
    return out;
  }

  Status Collective(Run run, const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
    if (in.size() != 1 || out.size() != 1) return UnimplementedError("variadic collectives are not supported");
    const Tensor& x = *in[0];
    Tensor& y = out[0];
    const int w = ElementTypeBytes(x.type.element);
    mesh::Array keep;
    TPUMESH_ASSIGN_OR_RETURN(auto all, GatherAll(x, &keep));
    uint8_t* dst = static_cast<uint8_t*>(y.data.mutable_raw());
    const int me = site_.device_id;
    if (run == Run::kCollectivePermute) {
      const Attr* p = op.Find("source_target_pairs");
      if (!p) return InvalidArgumentError("needs source_target_pairs");
      TPUMESH_ASSIGN_OR_RETURN(Dims flat, p->Ints());
      if (flat.size() % 2) return InvalidArgumentError("source_target_pairs must be pairs");
      if (!(x.type == y.type)) return InvalidArgumentError("result type differs from the operand's");
      for (size_t i = 0; i < flat.size(); i += 2) {
        if (flat[i] < 0 || flat[i] >= site_.num_devices || flat[i + 1] < 0 || flat[i + 1] >= site_.num_devices)
          return InvalidArgumentError("source_target_pairs names a device outside the mesh");
        if (flat[i + 1] == me)
          std::memcpy(dst, all[static_cast<size_t>(flat[i])], static_cast<size_t>(x.type.size_bytes()));
      }
      return OkStatus();
    }
    TPUMESH_ASSIGN_OR_RETURN(std::vector<int64_t> group, MyGroup(op));
    const int64_t n = static_cast<int64_t>(group.size());
    const int64_t pos = std::find(group.begin(), group.end(), me) - group.begin();
    const Dims& d = x.type.dims;
    if (run == Run::kAllReduce || run == Run::kReduceScatter) {
      if (op.regions.size() != 1) return InvalidArgumentError("needs a body");
      // the reduction of the group's values, in group order
      const int64_t cnt = x.num_elements();
      std::vector<uint8_t> acc(static_cast<size_t>(cnt * w)), nxt(acc.size());
      std::memcpy(acc.data(), all[static_cast<size_t>(group[0])], acc.size());
      const Op* simple = SimpleBody(op.regions[0]);
      Type scalar = x.type;
      scalar.dims.clear();
      for (int64_t j = 1; j < n; ++j) {
        const uint8_t* v = all[static_cast<size_t>(group[static_cast<size_t>(j)])];
        if (simple) {
          ElementwiseCall c;
          c.op = simple;
          c.in_type = c.out_type = x.type.element;
          c.in[0] = acc.data();
          c.in[1] = v;
          TPUMESH_RETURN_IF_ERROR(EvalElementwise(c, 0, cnt, nxt.data()));
        } else {
          for (int64_t e = 0; e < cnt; ++e)
            TPUMESH_RETURN_IF_ERROR(ApplyBody(op.regions[0], nullptr, {acc.data() + e * w}, {v + e * w}, {nxt.data() + e * w}, {scalar}));
        }
        std::swap(acc, nxt);
      }
      if (run == Run::kAllReduce) {
        if (!(x.type == y.type)) return InvalidArgumentError("result type differs from the operand's");
        std::memcpy(dst, acc.data(), acc.size());
        return OkStatus();
      }
      TPUMESH_ASSIGN_OR_RETURN(int64_t sd, IntAttr(op, "scatter_dimension"));
      if (sd < 0 || sd >= static_cast<int64_t>(d.size()) || d[static_cast<size_t>(sd)] % n ||
          y.type.dims[static_cast<size_t>(sd)] * n != d[static_cast<size_t>(sd)])
        return InvalidArgumentError("scatter_dimension does not split evenly over the group");
      return CopyBlock(acc.data(), x.type, y, sd, pos, n);
    }
    if (run == Run::kAllGather) {
      TPUMESH_ASSIGN_OR_RETURN(int64_t ad, IntAttr(op, "all_gather_dim"));
      if (ad < 0 || ad >= static_cast<int64_t>(d.size()) || y.type.dims[static_cast<size_t>(ad)] != d[static_cast<size_t>(ad)] * n)
        return InvalidArgumentError("result does not match all_gather_dim over the group");
      int64_t outer = 1, inner = w;
      for (int64_t k = 0; k < ad; ++k) outer *= d[static_cast<size_t>(k)];
      for (size_t k = static_cast<size_t>(ad); k < d.size(); ++k) inner *= d[k];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < n; ++j)
          std::memcpy(dst + (o * n + j) * inner, all[static_cast<size_t>(group[static_cast<size_t>(j)])] + o * inner,
                      static_cast<size_t>(inner));
      return OkStatus();
    }
    if (run == Run::kAllToAll) {
      TPUMESH_ASSIGN_OR_RETURN(int64_t sd, IntAttr(op, "split_dimension"));
      TPUMESH_ASSIGN_OR_RETURN(int64_t cd, IntAttr(op, "concat_dimension"));
      TPUMESH_ASSIGN_OR_RETURN(int64_t sc, IntAttr(op, "split_count"));
      if (sc != n || sd < 0 || cd < 0 || sd >= static_cast<int64_t>(d.size()) || cd >= static_cast<int64_t>(d.size()) ||
          d[static_cast<size_t>(sd)] % n)
        return InvalidArgumentError("split_count, split_dimension or concat_dimension does not fit the group");
      // member j's block `pos` along sd, concatenated over j along cd
      Type block = x.type;
      block.dims[static_cast<size_t>(sd)] /= n;
      const int64_t bbytes = block.size_bytes();
      std::vector<uint8_t> blocks(static_cast<size_t>(bbytes * n));
      for (int64_t j = 0; j < n; ++j) {
        TPUMESH_ASSIGN_OR_RETURN(Tensor b, NewTensor(block, nullptr));
        TPUMESH_RETURN_IF_ERROR(CopyBlock(all[static_cast<size_t>(group[static_cast<size_t>(j)])], x.type, b, sd, pos, n));
        std::memcpy(blocks.data() + j * bbytes, b.data.raw(), static_cast<size_t>(bbytes));
      }
      int64_t outer = 1, inner = w;
      for (int64_t k = 0; k < cd; ++k) outer *= block.dims[static_cast<size_t>(k)];
      for (size_t k = static_cast<size_t>(cd); k < block.dims.size(); ++k) inner *= block.dims[k];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < n; ++j)
          std::memcpy(dst + (o * n + j) * inner, blocks.data() + j * bbytes + o * inner, static_cast<size_t>(inner));
      return OkStatus();
    }
    return UnimplementedError("collective not supported");
  }

  // y = block `index` of `n` along `dim` of the array at src (of type t).
  static Status CopyBlock(const uint8_t* src, const Type& t, Tensor& y, int64_t dim, int64_t index, int64_t n) {
    const int w = ElementTypeBytes(t.element);
    int64_t outer = 1, inner = w;
    for (int64_t k = 0; k < dim; ++k) outer *= t.dims[static_cast<size_t>(k)];
    for (size_t k = static_cast<size_t>(dim) + 1; k < t.dims.size(); ++k) inner *= t.dims[k];
    const int64_t full = t.dims[static_cast<size_t>(dim)], part = full / n;
    uint8_t* dst = static_cast<uint8_t*>(y.data.mutable_raw());
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * part * inner, src + (o * full + index * part) * inner, static_cast<size_t>(part * inner));
    return OkStatus();
  }

  // ---------------------------------------------------------------- control

  StatusOr<std::vector<Tensor>> Control(Run run, const Op& op, const std::vector<const Tensor*>& in, Env& env) {
    std::vector<Tensor> args;
    for (const Tensor* t : in) args.push_back(*t);
    if (run == Run::kCall) {
      const Func* f = m_.FindFunc(op.callee);
      if (!f) return Fail(op, "unknown function @" + op.callee);
      return Call(*f, std::move(args));
    }
    if (run == Run::kPassThrough) return args;
    if (run == Run::kShardingConstraint) {
      if (const Attr* sh = op.Find("sharding"); sh && args.size() == 1)
        Constrain(op.loc, "sharding constraint", args[0], SplitOfSdy(*sh, args[0].type));
      return args;
    }
    if (run == Run::kCustomCall) return CustomCall(op, std::move(args));
    if (run == Run::kWhile) {
      if (op.regions.size() != 2) return Fail(op, "needs cond and body regions");
      while (true) {
        TPUMESH_ASSIGN_OR_RETURN(std::vector<Tensor> c, RunRegion(op.regions[0], args, env));
        if (c.size() != 1 || c[0].type.element != ElementType::kPred || c[0].num_elements() != 1)
          return Fail(op, "the condition must return one i1");
        if (!*c[0].as<bool>()) break;
        TPUMESH_ASSIGN_OR_RETURN(args, RunRegion(op.regions[1], std::move(args), env));
        if (args.size() != op.results.size()) return Fail(op, "the body returns the wrong number of values");
      }
      return args;
    }
    if (run == Run::kCase || run == Run::kIf) {
      if (in.size() != 1 || in[0]->num_elements() != 1) return Fail(op, "needs one scalar index");
      int64_t i = 0;
      if (run == Run::kIf) {
        i = *in[0]->as<bool>() ? 0 : 1;
      } else {
        i = ScalarInt(*in[0]);
        if (i < 0 || i >= static_cast<int64_t>(op.regions.size())) i = static_cast<int64_t>(op.regions.size()) - 1;
      }
      if (op.regions.empty()) return Fail(op, "has no branches");
      return RunRegion(op.regions[static_cast<size_t>(i)], {}, env);
    }
    if (run == Run::kManualComputation) return Manual(op, std::move(args), env);
    return Fail(op, "internal: not a control op");
  }

  // A device's shard of a global value and back, for a sharding.
  StatusOr<Tensor> Slice(const Tensor& global, const Sharding& s, const Type& local, const Op& op) {
    TPUMESH_ASSIGN_OR_RETURN(auto shard, s.ShardOf(site_.device_id, global.type.dims));
    TPUMESH_ASSIGN_OR_RETURN(Tensor t, At(op, NewTensor(local, site_.device, o_.dry_run, "shard")));
    for (size_t k = 0; k < shard.size(); ++k)
      if (global.type.dims[k] / shard[k].count != local.dims[k])
        return Fail(op, "the shard of " + global.type.ToString() + " is not " + local.ToString());
    if (o_.dry_run) return t;
    const Dims gs = Strides(global.type.dims);
    IndexCopy(global, t, [&](const Dims& o) {
      int64_t s2 = 0;
      for (size_t k = 0; k < o.size(); ++k) s2 += (shard[k].index * local.dims[k] + o[k]) * gs[k];
      return s2;
    });
    return t;
  }
  StatusOr<Tensor> Assemble(const Tensor& local, const Sharding& s, const Type& global, const Op& op) {
    TPUMESH_ASSIGN_OR_RETURN(Tensor g, At(op, NewTensor(global, site_.device, o_.dry_run, "global")));
    if (o_.dry_run) return g;
    mesh::Array keep;
    TPUMESH_ASSIGN_OR_RETURN(auto all, GatherAll(local, &keep));
    const int w = ElementTypeBytes(global.element);
    const Dims gs = Strides(global.dims);
    uint8_t* dst = static_cast<uint8_t*>(g.data.mutable_raw());
    for (int d = 0; d < site_.num_devices; ++d) {
      TPUMESH_ASSIGN_OR_RETURN(auto shard, s.ShardOf(d, global.dims));
      for (size_t k = 0; k < shard.size(); ++k)
        if (global.dims[k] / shard[k].count != local.type.dims[k])
          return Fail(op, "the shard of " + global.ToString() + " is not " + local.type.ToString());
      const int64_t cnt = local.num_elements();
      Dims idx(local.type.dims.size(), 0);
      for (int64_t i = 0; i < cnt; ++i) {
        int64_t o = 0;
        for (size_t k = 0; k < idx.size(); ++k) o += (shard[k].index * local.type.dims[k] + idx[k]) * gs[k];
        std::memcpy(dst + o * w, all[static_cast<size_t>(d)] + i * w, static_cast<size_t>(w));
        for (int k = static_cast<int>(idx.size()) - 1; k >= 0; --k) {
          if (++idx[static_cast<size_t>(k)] < local.type.dims[static_cast<size_t>(k)]) break;
          idx[static_cast<size_t>(k)] = 0;
        }
      }
    }
    return g;
  }

  StatusOr<std::vector<Tensor>> Manual(const Op& op, std::vector<Tensor> args, Env& env) {
    if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1) return Fail(op, "needs a body");
    auto list = [&](std::string_view key) -> std::vector<const Attr*> {
      std::vector<const Attr*> out;
      const Attr* a = op.Find(key);
      if (!a) return out;
      const Attr* l = a;
      if (a->kind == Attr::Kind::kDict && a->Find("list")) l = a->Find("list");
      for (const Attr& x : l->list) out.push_back(&x);
      return out;
    };
    const auto ins = list("in_shardings"), outs = list("out_shardings");
    const Block& body = op.regions[0].blocks[0];
    if (ins.size() != args.size() || outs.size() != op.results.size())
      return Fail(op, "in_shardings/out_shardings do not match the operands/results");
    std::vector<Tensor> local;
    for (size_t i = 0; i < args.size(); ++i) {
      TPUMESH_ASSIGN_OR_RETURN(Sharding s, At(op, SdySharding(*ins[i], m_, site_.axes)));
      TPUMESH_ASSIGN_OR_RETURN(Tensor t, Slice(args[i], s, body.arg_types[i], op));
      local.push_back(std::move(t));
    }
    TPUMESH_ASSIGN_OR_RETURN(std::vector<Tensor> res, RunRegion(op.regions[0], std::move(local), env));
    std::vector<Tensor> out;
    for (size_t i = 0; i < res.size(); ++i) {
      TPUMESH_ASSIGN_OR_RETURN(Sharding s, At(op, SdySharding(*outs[i], m_, site_.axes)));
      TPUMESH_ASSIGN_OR_RETURN(Tensor g, Assemble(res[i], s, op.result_types[i], op));
      g.split = SplitOf(s, site_.device_id, g.type.dims);  // the shards stay where they are
      out.push_back(std::move(g));
    }
    return out;
  }

  StatusOr<std::vector<Tensor>> CustomCall(const Op& op, std::vector<Tensor> args) {
    if (args.size() != 1 || op.result_types.size() != 1) return Fail(op, "@" + op.callee + " takes one operand");
    const Attr* sh = op.Find("mhlo.sharding");
    if (op.callee == "Sharding") {
      if (sh && sh->kind == Attr::Kind::kString) {
        last_sharding_ = sh->s;
        Constrain(op.loc, "sharding constraint", args[0], SplitOfMhlo(sh->s, args[0].type));
      }
      return args;
    }
    if (op.callee == "SPMDFullToShardShape") {
      TPUMESH_ASSIGN_OR_RETURN(Sharding s, At(op, MhloSharding(last_sharding_, site_.num_devices)));
      TPUMESH_ASSIGN_OR_RETURN(Tensor t, Slice(args[0], s, op.result_types[0], op));
      return std::vector<Tensor>{std::move(t)};
    }
    if (op.callee == "SPMDShardToFullShape") {
      if (!sh || sh->kind != Attr::Kind::kString) return Fail(op, "needs mhlo.sharding");
      TPUMESH_ASSIGN_OR_RETURN(Sharding s, At(op, MhloSharding(sh->s, site_.num_devices)));
      TPUMESH_ASSIGN_OR_RETURN(Tensor g, Assemble(args[0], s, op.result_types[0], op));
      g.split = SplitOf(s, site_.device_id, g.type.dims);  // the shards stay where they are
      return std::vector<Tensor>{std::move(g)};
    }
    return Fail(op, "unsupported custom call @" + op.callee);
  }

  // ---------------------------------------------------------------- partitioning

  // How a sharding attribute (GSPMD's mhlo.sharding string in an attribute
  // dict, or Shardy's sdy.sharding) splits a value of `t` on this device;
  // replicated when there is none or it cannot be read.
  Split DeclaredSplit(const Attr& attrs, const Type& t) const {
    if (const Attr* sh = attrs.Find("mhlo.sharding"); sh && sh->kind == Attr::Kind::kString) return SplitOfMhlo(sh->s, t);
    if (const Attr* sh = attrs.Find("sdy.sharding")) return SplitOfSdy(*sh, t);
    return {};
  }
  Split SplitOfMhlo(const std::string& text, const Type& t) const {
    auto s = MhloSharding(text, site_.num_devices);
    return s.ok() ? SplitOf(*s, site_.device_id, t.dims) : Split{};
  }
  Split SplitOfSdy(const Attr& sharding, const Type& t) const {
    auto s = SdySharding(sharding, m_, site_.axes);
    return s.ok() ? SplitOf(*s, site_.device_id, t.dims) : Split{};
  }

  // A value made to hold `want` (a sharding constraint, a result's
  // sharding): free when it only splits further (each device keeps a piece
  // of what it has), else an all-gather of its pieces first.
  void Constrain(const Location& loc, const std::string& what, Tensor& t, const Split& want) {
    bool subset = true;
    for (size_t k = 0; k < t.split.dims.size() && subset; ++k)
      subset = !t.split.dims[k].split() || t.split.dims[k] == want.dim(k);
    if (!subset) PriceReshard(loc, mesh::CollectiveKind::kAllGather, t.split.Local(t.type), t.split.Members(), what);
    t.split = want;
  }

  // The op's splits (hlo/partition.h): sets the results' splits, prices the
  // all-gathers of operands the partitioned op needs whole, and gives the
  // local types the op is priced on. Partial sums are returned in
  // `reduced_over`, priced after the op by PricePartialSums.
  void Partition(const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out,
                 std::vector<Type>& in_local, std::vector<Type>& out_local, std::vector<DeviceGroup>& reduced_over) {
    std::vector<Type> in_t, out_t;
    std::vector<Split> in_s;
    for (const Tensor* t : in) {
      in_t.push_back(t->type);
      in_s.push_back(t->split);
    }
    for (const Tensor& t : out) out_t.push_back(t.type);
    Partitioned p = Propagate(op, in_t, in_s, out_t);
    for (size_t i = 0; i < in.size(); ++i) {
      const bool whole = std::find(p.gathered.begin(), p.gathered.end(), i) != p.gathered.end();
      if (whole) PriceReshard(op.loc, mesh::CollectiveKind::kAllGather, in_s[i].Local(in_t[i]), in_s[i].Members(),
                              op.name + " operand " + std::to_string(i));
      in_local.push_back(i < p.read.size() ? p.read[i].Local(in_t[i]) : in_t[i]);
    }
    for (size_t j = 0; j < out.size(); ++j) {
      out[j].split = j < p.results.size() ? p.results[j] : Split{};
      out_local.push_back(out[j].split.Local(out_t[j]));
    }
    reduced_over = std::move(p.reduced_over);
  }
  void PricePartialSums(const Op& op, const std::vector<Type>& out_local, const std::vector<DeviceGroup>& groups) {
    for (const DeviceGroup& g : groups)
      for (const Type& t : out_local) PriceReshard(op.loc, mesh::CollectiveKind::kPsum, t, *g, op.name + " partial sums");
  }

  // A collective the partitioned program adds (not in the module): priced
  // on the ICI like the module's own; an all-reduce's sums count as flops,
  // as XLA counts them.
  void PriceReshard(const Location& loc, mesh::CollectiveKind kind, const Type& local, const std::vector<int>& members,
                    const std::string& why) {
    if (!o_.ops || members.size() < 2) return;
    mesh::OpRecord r;
    const size_t slash = loc.name.rfind('/');
    r.module = slash == std::string::npos ? "" : loc.name.substr(0, slash);
    r.name = std::string(mesh::CollectiveName(kind));
    r.type = "collective";
    r.shape = local.ToString() + " (partitioning: " + why + ")";
    if (kind == mesh::CollectiveKind::kPsum) r.cost.flops = static_cast<double>(local.num_elements());
    if (site_.device != nullptr && site_.topology != nullptr) {
      const auto cost = mesh::ModelCollective(site_.device->chip(), *site_.topology, kind, members, local.size_bytes(), {});
      r.ici_seconds = cost.seconds;
      r.ici_bytes = cost.bytes_sent_per_device;
    }
    o_.ops->push_back(std::move(r));
  }

  // ---------------------------------------------------------------- pricing

  // Fusion, as XLA does it on a TPU: elementwise and layout ops feed their
  // consumers without a trip through HBM (loop fusion, input fusion into a
  // reduce, output fusion after a matmul or conv). A value is written to
  // HBM, and read back by each consumer, only when some consumer cannot
  // take it fused (a matmul, conv, gather, collective, call, loop or the
  // return); arguments live in HBM.
  static bool Fusible(const Op& op) {
    const OpEntry* e = EntryOf(op);
    return e && e->fusible;
  }
  void MarkMaterialized() {
    materialized_.assign(static_cast<size_t>(m_.num_values), false);
    std::function<void(const Region&)> walk = [&](const Region& r) {
      for (const Block& b : r.blocks) {
        for (int a : b.args) materialized_[static_cast<size_t>(a)] = true;
        for (const Op& op : b.ops) {
          if (!Fusible(op))
            for (int v : op.operands) materialized_[static_cast<size_t>(v)] = true;
          for (const Region& inner : op.regions) walk(inner);
        }
      }
    };
    for (const Func& f : m_.funcs) walk(f.body);
    MarkAttention();
  }
  // Attention as our models price it (models/nn.h: a flash kernel whose
  // scores never leave the chip): a dot_general operand that is a softmax
  // (an exponential and a reduce, fused) of another dot_general's product,
  // and feeds that dot_general alone, is not written to HBM. Everything
  // upstream of it back to the scores is fused already, so the attention
  // moves Q, K, V and its output, as our Attention record does.
  void MarkAttention() {
    static const OpEntry* const kDotGeneral = FindOp("stablehlo.dot_general");
    auto is_dot_general = [](const Op& op) { return EntryOf(op) == kDotGeneral; };
    std::vector<const Op*> producer(static_cast<size_t>(m_.num_values), nullptr);
    std::vector<int> uses(static_cast<size_t>(m_.num_values), 0);
    std::vector<const Op*> dots;
    std::function<void(const Region&)> walk = [&](const Region& r) {
      for (const Block& b : r.blocks)
        for (const Op& op : b.ops) {
          for (int v : op.results) producer[static_cast<size_t>(v)] = &op;
          for (int v : op.operands) ++uses[static_cast<size_t>(v)];
          if (is_dot_general(op)) dots.push_back(&op);
          for (const Region& inner : op.regions) walk(inner);
        }
    };
    for (const Func& f : m_.funcs) walk(f.body);
    for (const Op* dot : dots) {
      for (int v : dot->operands) {
        if (uses[static_cast<size_t>(v)] != 1) continue;
        // Walk the fused producers back (bounded), looking for exp, a
        // reduce and a dot_general's product.
        bool exp = false, reduce = false, scores = false;
        std::vector<int> todo = {v}, seen;
        while (!todo.empty() && seen.size() < 64) {
          const int u = todo.back();
          todo.pop_back();
          if (std::find(seen.begin(), seen.end(), u) != seen.end()) continue;
          seen.push_back(u);
          const Op* p = producer[static_cast<size_t>(u)];
          if (p == nullptr) continue;
          if (is_dot_general(*p)) {
            scores = true;
            continue;
          }
          if (!Fusible(*p)) continue;
          const OpEntry* pe = EntryOf(*p);  // fusible: in the table
          exp = exp || (pe->scalar.kind == ScalarFn::Kind::kUnary && pe->scalar.un == Un::kExp);
          reduce = reduce || pe->run == Run::kReduce;
          for (int w : p->operands) todo.push_back(w);
        }
        if (exp && reduce && scores) materialized_[static_cast<size_t>(v)] = false;
      }
    }
  }
  double HbmBytesRead(const Op& op, const std::vector<Type>& in) const {
    double b = 0;
    for (size_t i = 0; i < in.size(); ++i)
      if (materialized_[static_cast<size_t>(op.operands[i])]) b += static_cast<double>(in[i].size_bytes());
    return b;
  }
  double HbmBytesWritten(const Op& op, const std::vector<Type>& out) const {
    double b = 0;
    for (size_t i = 0; i < out.size(); ++i)
      if (materialized_[static_cast<size_t>(op.results[i])]) b += static_cast<double>(out[i].size_bytes());
    return b;
  }

  void Price(const OpEntry& e, const Op& op, const std::vector<Type>& in, const std::vector<Type>& out) {
    mesh::OpRecord r;
    const std::string& loc = op.loc.name;
    const size_t slash = loc.rfind('/');
    r.name = loc.empty() ? op.name.substr(op.name.find('.') + 1) : (slash == std::string::npos ? loc : loc.substr(slash + 1));
    r.module = slash == std::string::npos ? "" : loc.substr(0, slash);
    r.type = std::string(e.category);
    std::string shape;
    for (const Type& t : in) shape += (shape.empty() ? "" : " ") + t.ToString();
    r.shape = shape + " -> " + (out.empty() ? std::string() : out[0].ToString());
    const double in_bytes = HbmBytesRead(op, in), out_bytes = HbmBytesWritten(op, out);
    const double n_out = out.empty() ? 0 : static_cast<double>(out[0].num_elements());
    r.precision = kernels::Precision::kDefault;
    switch (e.price) {
      case Price::kFlop:
      case Price::kTranscendental:
      case Price::kErfInv:
        r.cost.flops = e.price == Price::kFlop ? n_out : e.price == Price::kErfInv ? 37 * n_out : 0;
        r.cost.transcendentals = e.price == Price::kTranscendental ? n_out : e.price == Price::kErfInv ? 2 * n_out : 0;
        r.cost.bytes_read = in_bytes;
        r.cost.bytes_written = out_bytes;
        break;
      case Price::kUnset:  // refused by tests/hlo/registry_test.cc
      case Price::kFree:
      case Price::kRegions:
        return;  // not an op on the chip
      case Price::kMove:
        r.cost.bytes_read = in_bytes;
        r.cost.bytes_written = out_bytes;
        break;
      case Price::kWritten:
        r.cost.bytes_written = out_bytes;
        break;
      case Price::kUpdate:
        r.cost.bytes_read = static_cast<double>(in[1].size_bytes());
        r.cost.bytes_written = r.cost.bytes_read;
        break;
      case Price::kDot: {
        auto dd = GetDotDims(op, in[0], in[1]);
        if (!dd.ok()) return;
        const double B = static_cast<double>(Prod(in[0], dd->lb)), M = static_cast<double>(Prod(in[0], dd->lf)),
                     K = static_cast<double>(Prod(in[0], dd->lc)), N = static_cast<double>(Prod(in[1], dd->rf));
        r.cost.flops = 2 * B * M * N * K;
        r.cost.bytes_read = in_bytes;
        r.cost.bytes_written = out_bytes;
        AddMxu(op, M, N, K, B, OperandHbmBytes(op, in, 0), OperandHbmBytes(op, in, 1), out_bytes, r);
        break;
      }
      case Price::kConvolution: {
        auto cs = GetConvShape(op, in[0], in[1], out[0]);
        if (!cs.ok()) return;
        // XLA's count: 2 x output features x input features per group x the
        // taps that land inside the (dilated) input, summed over pixels.
        double valid = 1;
        for (size_t k = 0; k < cs->in_sp.size(); ++k) {
          double v = 0;
          for (int64_t o = 0; o < cs->out_sp[k]; ++o)
            for (int64_t t = 0; t < cs->k_sp[k]; ++t) {
              const int64_t pos = o * cs->stride[k] + t * cs->rhs_dil[k] - cs->pad_lo[k];
              if (pos >= 0 && pos % cs->lhs_dil[k] == 0 && pos / cs->lhs_dil[k] < cs->in_sp[k]) v += 1;
            }
          valid *= v;
        }
        const double G = static_cast<double>(cs->groups);
        const double ig = static_cast<double>(cs->cin) / G, og = static_cast<double>(cs->cout) / G;
        r.cost.flops = 2 * static_cast<double>(cs->batch) * valid * ig * og * G;
        r.cost.bytes_read = in_bytes;
        r.cost.bytes_written = out_bytes;
        double taps = 1, pixels = 1;
        for (size_t k = 0; k < cs->in_sp.size(); ++k) {
          taps *= static_cast<double>(cs->k_sp[k]);
          pixels *= static_cast<double>(cs->out_sp[k]);
        }
        AddMxu(op, static_cast<double>(cs->batch) * pixels, og, taps * ig, G, OperandHbmBytes(op, in, 0),
               OperandHbmBytes(op, in, 1), out_bytes, r);
        break;
      }
      case Price::kTopK:
      case Price::kSort:
      case Price::kReduce:
      case Price::kReduceWindow: {
        double elems = 0;
        if (e.price == Price::kTopK) {
          const auto& dd = in[0].dims;
          const double len = dd.empty() ? 1 : static_cast<double>(dd.back());
          elems = static_cast<double>(in[0].num_elements()) * std::max(1.0, std::ceil(std::log2(std::max(len, 1.0))));
        } else if (e.price == Price::kSort) {  // n log2 n comparisons along the dimension
          auto dim = IntAttr(op, "dimension", -1);
          const auto& dd = in[0].dims;
          int64_t axis = dim.ok() ? *dim : -1;
          if (axis < 0) axis += static_cast<int64_t>(dd.size());
          const double len = axis >= 0 && axis < static_cast<int64_t>(dd.size()) ? static_cast<double>(dd[static_cast<size_t>(axis)]) : 1;
          elems = static_cast<double>(in[0].num_elements()) * std::max(1.0, std::ceil(std::log2(std::max(len, 1.0))));
        } else if (e.price == Price::kReduce) {
          elems = static_cast<double>(in[0].num_elements()) - n_out;
        } else {
          auto win = IntsAttr(op, "window_dimensions");
          double wc = 1;
          if (win.ok())
            for (int64_t x : *win) wc *= static_cast<double>(x);
          elems = n_out * wc;
        }
        // XLA's count: each element folded costs the body's ops (one for a
        // sum or max; argmax's compare-and-select body several).
        double body_flops = op.regions.empty() ? 1 : 0, body_tr = 0;
        for (const Block& b : op.regions.empty() ? std::vector<Block>{} : op.regions[0].blocks)
          for (const Op& bo : b.ops) {
            // An elementwise op (or a bitcast_convert) of the body: 1 flop
            // or 1 transcendental.
            const OpEntry* be = EntryOf(bo);
            if (!be || (be->op_class != OpClass::kElementwise && be->check != Check::kBitcastConvert)) continue;
            (be->price == Price::kFlop || be->price == Price::kFree ? body_flops : body_tr) += 1;
          }
        r.cost.flops = std::max(0.0, elems) * body_flops;
        r.cost.transcendentals = std::max(0.0, elems) * body_tr;
        r.cost.bytes_read = in_bytes;
        r.cost.bytes_written = out_bytes;
        break;
      }
      case Price::kGather:
        r.cost.bytes_read = static_cast<double>(in[1].size_bytes()) + out_bytes;
        r.cost.bytes_written = out_bytes;
        break;
      case Price::kScatter:
        r.cost.bytes_read = in_bytes;
        r.cost.bytes_written = out_bytes;
        r.cost.flops = static_cast<double>(in.back().num_elements());
        break;
      case Price::kSelectAndScatter:
        r.cost.bytes_read = in_bytes;
        r.cost.bytes_written = out_bytes;
        if (in.size() == 3) {
          // XLA's count: per source element, a select per window element
          // and one scatter.
          auto win = IntsAttr(op, "window_dimensions");
          double wc = 1;
          if (win.ok())
            for (int64_t v : *win) wc *= static_cast<double>(v);
          r.cost.flops = static_cast<double>(in[1].num_elements()) * (wc + 1);
        }
        break;
      case Price::kCollective: {
        auto group = e.run == Run::kCollectivePermute ? StatusOr<std::vector<int64_t>>(std::vector<int64_t>{})
                                                      : MyGroup(op);
        if (!group.ok()) return;
        PriceCollective(e.run, op, in[0], *group, r);
        break;
      }
    }
    o_.ops->push_back(std::move(r));
  }

  // The MXU's share of a record: `count` products of [m, k] x [k, n], each
  // moving its part of the operands and result, at the op's precision.
  double OperandHbmBytes(const Op& op, const std::vector<Type>& in, size_t i) const {
    return materialized_[static_cast<size_t>(op.operands[i])] ? static_cast<double>(in[i].size_bytes()) : 0;
  }
  void AddMxu(const Op& op, double m, double n, double k, double count, double a_bytes, double b_bytes,
              double out_bytes, mesh::OpRecord& r) const {
    mesh::MxuMatmul mm;
    mm.m = static_cast<int64_t>(m);
    mm.n = static_cast<int64_t>(n);
    mm.k = static_cast<int64_t>(k);
    mm.count = count;
    mm.a_bytes = a_bytes / count;
    mm.b_bytes = b_bytes / count;
    mm.c_bytes = out_bytes / count;
    r.mxu.push_back(mm);
    r.precision = PricePrecision(op);
  }

  kernels::Precision PricePrecision(const Op& op) const {
    const Attr* p = op.Find("precision_config");
    std::string w = "DEFAULT";
    if (p && p->kind == Attr::Kind::kList)
      for (const Attr& a : p->list)
        if (a.kind == Attr::Kind::kWord && a.s > w) w = a.s;
    return w == "HIGHEST" ? kernels::Precision::kHighest
                          : (w == "HIGH" ? kernels::Precision::kHigh : kernels::Precision::kDefault);
  }

  void PriceCollective(Run run, const Op& op, const Type& x, const std::vector<int64_t>& group, mesh::OpRecord& r) {
    r.type = "collective";
    mesh::CollectiveKind kind = mesh::CollectiveKind::kPsum;
    std::vector<int> members;
    std::vector<std::pair<int, int>> pairs;
    if (run == Run::kAllGather) kind = mesh::CollectiveKind::kAllGather;
    else if (run == Run::kReduceScatter) kind = mesh::CollectiveKind::kPsumScatter;
    else if (run == Run::kAllToAll) kind = mesh::CollectiveKind::kAllToAll;
    if (run == Run::kCollectivePermute) {
      kind = mesh::CollectiveKind::kPpermute;
      const Attr* p = op.Find("source_target_pairs");
      auto flat = p ? p->Ints() : StatusOr<std::vector<int64_t>>(InvalidArgumentError(""));
      if (flat.ok())
        for (size_t i = 0; i + 1 < flat->size(); i += 2)
          pairs.emplace_back(static_cast<int>((*flat)[i]), static_cast<int>((*flat)[i + 1]));
      for (int d = 0; d < site_.num_devices; ++d) members.push_back(d);
    } else {
      for (int64_t d : group) members.push_back(static_cast<int>(d));
    }
    r.name = std::string(mesh::CollectiveName(kind));
    if (site_.device == nullptr || site_.topology == nullptr) return;
    const auto cost = mesh::ModelCollective(site_.device->chip(), *site_.topology, kind, members, x.size_bytes(), pairs);
    r.ici_seconds = cost.seconds;
    r.ici_bytes = cost.bytes_sent_per_device;
  }

  const Module& m_;
  DeviceSite site_;
  Options o_;
  int call_depth_ = 0;
  int64_t executed_ = 0;
  std::string last_sharding_;
  std::vector<bool> materialized_;  // value id -> written to HBM (pricing)
  std::vector<bool> view_ok_;       // value id -> may be a Tensor::repeat view
  std::unordered_map<const Block*, std::vector<std::vector<int>>> free_lists_;
};

}  // namespace

Status Verify(const Module& m) { return Verifier(m).Run(); }

XlaGeneration DetectGeneration(const Module& m) {
  if (!m.ops.empty()) return XlaGeneration::kCurrent;  // sdy.mesh
  for (const Func& f : m.funcs) {
    for (const Attr& a : f.result_attrs)
      if (const Attr* r = a.Find("jax.result_info"); r && r->kind == Attr::Kind::kString && r->s.rfind("result", 0) == 0)
        return XlaGeneration::kCurrent;
    std::function<bool(const Region&)> has_sdy = [&](const Region& r) {
      for (const Block& b : r.blocks)
        for (const Op& op : b.ops) {
          if (op.name.rfind("sdy.", 0) == 0) return true;
          for (const Region& inner : op.regions)
            if (has_sdy(inner)) return true;
        }
      return false;
    };
    if (has_sdy(f.body)) return XlaGeneration::kCurrent;
  }
  return XlaGeneration::kJax04;
}

StatusOr<std::vector<Tensor>> RunFunction(const Module& m, std::string_view name, std::vector<Tensor> args,
                                          const DeviceSite& site, const Options& options) {
  const Func* f = m.FindFunc(name);
  if (!f) return InvalidArgumentError(m.file + ": no function @" + std::string(name));
  if (args.size() != f->arg_types.size())
    return InvalidArgumentError(m.file + ": @" + f->name + " takes " + std::to_string(f->arg_types.size()) +
                                " arguments, got " + std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i)
    if (!(args[i].type == f->arg_types[i]))
      return InvalidArgumentError(m.file + ": argument " + std::to_string(i) + " of @" + f->name + " is " +
                                  f->arg_types[i].ToString() + ", got " + args[i].type.ToString());
  Interpreter interp(m, site, options);
  return interp.Entry(*f, std::move(args));
}

}  // namespace tpumesh::hlo
