// Control ops (calls, loops, branches, barriers), sdy.manual_computation,
// the sharding custom calls, and the splits XLA's partitioner would make of
// each value (hlo/partition.h), priced where they reshard.
#include "hlo/attrs.h"
#include "hlo/interpreter_impl.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "base/printable.h"

namespace tpumesh::hlo {

StatusOr<std::vector<Tensor>> Interpreter::Control(
    Run run, const Op& op, const std::vector<const Tensor*>& in, Env& env) {
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
    if (o_.dry_run && o_.ops) {
      TPUMESH_ASSIGN_OR_RETURN(const CountedLoop counted, Counted(op, args));
      if (counted.trips > kTripsPricedOnce) return PriceCountedLoop(op, counted, std::move(args), env);
    }
    for (int64_t trips = 0;; ++trips) {
      TPUMESH_ASSIGN_OR_RETURN(std::vector<Tensor> c, RunRegion(op.regions[0], args, env));
      if (c.size() != 1 || c[0].type.element != ElementType::kPred || c[0].num_elements() != 1)
        return Fail(op, "the condition must return one i1");
      // A dry run of a loop whose condition depends on the inputs: its
      // trip count is not known, the body is priced once.
      const bool unknown = !c[0].known;
      if (unknown) {
        if (o_.warn && site_.device_id == 0)
          o_.warn(m_.Where(op.loc) + ": " + op.name + ": its trip count " +
                  (dry_run_budget_spent_ ? "needs more values computed than a dry run computes (2^28 element steps)"
                                         : "depends on the inputs") +
                  "; priced as " + (trips == 0 ? "one trip" : std::to_string(trips + 1) + " trips") +
                  " (simulate --inputs FILE.h5 counts it)");
      } else if (!*c[0].as<bool>()) {
        break;
      }
      TPUMESH_ASSIGN_OR_RETURN(args, RunRegion(op.regions[1], std::move(args), env));
      if (args.size() != op.results.size()) return Fail(op, "the body returns the wrong number of values");
      if (unknown) {
        for (Tensor& t : args) t.known = false;
        break;
      }
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
    TPUMESH_ASSIGN_OR_RETURN(std::vector<Tensor> out, RunRegion(op.regions[static_cast<size_t>(i)], {}, env));
    for (Tensor& t : out) t.known = t.known && in[0]->known;  // a dry run's branch taken by an unknown index
    return out;
  }
  if (run == Run::kManualComputation) return Manual(op, std::move(args), env);
  return Fail(op, "internal: not a control op");
}

namespace {

// The integer a scalar tensor of an integer type holds (nullopt otherwise).
std::optional<int64_t> IntegerScalar(const Tensor& t) {
  if (t.num_elements() != 1 || IsFloat(t.type.element) || t.type.element == ElementType::kPred) return std::nullopt;
  int64_t v = 0;
  if (!ConvertElements(t.type.element, t.data.raw(), ElementType::kI64, 0, 1, &v).ok()) return std::nullopt;
  return v;
}

// The op of `b` that defines value v (null: an argument or outside).
const Op* DefinedIn(const Block& b, int v) {
  for (const Op& op : b.ops)
    if (std::find(op.results.begin(), op.results.end(), v) != op.results.end()) return &op;
  return nullptr;
}

// ceil(a / b) for b > 0.
__int128 CeilDiv(__int128 a, __int128 b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

}  // namespace

StatusOr<Interpreter::CountedLoop> Interpreter::Counted(const Op& op, const std::vector<Tensor>& args) {
  CountedLoop no;
  const Block& cond = op.regions[0].blocks[0];
  const Block& body = op.regions[1].blocks[0];
  if (cond.ops.empty() || body.ops.empty()) return no;
  const Op& ret = cond.ops.back();
  if (ret.operands.size() != 1) return no;
  const Op* cmp = DefinedIn(cond, ret.operands[0]);
  const OpEntry* ce = cmp ? EntryOf(*cmp) : nullptr;
  if (!ce || ce->scalar.kind != ScalarFn::Kind::kCompare || cmp->operands.size() != 2) return no;
  const auto direction = TypedAttrs<CompareAttrs>(*cmp);
  if (!direction.ok()) return no;
  // A value of the condition that does not change: a constant of the
  // region, or a loop argument the body returns as it is.
  auto invariant = [&](int v) -> StatusOr<std::optional<int64_t>> {
    if (const Op* def = DefinedIn(cond, v)) {
      const OpEntry* de = EntryOf(*def);
      if (!de || de->run != Run::kConstant) return std::optional<int64_t>();
      Env scratch;
      std::vector<mesh::OpRecord>* keep = o_.ops;
      o_.ops = nullptr;  // a constant is free: nothing to price
      const Status ran = RunOp(*def, scratch);
      o_.ops = keep;
      TPUMESH_RETURN_IF_ERROR(ran);
      return IntegerScalar(scratch[def->results[0]]);
    }
    const auto at = std::find(cond.args.begin(), cond.args.end(), v);
    if (at == cond.args.end()) return std::optional<int64_t>();
    const size_t j = static_cast<size_t>(at - cond.args.begin());
    if (body.ops.back().operands.size() != body.args.size() || body.ops.back().operands[j] != body.args[j] ||
        !args[j].known)
      return std::optional<int64_t>();
    return IntegerScalar(args[j]);
  };
  // The counter: a loop argument the body returns plus a constant.
  for (int side = 0; side < 2; ++side) {
    const auto at = std::find(cond.args.begin(), cond.args.end(), cmp->operands[static_cast<size_t>(side)]);
    if (at == cond.args.end()) continue;
    const size_t k = static_cast<size_t>(at - cond.args.begin());
    if (!args[k].known || body.ops.back().operands.size() != body.args.size()) continue;
    const std::optional<int64_t> init = IntegerScalar(args[k]);
    TPUMESH_ASSIGN_OR_RETURN(const std::optional<int64_t> limit, invariant(cmp->operands[static_cast<size_t>(1 - side)]));
    const Op* next = DefinedIn(body, body.ops.back().operands[k]);
    const OpEntry* ne = next ? EntryOf(*next) : nullptr;
    if (!init || !limit || !ne || ne->scalar.kind != ScalarFn::Kind::kBinary || ne->scalar.bin != Bin::kAdd) continue;
    std::optional<int64_t> step;
    for (int q = 0; q < 2; ++q)
      if (next->operands[static_cast<size_t>(q)] == body.args[k])
        if (const Op* c = DefinedIn(body, next->operands[static_cast<size_t>(1 - q)]);
            c && EntryOf(*c) && EntryOf(*c)->run == Run::kConstant) {
          Env scratch;
          std::vector<mesh::OpRecord>* keep = o_.ops;
          o_.ops = nullptr;
          const Status ran = RunOp(*c, scratch);
          o_.ops = keep;
          TPUMESH_RETURN_IF_ERROR(ran);
          step = IntegerScalar(scratch[c->results[0]]);
        }
    if (!step || *step == 0) continue;
    // counter `dir` limit, the counter on the left.
    CompareDirection dir = direction->direction;
    if (side == 1) {
      if (dir == CompareDirection::kLt) dir = CompareDirection::kGt;
      else if (dir == CompareDirection::kLe) dir = CompareDirection::kGe;
      else if (dir == CompareDirection::kGt) dir = CompareDirection::kLt;
      else if (dir == CompareDirection::kGe) dir = CompareDirection::kLe;
    }
    const __int128 a = *init, l = *limit, st = *step;
    std::optional<__int128> n;
    if (dir == CompareDirection::kLt && st > 0) n = CeilDiv(l - a, st);
    else if (dir == CompareDirection::kLe && st > 0) n = CeilDiv(l - a + 1, st);
    else if (dir == CompareDirection::kGt && st < 0) n = CeilDiv(a - l, -st);
    else if (dir == CompareDirection::kGe && st < 0) n = CeilDiv(a - l + 1, -st);
    else if (dir == CompareDirection::kNe && (l - a) % st == 0 && (l - a) / st >= 0) n = (l - a) / st;
    if (!n) continue;
    if (*n < 0) n = 0;
    // The counter must not wrap in its type on the way (i32 counters).
    const __int128 last = a + *n * st;
    if (ElementTypeBytes(args[k].type.element) < 8 && (last > INT32_MAX || last < INT32_MIN)) continue;
    CountedLoop c;
    c.trips = static_cast<int64_t>(*n);
    c.counter = k;
    c.final_value = static_cast<int64_t>(last);
    return c;
  }
  return no;
}

StatusOr<std::vector<Tensor>> Interpreter::PriceCountedLoop(const Op& op, const CountedLoop& c,
                                                            std::vector<Tensor> args, Env& env) {
  std::vector<double> before;
  before.reserve(o_.ops->size());
  for (const mesh::OpRecord& r : *o_.ops) before.push_back(r.repeat);
  TPUMESH_ASSIGN_OR_RETURN(std::vector<Tensor> cond, RunRegion(op.regions[0], args, env));
  TPUMESH_ASSIGN_OR_RETURN(args, RunRegion(op.regions[1], std::move(args), env));
  if (args.size() != op.results.size()) return Fail(op, "the body returns the wrong number of values");
  // One trip priced: its records stand for all c.trips.
  for (size_t i = 0; i < o_.ops->size(); ++i) {
    mesh::OpRecord& r = (*o_.ops)[i];
    r.repeat += (r.repeat - (i < before.size() ? before[i] : 0)) * static_cast<double>(c.trips - 1);
  }
  TPUMESH_RETURN_IF_ERROR(RunRegion(op.regions[0], args, env).status());  // the last test, false
  for (Tensor& t : args) t.known = false;  // made by one trip, not by all
  TPUMESH_ASSIGN_OR_RETURN(Tensor counter, At(op, NewTensor(args[c.counter].type, site_.device, false, "counter")));
  TPUMESH_RETURN_IF_ERROR(
      ConvertElements(ElementType::kI64, &c.final_value, counter.type.element, 0, 1, counter.data.mutable_raw()));
  args[c.counter] = std::move(counter);
  return args;
}

StatusOr<Tensor> Interpreter::Slice(const Tensor& global, const Sharding& s, const Type& local, const Op& op) {
  TPUMESH_ASSIGN_OR_RETURN(auto shard, s.ShardOf(site_.device_id, global.type.dims));
  TPUMESH_ASSIGN_OR_RETURN(Tensor t, At(op, NewTensor(local, site_.device, o_.dry_run, "shard")));
  t.known = !o_.dry_run && global.known;
  for (size_t k = 0; k < shard.size(); ++k)
    if (global.type.dims[k] / shard[k].count != local.dims[k])
      return Fail(op, "the shard of " + global.type.ToString() + " is not " + local.ToString());
  if (o_.dry_run) return t;
  // An unreduced axis: the value is the sum of the partials along it, so
  // its first device holds it all and the others zeros.
  const size_t me = static_cast<size_t>(site_.device_id);
  if (me < s.unreduced.size() && s.unreduced[me] != 0) {
    std::memset(t.data.mutable_raw(), 0, static_cast<size_t>(t.type.size_bytes()));
    return t;
  }
  const Dims gs = Strides(global.type.dims);
  IndexCopy(global, t, [&](const Dims& o) {
    int64_t s2 = 0;
    for (size_t k = 0; k < o.size(); ++k) s2 += (shard[k].index * local.dims[k] + o[k]) * gs[k];
    return s2;
  });
  return t;
}

StatusOr<Tensor> Interpreter::Assemble(const Tensor& local, const Sharding& s, const Type& global, const Op& op) {
  TPUMESH_ASSIGN_OR_RETURN(Tensor g, At(op, NewTensor(global, site_.device, o_.dry_run, "global")));
  g.known = !o_.dry_run && local.known;
  if (o_.dry_run) return g;
  mesh::Array keep;
  TPUMESH_ASSIGN_OR_RETURN(auto all, GatherAll(local, &keep));
  const int w = ElementTypeBytes(global.element);
  const Dims gs = Strides(global.dims);
  uint8_t* dst = static_cast<uint8_t*>(g.data.mutable_raw());
  // Every device's piece in place; a piece several devices hold (a
  // replicated axis) is the lowest device's, except this device's own piece,
  // which is its own value, as on a TPU, where each device keeps what it
  // computed even when the replicas disagree.
  // With unreduced axes, a piece is the sum of the partials of the devices
  // that hold it as the same copy as this device.
  std::vector<int> order;  // later writes win: highest device first, this one last
  for (int d = site_.num_devices - 1; d >= 0; --d)
    if (d != site_.device_id) order.push_back(d);
  order.push_back(site_.device_id);
  const int64_t cnt = local.num_elements();
  const size_t me = static_cast<size_t>(site_.device_id);
  std::vector<uint8_t> sum;
  for (const int d : order) {
    TPUMESH_ASSIGN_OR_RETURN(auto shard, s.ShardOf(d, global.dims));
    for (size_t k = 0; k < shard.size(); ++k)
      if (global.dims[k] / shard[k].count != local.type.dims[k])
        return Fail(op, "the shard of " + global.ToString() + " is not " + local.type.ToString());
    const uint8_t* piece = all[static_cast<size_t>(d)];
    if (!s.unreduced.empty()) {
      const size_t du = static_cast<size_t>(d);
      if (s.unreduced[du] != 0 || (du < s.replica.size() && me < s.replica.size() && s.replica[du] != s.replica[me]))
        continue;
      sum.assign(piece, piece + cnt * w);
      for (int e = 0; e < site_.num_devices; ++e) {
        const size_t eu = static_cast<size_t>(e);
        if (s.unreduced[eu] == 0 || s.replica[eu] != s.replica[du] || s.device_tiles[eu] != s.device_tiles[du])
          continue;
        TPUMESH_RETURN_IF_ERROR(At(op, AddElements(global.element, sum.data(), all[eu], cnt, sum.data())));
      }
      piece = sum.data();
    }
    Dims idx(local.type.dims.size(), 0);
    for (int64_t i = 0; i < cnt; ++i) {
      int64_t o = 0;
      for (size_t k = 0; k < idx.size(); ++k) o += (shard[k].index * local.type.dims[k] + idx[k]) * gs[k];
      std::memcpy(dst + o * w, piece + i * w, static_cast<size_t>(w));
      for (int k = static_cast<int>(idx.size()) - 1; k >= 0; --k) {
        if (++idx[static_cast<size_t>(k)] < local.type.dims[static_cast<size_t>(k)]) break;
        idx[static_cast<size_t>(k)] = 0;
      }
    }
  }
  return g;
}

StatusOr<std::vector<Tensor>> Interpreter::Manual(const Op& op, std::vector<Tensor> args, Env& env) {
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

StatusOr<std::vector<Tensor>> Interpreter::CustomCall(const Op& op, std::vector<Tensor> args) {
  if (!CustomCallSupported(op.callee))
    return UnimplementedError(m_.Where(op.loc) + ": " + CustomCallRefusal(op.callee));
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
  return InternalError(m_.Where(op.loc) + ": @" + op.callee + " is in kCustomCallTargets without its case here");
}

Split Interpreter::DeclaredSplit(const Attr& attrs, const Type& t) const {
  if (const Attr* sh = attrs.Find("mhlo.sharding"); sh && sh->kind == Attr::Kind::kString) return SplitOfMhlo(sh->s, t);
  if (const Attr* sh = attrs.Find("sdy.sharding")) return SplitOfSdy(*sh, t);
  return {};
}

Split Interpreter::SplitOfMhlo(const std::string& text, const Type& t) const {
  auto s = MhloSharding(text, site_.num_devices);
  return s.ok() ? SplitOf(*s, site_.device_id, t.dims) : Split{};
}

Split Interpreter::SplitOfSdy(const Attr& sharding, const Type& t) const {
  auto s = SdySharding(sharding, m_, site_.axes);
  return s.ok() ? SplitOf(*s, site_.device_id, t.dims) : Split{};
}

void Interpreter::Constrain(const Location& loc, const std::string& what, Tensor& t, const Split& want) {
  bool subset = true;
  for (size_t k = 0; k < t.split.dims.size() && subset; ++k)
    subset = !t.split.dims[k].split() || t.split.dims[k] == want.dim(k);
  if (!subset) PriceReshard(loc, mesh::CollectiveKind::kAllGather, t.split.Local(t.type), t.split.Members(), what);
  t.split = want;
}

void Interpreter::Partition(const Op& op, const std::vector<const Tensor*>& in,
                            std::vector<Tensor>& out,
                            std::vector<Type>& in_local,
                            std::vector<Type>& out_local,
                            std::vector<DeviceGroup>& reduced_over) {
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

void Interpreter::PricePartialSums(const Op& op,
                                   const std::vector<Type>& out_local,
                                   const std::vector<DeviceGroup>& groups) {
  for (const DeviceGroup& g : groups)
    for (const Type& t : out_local) PriceReshard(op.loc, mesh::CollectiveKind::kPsum, t, *g, op.name + " partial sums");
}

void Interpreter::PriceReshard(const Location& loc, mesh::CollectiveKind kind,
                               const Type& local,
                               const std::vector<int>& members,
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
    const auto cost =
        mesh::ModelCollective(site_.device->chip(), *site_.topology, kind,
                              members, local.size_bytes(), {});
    r.ici_seconds = cost.seconds;
    r.ici_bytes = cost.bytes_sent_per_device;
  }
  Record(&loc, std::move(r));
}

}  // namespace tpumesh::hlo
