// The cost model's record of each executed op (mesh::OpRecord), by its
// registry entry's price rule, with XLA's fusion deciding what goes
// through HBM.
#include "hlo/attrs.h"
#include "hlo/interpreter_impl.h"

#include <algorithm>
#include <cmath>

namespace tpumesh::hlo {

bool Interpreter::Fusible(const Op& op) {
  const OpEntry* e = EntryOf(op);
  return e && e->fusible;
}

void Interpreter::MarkMaterialized() {
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

void Interpreter::MarkAttention() {
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

double Interpreter::HbmBytesRead(const Op& op, const std::vector<Type>& in) const {
  double b = 0;
  for (size_t i = 0; i < in.size(); ++i)
    if (materialized_[static_cast<size_t>(op.operands[i])]) b += static_cast<double>(in[i].size_bytes());
  return b;
}

double Interpreter::HbmBytesWritten(const Op& op, const std::vector<Type>& out) const {
  double b = 0;
  for (size_t i = 0; i < out.size(); ++i)
    if (materialized_[static_cast<size_t>(op.results[i])]) b += static_cast<double>(out[i].size_bytes());
  return b;
}

void Interpreter::Price(const OpEntry& e, const Op& op, const std::vector<Type>& in, const std::vector<Type>& out) {
  mesh::OpRecord r;
  const std::string& loc = op.loc.name;
  const size_t slash = loc.rfind('/');
  r.name = loc.empty()
               ? op.name.substr(op.name.find('.') + 1)
               : (slash == std::string::npos ? loc : loc.substr(slash + 1));
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
      // XLA's count: 2 x output features x input features per feature group
      // x result images x the taps that land inside the (dilated) input,
      // summed over pixels.
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
      const double G = static_cast<double>(cs->all_groups());
      const double ig = static_cast<double>(cs->group_in()), og = static_cast<double>(cs->group_out());
      r.cost.flops = 2 * static_cast<double>(cs->out_batch()) * valid * ig * og * G;
      r.cost.bytes_read = in_bytes;
      r.cost.bytes_written = out_bytes;
      double taps = 1, pixels = 1;
      for (size_t k = 0; k < cs->in_sp.size(); ++k) {
        taps *= static_cast<double>(cs->k_sp[k]);
        pixels *= static_cast<double>(cs->out_sp[k]);
      }
      AddMxu(op, static_cast<double>(cs->out_batch()) * pixels, og, taps * ig, G, OperandHbmBytes(op, in, 0),
             OperandHbmBytes(op, in, 1), out_bytes, r);
      break;
    }
    case Price::kFft:
    case Price::kTriangularSolve: {
      // XLA's flop counts (kernels/); the bytes as every op's: what is
      // read from and written to HBM.
      const auto attrs = AttrsOf(op);
      if (const auto* f = std::get_if<FftAttrs>(&attrs->value)) {
        r.cost.flops = kernels::FftCost(f->shape, ElementTypeBytes(PartType(in[0].element))).flops;
      } else if (const auto* t = std::get_if<TriangularSolveAttrs>(&attrs->value)) {
        r.cost.flops = kernels::TriangularSolveCost(t->shape, ElementTypeBytes(in[0].element)).flops;
      } else {
        return;
      }
      r.cost.bytes_read = in_bytes;
      r.cost.bytes_written = out_bytes;
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
        auto sort = TypedAttrs<AxisAttrs>(op);
        const auto& dd = in[0].dims;
        int64_t axis = sort.ok() ? sort->axis : -1;
        if (axis < 0) axis += static_cast<int64_t>(dd.size());
        const double len =
            axis >= 0 && axis < static_cast<int64_t>(dd.size())
                ? static_cast<double>(dd[static_cast<size_t>(axis)])
                : 1;
        elems = static_cast<double>(in[0].num_elements()) * std::max(1.0, std::ceil(std::log2(std::max(len, 1.0))));
      } else if (e.price == Price::kReduce) {
        elems = static_cast<double>(in[0].num_elements()) - n_out;
      } else {
        auto window = TypedAttrs<WindowAttrs>(op);
        double wc = 1;
        if (window.ok())
          for (int64_t x : window->dims) wc *= static_cast<double>(x);
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
        auto window = TypedAttrs<WindowAttrs>(op);
        double wc = 1;
        if (window.ok())
          for (int64_t v : window->dims) wc *= static_cast<double>(v);
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

double Interpreter::OperandHbmBytes(const Op& op, const std::vector<Type>& in, size_t i) const {
  return materialized_[static_cast<size_t>(op.operands[i])] ? static_cast<double>(in[i].size_bytes()) : 0;
}

void Interpreter::AddMxu(const Op& op, double m, double n, double k,
                         double count, double a_bytes, double b_bytes,
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

kernels::Precision Interpreter::PricePrecision(const Op& op) const { return AttrsOf(op)->precision; }

void Interpreter::PriceCollective(Run run, const Op& op, const Type& x,
                                  const std::vector<int64_t>& group,
                                  mesh::OpRecord& r) {
  r.type = "collective";
  mesh::CollectiveKind kind = mesh::CollectiveKind::kPsum;
  std::vector<int> members;
  std::vector<std::pair<int, int>> pairs;
  if (run == Run::kAllGather) kind = mesh::CollectiveKind::kAllGather;
  else if (run == Run::kReduceScatter) kind = mesh::CollectiveKind::kPsumScatter;
  else if (run == Run::kAllToAll) kind = mesh::CollectiveKind::kAllToAll;
  if (run == Run::kCollectivePermute) {
    kind = mesh::CollectiveKind::kPpermute;
    if (auto permute = TypedAttrs<CollectiveAttrs>(op); permute.ok())
      for (size_t i = 0; i + 1 < permute->pairs.size(); i += 2)
        pairs.emplace_back(static_cast<int>(permute->pairs[i]), static_cast<int>(permute->pairs[i + 1]));
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

}  // namespace tpumesh::hlo
