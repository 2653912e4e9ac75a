// The StableHLO interpreter (hlo/interpreter.h, hlo/interpreter_impl.h):
// a walk over a function's ops with an environment of values; each op
// dispatched by its registry entry (hlo/ops.h), priced as it runs.
#include "hlo/attrs.h"
#include "hlo/interpreter_impl.h"

#include <unistd.h>
#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_set>

#include "base/host_memory.h"
#include "base/printable.h"
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

StatusOr<std::vector<Tensor>> Interpreter::Entry(const Func& f, std::vector<Tensor> args) {
  for (size_t i = 0; i < args.size() && i < f.arg_attrs.size(); ++i)
    args[i].split = DeclaredSplit(f.arg_attrs[i], args[i].type);
  TPUMESH_ASSIGN_OR_RETURN(std::vector<Tensor> res, Call(f, std::move(args)));
  // A result without a declared sharding keeps the one propagation gave it
  // (XLA's choice when JAX leaves it to the compiler): no gather.
  for (size_t i = 0; i < res.size() && i < f.result_attrs.size(); ++i)
    if (f.result_attrs[i].Find("sdy.sharding") || f.result_attrs[i].Find("mhlo.sharding"))
      Constrain(f.loc, "result " + std::to_string(i), res[i], DeclaredSplit(f.result_attrs[i], res[i].type));
  return res;
}

StatusOr<std::vector<Tensor>> Interpreter::Call(const Func& f, std::vector<Tensor> args) {
  if (++call_depth_ > 256) return InvalidArgumentError(m_.Where(f.loc) + ": calls nested deeper than 256");
  Env env;
  auto r = RunRegion(f.body, std::move(args), env);
  --call_depth_;
  return r;
}

