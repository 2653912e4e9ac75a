// The cost model's record of each executed op (mesh::OpRecord), by its
// registry entry's price rule, with XLA's fusion deciding what goes
// through HBM.
#include "hlo/attrs.h"
#include "hlo/interpreter_impl.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace tpumesh::hlo {

bool Interpreter::Fusible(const Op& op) {
  const OpEntry* e = EntryOf(op);
  return e && e->fusible;
}

void Interpreter::MarkMaterialized() {
  materialized_.assign(static_cast<size_t>(m_.num_values), false);
  async_of_value_.assign(static_cast<size_t>(m_.num_values), 0);
  reads_.clear();
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
  attention_dots_.clear();
  for (const Op* dot : dots) {
    for (size_t i = 0; i < dot->operands.size(); ++i) {
      const int v = dot->operands[i];
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
      if (exp && reduce && scores) {
        materialized_[static_cast<size_t>(v)] = false;
        attention_dots_[dot] = static_cast<int>(i);
      }
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

namespace {

int64_t FloorDiv(__int128 a, __int128 b) {  // b > 0
  __int128 q = a / b;
  if ((a % b != 0) && (a < 0)) --q;
  return static_cast<int64_t>(q);
}

// x with a * x = 1 (mod m), for gcd(a, m) = 1.
int64_t InverseMod(int64_t a, int64_t m) {
  int64_t t = 0, new_t = 1, r = m, new_r = ((a % m) + m) % m;
  while (new_r != 0) {
    const int64_t q = r / new_r;
    t = std::exchange(new_t, t - q * new_t);
    r = std::exchange(new_r, r - q * new_r);
  }
  return ((t % m) + m) % m;
}

}  // namespace

StatusOr<double> ValidTaps(const ConvShape& cs, size_t k) {
  const int64_t outs = cs.out_sp[k], taps = cs.k_sp[k], in = cs.in_sp[k];
  const int64_t stride = cs.stride[k], pad = cs.pad_lo[k], ld = cs.lhs_dil[k], rd = cs.rhs_dil[k];
  if (outs > kMaxPricedPositions)
    return ResourceExhaustedError("convolution: " + std::to_string(outs) + " outputs along spatial dimension " +
                                  std::to_string(k) + ", more than the " + std::to_string(kMaxPricedPositions) +
                                  " priced per dimension");
  if (in == 0 || taps == 0) return 0.0;
  // Tap t of output o reads dilated position p = base + t * rd, base =
  // o * stride - pad: an input element when 0 <= p <= (in - 1) * ld and ld
  // divides p. Those t form a range with a period, counted per output.
  const int64_t g = std::gcd(rd, ld), period = ld / g;
  const int64_t inv = InverseMod((rd / g) % period, period);
  double valid = 0;
  for (int64_t o = 0; o < outs; ++o) {
    const __int128 base = static_cast<__int128>(o) * stride - pad;
    const int64_t lo = std::max<int64_t>(0, -FloorDiv(base, rd));  // ceil(-base / rd)
    const int64_t hi = std::min<int64_t>(taps - 1, FloorDiv(static_cast<__int128>(in - 1) * ld - base, rd));
    if (hi < lo) continue;
    if (ld == 1) {
      valid += static_cast<double>(hi - lo + 1);
      continue;
    }
    // t * rd = -base (mod ld): none unless g divides base, else t = t0 (mod period).
    const __int128 neg = -base;
    if (((neg % g) + g) % g != 0) continue;
    const int64_t b = static_cast<int64_t>((((neg / g) % period) + period) % period);
    const int64_t t0 = static_cast<int64_t>(static_cast<__int128>(b) * inv % period);
    valid += static_cast<double>(FloorDiv(hi - t0, period) - FloorDiv(static_cast<__int128>(lo) - 1 - t0, period));
  }
  return valid;
}

Status Interpreter::Price(const OpEntry& e, const Op& op, const std::vector<Type>& in, const std::vector<Type>& out,
                          double host_seconds) {
  // The op priced before on the same local types has the same record (its
  // price depends on nothing else): counted again without rebuilding it.
  if (auto it = last_priced_.find(&op); it != last_priced_.end() && it->second.in == in && it->second.out == out) {
    mesh::OpRecord& had = (*o_.ops)[it->second.index];
    had.host_seconds = (had.host_seconds * had.repeat + host_seconds) / (had.repeat + 1);
    had.repeat += 1;
    return OkStatus();
  }
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
    case Price::kErf:
    case Price::kErfInv: {
      const ElementwiseCost c = CostPerElement(e.price);
      r.cost.flops = c.flops * n_out;
      r.cost.transcendentals = c.transcendentals * n_out;
      r.cost.bytes_read = in_bytes;
      r.cost.bytes_written = out_bytes;
      break;
    }
    case Price::kUnset:  // refused by tests/hlo/registry_test.cc
    case Price::kFree:
    case Price::kRegions:
      return OkStatus();  // not an op on the chip
    case Price::kMove:
      r.cost.bytes_read = in_bytes;
      r.cost.bytes_written = out_bytes;
      if (e.run == Run::kSlice || e.run == Run::kDynamicSlice) {
        // A slice of an array in HBM reads its window, not the array (as
        // XLA's HloCostAnalysis counts a dynamic-slice): a scan over layers
        // slices one layer's weights from the stack each step.
        r.cost.bytes_read = OperandHbmBytes(op, in, 0) > 0 ? static_cast<double>(out[0].size_bytes()) : 0;
        for (size_t i = 1; i < in.size(); ++i) r.cost.bytes_read += OperandHbmBytes(op, in, i);
      }
      break;
    case Price::kWritten:
      r.cost.bytes_written = out_bytes;
      break;
    case Price::kUpdate:
      r.cost.bytes_read = static_cast<double>(in[1].size_bytes());
      r.cost.bytes_written = r.cost.bytes_read;
      break;
    case Price::kDot: {
      TPUMESH_ASSIGN_OR_RETURN(const auto dd, GetDotDims(op, in[0], in[1]));
      const double B = static_cast<double>(Prod(in[0], dd.lb)), M = static_cast<double>(Prod(in[0], dd.lf)),
                   K = static_cast<double>(Prod(in[0], dd.lc)), N = static_cast<double>(Prod(in[1], dd.rf));
      r.cost.flops = 2 * B * M * N * K;
      r.cost.bytes_read = in_bytes;
      r.cost.bytes_written = out_bytes;
      AddMxu(op, M, N, K, B, OperandHbmBytes(op, in, 0), OperandHbmBytes(op, in, 1), out_bytes, r);
      if (auto it = attention_dots_.find(&op); it != attention_dots_.end()) {
        // P [q, kv] x V [kv, d] (or Vt x Pt): its scores by --attention.
        const bool p_left = it->second == 0;
        r.attention.count = B;
        r.attention.q_len = static_cast<int64_t>(p_left ? M : N);
        r.attention.kv_len = static_cast<int64_t>(K);
        r.attention.head_dim = static_cast<int64_t>(p_left ? N : M);
        r.attention.element_bytes = static_cast<double>(ElementTypeBytes(in[p_left ? 1 : 0].element));
      }
      break;
    }
    case Price::kConvolution: {
      TPUMESH_ASSIGN_OR_RETURN(const ConvShape cs, GetConvShape(op, in[0], in[1], out[0]));
      // XLA's count (HloCostAnalysis): 2 x the input features of a group x
      // the output features x the batch of a batch group x the taps that
      // land inside the (dilated) input, summed over output pixels.
      double valid = 1, taps = 1, pixels = 1;
      for (size_t k = 0; k < cs.in_sp.size(); ++k) {
        TPUMESH_ASSIGN_OR_RETURN(const double v, ValidTaps(cs, k));
        valid *= v;
        taps *= static_cast<double>(cs.k_sp[k]);
        pixels *= static_cast<double>(cs.out_sp[k]);
      }
      const double groups = static_cast<double>(cs.groups * cs.batch_groups);
      const double ig = static_cast<double>(cs.cin / cs.groups);
      const double batch = static_cast<double>(cs.batch / cs.batch_groups);
      r.cost.flops = 2 * ig * static_cast<double>(cs.cout) * batch * valid;
      r.cost.bytes_read = in_bytes;
      r.cost.bytes_written = out_bytes;
      // On the MXU: per feature group and batch group, [batch x pixels,
      // taps x ig] x [taps x ig, its output features].
      AddMxu(op, batch * pixels, static_cast<double>(cs.cout) / groups, taps * ig, groups,
             OperandHbmBytes(op, in, 0), OperandHbmBytes(op, in, 1), out_bytes, r);
      break;
    }
    case Price::kFft:
    case Price::kTriangularSolve:
    case Price::kCholesky: {
      // XLA's flop counts (kernels/); the bytes as every op's: what is
      // read from and written to HBM.
      const auto attrs = AttrsOf(op);
      if (const auto* f = std::get_if<FftAttrs>(&attrs->value)) {
        r.cost.flops = kernels::FftCost(f->shape, ElementTypeBytes(PartType(in[0].element))).flops;
      } else if (const auto* t = std::get_if<TriangularSolveAttrs>(&attrs->value)) {
        r.cost.flops = kernels::TriangularSolveCost(t->shape, ElementTypeBytes(in[0].element)).flops;
      } else if (const auto* c = std::get_if<CholeskyAttrs>(&attrs->value)) {
        r.cost.flops = kernels::CholeskyCost(c->shape, ElementTypeBytes(in[0].element)).flops;
      } else {
        return InternalError(op.name + " without its attributes");
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
        TPUMESH_ASSIGN_OR_RETURN(const WindowAttrs window, TypedAttrs<WindowAttrs>(op));
        double wc = 1;
        for (int64_t x : window.dims) wc *= static_cast<double>(x);
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
        TPUMESH_ASSIGN_OR_RETURN(const WindowAttrs window, TypedAttrs<WindowAttrs>(op));
        double wc = 1;
        for (int64_t v : window.dims) wc *= static_cast<double>(v);
        r.cost.flops = static_cast<double>(in[1].num_elements()) * (wc + 1);
      }
      break;
    case Price::kCollective: {
      std::vector<int64_t> group;
      if (e.run == Run::kCollectivePermute) {
        TPUMESH_RETURN_IF_ERROR(CheckPairs(op));
      } else {
        TPUMESH_ASSIGN_OR_RETURN(group, MyGroup(op));
      }
      PriceCollective(e.run, op, in[0], group, r);
      break;
    }
  }
  r.host_seconds = host_seconds;
  const size_t index = Record(&op, std::move(r));
  last_priced_[&op] = {in, out, index};
  if (e.price == Price::kCollective) {
    // An async start/done pair: its results are awaited where they are read.
    mesh::OpRecord& made = (*o_.ops)[index];
    if (made.async_id == 0) made.async_id = static_cast<int64_t>(index) + 1;
    for (int v : op.results) async_of_value_[static_cast<size_t>(v)] = made.async_id;
  }
  return OkStatus();
}

size_t Interpreter::Record(const void* site, mesh::OpRecord r) {
  for (const int64_t id : reads_)
    if (std::find(r.awaits.begin(), r.awaits.end(), id) == r.awaits.end()) r.awaits.push_back(id);
  reads_.clear();
  std::string key(reinterpret_cast<const char*>(&site), sizeof site);
  key += r.name + '\n' + r.shape;
  auto [it, fresh] = record_index_.try_emplace(std::move(key), o_.ops->size());
  if (!fresh) {
    mesh::OpRecord& had = (*o_.ops)[it->second];
    const bool same = had.cost.flops == r.cost.flops && had.cost.transcendentals == r.cost.transcendentals &&
                      had.cost.bytes_read == r.cost.bytes_read && had.cost.bytes_written == r.cost.bytes_written &&
                      had.ici_seconds == r.ici_seconds && had.ici_bytes == r.ici_bytes &&
                      had.mxu.size() == r.mxu.size() && had.precision == r.precision;
    if (same) {
      for (const int64_t id : r.awaits)
        if (std::find(had.awaits.begin(), had.awaits.end(), id) == had.awaits.end()) had.awaits.push_back(id);
      had.host_seconds = (had.host_seconds * had.repeat + r.host_seconds) / (had.repeat + 1);
      had.repeat += 1;
      return it->second;
    }
    it->second = o_.ops->size();
  }
  o_.ops->push_back(std::move(r));
  return o_.ops->size() - 1;
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
