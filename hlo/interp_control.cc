// Control ops (calls, loops, branches, barriers), sdy.manual_computation,
// the sharding custom calls, and the splits XLA's partitioner would make of
// each value (hlo/partition.h), priced where they reshard.
#include "hlo/interpreter_impl.h"

#include <algorithm>
#include <cstring>
#include <numeric>

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
    for (int64_t trips = 0;; ++trips) {
      TPUMESH_ASSIGN_OR_RETURN(std::vector<Tensor> c, RunRegion(op.regions[0], args, env));
      if (c.size() != 1 || c[0].type.element != ElementType::kPred || c[0].num_elements() != 1)
        return Fail(op, "the condition must return one i1");
      // A dry run of a loop whose condition depends on the inputs: its
      // trip count is not known, the body is priced once.
      const bool unknown = !c[0].known;
      if (unknown) {
        if (o_.warn && site_.device_id == 0)
          o_.warn(m_.Where(op.loc) + ": " + op.name + ": its trip count depends on the inputs; priced as " +
                  (trips == 0 ? "one trip" : std::to_string(trips + 1) + " trips") +
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

StatusOr<Tensor> Interpreter::Slice(const Tensor& global, const Sharding& s, const Type& local, const Op& op) {
  TPUMESH_ASSIGN_OR_RETURN(auto shard, s.ShardOf(site_.device_id, global.type.dims));
  TPUMESH_ASSIGN_OR_RETURN(Tensor t, At(op, NewTensor(local, site_.device, o_.dry_run, "shard")));
  t.known = !o_.dry_run && global.known;
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

StatusOr<Tensor> Interpreter::Assemble(const Tensor& local, const Sharding& s, const Type& global, const Op& op) {
  TPUMESH_ASSIGN_OR_RETURN(Tensor g, At(op, NewTensor(global, site_.device, o_.dry_run, "global")));
  g.known = !o_.dry_run && local.known;
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