void Interpreter::MarkViews() {
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

int64_t Interpreter::TrailingRepeat(const Type& in, const Type& out, const Dims& bd) {
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

const std::vector<std::vector<int>>& Interpreter::FreeLists(const Block& b) {
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

StatusOr<std::vector<Tensor>> Interpreter::RunRegion(const Region& r, std::vector<Tensor> args, Env& env) {
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
      return ResourceExhaustedError(m_.Where(op.loc) + ": " + op.name + ": more than " +
                                    std::to_string(o_.max_executed_ops) + " ops executed, the bound of this " +
                                    (o_.dry_run ? "pricing (an endless loop, or one too long to price op by op)"
                                                : "run (an endless loop?)"));
    TPUMESH_RETURN_IF_ERROR(RunOp(op, env, frees[i]));
    for (int v : frees[i]) env.erase(v);
    if (o_.on_op && site_.device_id == 0) o_.on_op(executed_);
  }
  return InvalidArgumentError("a region without a terminator");
}

StatusOr<std::vector<const Tensor*>> Interpreter::Operands(const Op& op, Env& env) {
  std::vector<const Tensor*> in;
  for (int v : op.operands) {
    auto it = env.find(v);
    if (it == env.end()) return Fail(op, "operand " + m_.value_names[static_cast<size_t>(v)] + " is not available");
    in.push_back(&it->second);
  }
  return in;
}

const std::vector<int>& Interpreter::Captures(const Region& r) {
  auto it = captures_.find(&r);
  if (it != captures_.end()) return it->second;
  std::unordered_set<int> defined;
  std::vector<int> used;
  std::function<void(const Region&)> walk = [&](const Region& region) {
    for (const Block& b : region.blocks) {
      defined.insert(b.args.begin(), b.args.end());
      for (const Op& op : b.ops) {
        used.insert(used.end(), op.operands.begin(), op.operands.end());
        defined.insert(op.results.begin(), op.results.end());
        for (const Region& inner : op.regions) walk(inner);
      }
    }
  };
  walk(r);
  std::vector<int> captured;
  std::unordered_set<int> seen;
  for (int v : used)
    if (!defined.count(v) && seen.insert(v).second) captured.push_back(v);
  return captures_.emplace(&r, std::move(captured)).first->second;
}

Interpreter::Env Interpreter::RegionEnv(const Region& r) {
  Env env;
  if (enclosing_ == nullptr) return env;
  for (int v : Captures(r))
    if (auto it = enclosing_->find(v); it != enclosing_->end()) env.emplace(v, it->second);
  return env;
}

bool Interpreter::Small(const Op& op) {
  for (const Type& t : op.result_types)
    if (t.num_elements() > kDryRunComputeElements) return false;
  for (const Type& t : op.operand_types)
    if (t.num_elements() > kDryRunComputeElements) return false;
  // A window's folds are not bounded by the tensors' sizes (padding).
  if (WindowFolds(op) > kDryRunComputeElements * kDryRunComputeElements) return false;
  // Priced but not computed here (a convolution's batch groups).
  if (const auto* conv = std::get_if<ConvAttrs>(&AttrsOf(op)->value))
    if (!ConvolutionComputable(conv->shape, op.operand_types[0], op.operand_types[1]).ok()) return false;
  // Small ops in a loop add up: past the run's budget nothing more is
  // computed (values become unknown, as if they depended on the arguments).
  const double work = DryRunWork(op);
  if (dry_run_budget_spent_ || dry_run_work_ + work > kDryRunComputeWork) {
    dry_run_budget_spent_ = true;
    return false;
  }
  dry_run_work_ += work;
  return true;
}

double DryRunWork(const Op& op) {
  double elements = 0;
  for (const Type& t : op.result_types) elements += static_cast<double>(t.num_elements());
  for (const Type& t : op.operand_types) elements += static_cast<double>(t.num_elements());
  // A region (a reduce's or a sort's body) runs per element (a sort's
  // compare about log2 n times per element).
  double region_ops = 0;
  for (const Region& r : op.regions)
    for (const Block& b : r.blocks) region_ops += static_cast<double>(b.ops.size());
  double work = elements * (1 + region_ops * (op.name == "stablehlo.sort" ? 13 : 1));
  work += WindowFolds(op) * (1 + region_ops);
  const auto a = AttrsOf(op);
  if (const auto* dot = std::get_if<DotAttrs>(&a->value); dot && !op.operand_types.empty() && !op.result_types.empty())
    work += static_cast<double>(op.result_types[0].num_elements()) *
            static_cast<double>(Prod(op.operand_types[0], dot->dims.lc));
  if (const auto* conv = std::get_if<ConvAttrs>(&a->value); conv && !op.result_types.empty()) {
    double taps = static_cast<double>(conv->shape.group_in());
    for (int64_t k : conv->shape.k_sp) taps *= static_cast<double>(k);
    work += static_cast<double>(op.result_types[0].num_elements()) * taps;
  }
  return work;
}

Status Interpreter::CheckHostMemory(int64_t bytes) {
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

int Interpreter::Donor(const Op& op, const OpEntry& e,
                       const std::vector<const Tensor*>& in,
                       const std::vector<int>& dying) const {
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

Status Interpreter::RunOp(const Op& op, Env& env, const std::vector<int>& dying) {
  struct Restore {
    Env*& at;
    Env* was;
    ~Restore() { at = was; }
  } restore{enclosing_, enclosing_};
  enclosing_ = &env;
  const OpEntry* e = EntryOf(op);
  if (!e) return UnimplementedError(m_.Where(op.loc) + ": unsupported op " + Quoted(op.name));
  TPUMESH_ASSIGN_OR_RETURN(std::vector<const Tensor*> in, Operands(op, env));
  for (size_t i = 0; i < in.size(); ++i)  // the types the op was written with are the values' own
    if (!(in[i]->type == op.operand_types[i]))
      return Fail(op, "operand " + std::to_string(i) + " is declared " + op.operand_types[i].ToString() +
                          " but its value is " + in[i]->type.ToString());
  for (const Tensor* t : in)  // only its planned consumer (hlo/contraction.h) takes a product unrounded
    if (t->product && e->run != Run::kElementwise && e->run != Run::kCall)
      return Fail(op, "internal: an unrounded product reached an op that cannot take it");
  if (o_.ops && !async_of_value_.empty())
    for (int v : op.operands)
      if (const int64_t id = async_of_value_[static_cast<size_t>(v)]; id != 0) reads_.push_back(id);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Tensor> out;
  bool computed = true;  // its results' bytes are the values' (Tensor::known)
  if (e->op_class == OpClass::kControl || e->op_class == OpClass::kSharding) {
    TPUMESH_ASSIGN_OR_RETURN(out, Control(e->run, op, in, env));
  } else {
    const bool compute = !o_.dry_run || (e->op_class != OpClass::kCollective && Small(op));
    computed = compute;
    if (compute && !o_.dry_run && e->run == Run::kBroadcastInDim &&
        view_ok_[static_cast<size_t>(op.results[0])] && in[0]->repeat == 0) {
      auto bd = TypedAttrs<AxesAttrs>(op);
      const int64_t repeat = bd.ok() && bd->axes.size() == in[0]->type.dims.size()
                                 ? TrailingRepeat(in[0]->type, op.result_types[0], bd->axes)
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
        if (o_.ops) TPUMESH_RETURN_IF_ERROR(At(op, Price(*e, op, in_local, out_local)));
        env[op.results[0]] = std::move(out[0]);
        return OkStatus();
      }
    }
    const bool unrounded = compute && e->run == Run::kElementwise && op.results.size() == 1 &&
                           products_[static_cast<size_t>(op.results[0])] != Product::kRounded;
    if (unrounded) {
      TPUMESH_ASSIGN_OR_RETURN(Tensor x, At(op, Unrounded(op, in)));
      out.push_back(std::move(x));
    } else if (const int k = Donor(op, *e, in, dying); k >= 0) {
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
    if (compute && !unrounded) TPUMESH_RETURN_IF_ERROR(At(op, Compute(*e, op, in, out)));
    else if (e->op_class == OpClass::kCollective && site_.collectives == nullptr && !o_.dry_run)
      return Fail(op, "a collective outside a mesh");
    std::vector<Type> in_local, out_local;
    std::vector<DeviceGroup> partial;
    Partition(op, in, out, in_local, out_local, partial);
    if (o_.ops && e->op_class != OpClass::kControl) {
      const double host =
          o_.dry_run ? 0 : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      TPUMESH_RETURN_IF_ERROR(At(op, Price(*e, op, in_local, out_local, host)));
      PricePartialSums(op, out_local, partial);
    }
  }
  if (out.size() != op.results.size()) return Fail(op, "internal: result count");
  if (o_.dry_run && e->op_class != OpClass::kControl && e->op_class != OpClass::kSharding) {
    bool known = computed;
    for (const Tensor* t : in) known = known && t->known;
    for (Tensor& t : out) t.known = known;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!(out[i].type == op.result_types[i]))
      return Fail(op, "result " + std::to_string(i) + " is " + out[i].type.ToString() + ", declared " +
                          op.result_types[i].ToString());
    env[op.results[i]] = std::move(out[i]);
  }
  return OkStatus();
}

Status Interpreter::Compute(const OpEntry& e, const Op& op,
                            const std::vector<const Tensor*>& in,
                            std::vector<Tensor>& out) {
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
    case Run::kFft: return Fft(op, *in[0], out[0]);
    case Run::kTriangularSolve: return TriangularSolve(op, *in[0], *in[1], out[0]);
    case Run::kCholesky: return Cholesky(op, *in[0], out[0]);
    case Run::kRngBitGenerator: return RngBitGenerator(op, *in[0], out);
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

void Interpreter::ParallelElements(int64_t n, const std::function<void(int64_t, int64_t)>& body) {
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

StatusOr<Tensor> Interpreter::Dense(const Tensor& v) {
  TPUMESH_ASSIGN_OR_RETURN(Tensor d, NewTensor(v.type, site_.device, false, "broadcast"));
  const int w = ElementTypeBytes(v.type.element);
  const uint8_t* src = static_cast<const uint8_t*>(v.data.raw());
  uint8_t* dst = static_cast<uint8_t*>(d.data.mutable_raw());
  const int64_t rows = v.num_elements() / v.repeat;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < v.repeat; ++j)
      std::memcpy(dst + (r * v.repeat + j) * w, src + r * w,
                  static_cast<size_t>(w));
  return d;
}


XlaGeneration DetectGeneration(const Module& m) {
  if (!m.ops.empty()) return XlaGeneration::kCurrent;  // sdy.mesh
  for (const Func& f : m.funcs) {
    for (const Attr& a : f.result_attrs)
      if (const Attr* r = a.Find("jax.result_info");
          r && r->kind == Attr::Kind::kString && r->s.rfind("result", 0) == 0)
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

namespace {

// XLA's CPU client runs every executable with denormals flushed
// (tsl::port::ScopedFlushDenormal: FTZ and DAZ in MXCSR), so every f32 and
// f64 operation of it, elementwise, reduction, dot or convolution, reads a
// denormal operand as a (signed) zero and writes a denormal result as one.
// A run sets the same bits for its duration on the thread that runs it;
// kernels::ParallelForTasks hands them to the threads that take its tasks.
// The caller's environment is restored after, so the models' kernels outside
// an hlo run keep IEEE denormals. (x86-64 only; other hosts keep theirs.)
class ScopedFlushDenormals {
 public:
#if defined(__x86_64__) || defined(__SSE__)
  static constexpr unsigned kFtz = 0x8000, kDaz = 0x0040;
  ScopedFlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFtz | kDaz); }
  ~ScopedFlushDenormals() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#endif
};

}  // namespace

StatusOr<std::vector<Tensor>> RunFunction(const Module& m, std::string_view name, std::vector<Tensor> args,
                                          const DeviceSite& site, const Options& options) {
  const ScopedFlushDenormals flush;
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
