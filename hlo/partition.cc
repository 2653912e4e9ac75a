#include "hlo/partition.h"

#include <algorithm>
#include <functional>

#include "hlo/op_shapes.h"
#include "hlo/attrs.h"
#include "hlo/ops.h"

namespace tpumesh::hlo {
namespace {

// A list of an op's typed attributes (hlo/attrs.h), or why they did not
// resolve: the rules below test each list as they once read it by key.
template <typename T>
StatusOr<Dims> Member(const StatusOr<T>& attrs, Dims T::*list) {
  if (!attrs.ok()) return attrs.status();
  return (*attrs).*list;
}

}  // namespace

bool SameGroup(const DeviceGroup& a, const DeviceGroup& b) {
  if (a == b) return true;
  return a && b && *a == *b;
}

bool Split::replicated() const {
  return std::none_of(dims.begin(), dims.end(), [](const DimSplit& d) { return d.split(); });
}

Type Split::Local(const Type& global) const {
  Type t = global;
  for (size_t k = 0; k < dims.size() && k < t.dims.size(); ++k)
    if (dims[k].split()) t.dims[k] /= dims[k].ways;
  return t;
}

std::vector<int> Split::Members() const {
  std::vector<int> m;
  for (const DimSplit& d : dims)
    if (d.split()) m.insert(m.end(), d.group->begin(), d.group->end());
  std::sort(m.begin(), m.end());
  m.erase(std::unique(m.begin(), m.end()), m.end());
  return m;
}

bool Split::operator==(const Split& o) const {
  const size_t n = std::max(dims.size(), o.dims.size());
  for (size_t k = 0; k < n; ++k)
    if (!(dim(k) == o.dim(k))) return false;
  return true;
}

Split SplitOf(const Sharding& s, int device, const std::vector<int64_t>& dims) {
  Split out;
  if (s.tiles.empty() || device < 0 || static_cast<size_t>(device) >= s.device_tiles.size()) return out;
  out.dims.assign(dims.size(), DimSplit{});
  const auto& mine = s.device_tiles[static_cast<size_t>(device)];
  auto replica = [&](size_t d) { return s.replica.empty() ? 0 : s.replica[d]; };
  for (size_t k = 0; k < dims.size() && k < s.tiles.size(); ++k) {
    const int64_t ways = s.tiles[k];
    if (ways <= 1 || dims[k] % ways) continue;
    std::vector<int> group(static_cast<size_t>(ways), -1);
    bool ok = true;
    for (size_t e = 0; e < s.device_tiles.size() && ok; ++e) {
      const auto& t = s.device_tiles[e];
      bool same = replica(e) == replica(static_cast<size_t>(device));
      for (size_t j = 0; j < t.size() && same; ++j) same = j == k || t[j] == mine[j];
      if (!same) continue;
      int& slot = group[static_cast<size_t>(t[k])];
      ok = slot < 0;
      slot = static_cast<int>(e);
    }
    if (!ok || std::find(group.begin(), group.end(), -1) != group.end()) continue;
    out.dims[k] = {ways, std::make_shared<const std::vector<int>>(std::move(group))};
  }
  return out;
}

namespace {

// The result's split, built dimension by dimension: a group may split one
// dimension of a value only, and a dimension only once.
class Builder {
 public:
  explicit Builder(size_t rank) : split_{std::vector<DimSplit>(rank)} {}
  bool Assign(size_t k, const DimSplit& d) {
    if (!d.split()) return true;
    if (k >= split_.dims.size()) return false;
    if (split_.dims[k].split()) return split_.dims[k] == d;
    for (const DimSplit& o : split_.dims)
      if (o.split() && SameGroup(o.group, d.group)) return false;
    for (const DeviceGroup& g : reduced_)
      if (SameGroup(g, d.group)) return false;
    split_.dims[k] = d;
    return true;
  }
  bool Reduce(const DimSplit& d) {
    for (const DimSplit& o : split_.dims)
      if (o.split() && SameGroup(o.group, d.group)) return false;
    for (const DeviceGroup& g : reduced_)
      if (SameGroup(g, d.group)) return true;
    reduced_.push_back(d.group);
    return true;
  }
  // A contracted pair of dimensions: split alike on both sides (or on one,
  // the other read as the matching piece), their products are partial sums.
  bool Contract(const DimSplit& l, const DimSplit& r) {
    if (l.split() && r.split() && !(l == r)) return false;
    return !(l.split() || r.split()) || Reduce(l.split() ? l : r);
  }
  const Split& split() const { return split_; }
  const std::vector<DeviceGroup>& reduced() const { return reduced_; }

 private:
  Split split_;
  std::vector<DeviceGroup> reduced_;
};

bool Contains(const Dims& v, int64_t k) { return std::find(v.begin(), v.end(), k) != v.end(); }

}  // namespace

Partitioned Propagate(const Op& op, const std::vector<Type>& in_types, const std::vector<Split>& in,
                      const std::vector<Type>& out_types) {
  Partitioned p;
  p.results.assign(out_types.size(), Split{});
  std::vector<Split> s = in;
  s.resize(in_types.size());
  p.read = s;
  if (std::all_of(s.begin(), s.end(), [](const Split& x) { return x.replicated(); })) return p;
  // Dimensions of operands that are whole but read as the piece that lines
  // up with another operand's split (set by the rules); each operand is read
  // as it is split once the rule has run, plus these.
  std::vector<Split> sliced(s.size());
  struct ReadFixup {
    Partitioned& p;
    const std::vector<Split>& s;
    const std::vector<Split>& sliced;
    ~ReadFixup() {
      for (size_t i = 0; i < s.size(); ++i) {
        p.read[i] = s[i];
        for (size_t k = 0; k < sliced[i].dims.size(); ++k) {
          if (!sliced[i].dims[k].split() || p.read[i].dim(k).split()) continue;
          p.read[i].dims.resize(std::max(p.read[i].dims.size(), sliced[i].dims.size()));
          p.read[i].dims[k] = sliced[i].dims[k];
        }
      }
    }
  } fixup{p, s, sliced};
  auto gather = [&](size_t i) {
    if (i < s.size() && !s[i].replicated()) {
      p.gathered.push_back(i);
      s[i] = Split{};
    }
  };
  auto gather_all = [&] {
    for (size_t i = 0; i < s.size(); ++i) gather(i);
  };
  auto rank = [&](size_t i) { return in_types[i].dims.size(); };
  // Operand dimensions paired across two operands (a dot's batch and
  // contracting dimensions, a convolution's input features): one side split,
  // the other is read as the matching piece.
  auto line_up = [&](size_t a_dim, size_t b_dim) {
    const DimSplit a = s[0].dim(a_dim), b = s[1].dim(b_dim);
    if (a.split() == b.split()) return;
    const size_t whole = a.split() ? 1 : 0, dim = a.split() ? b_dim : a_dim;
    if (dim >= rank(whole)) return;
    sliced[whole].dims.resize(rank(whole));
    sliced[whole].dims[dim] = a.split() ? a : b;
  };
  // Splits that stay on the same dimensions (elementwise, windows, slices):
  // `keeps(k)` says whether dimension k may stay split; every operand of the
  // result's rank must agree with the first split one.
  auto same_dims = [&](const std::function<bool(size_t)>& keeps, size_t operands) {
    if (out_types.empty()) return;
    const size_t r = out_types[0].dims.size();
    int ref = -1;
    for (size_t i = 0; i < operands && i < s.size(); ++i) {
      if (s[i].replicated()) continue;
      bool ok = rank(i) == r;
      for (size_t k = 0; k < r && ok; ++k) ok = !s[i].dim(k).split() || keeps(k);
      if (!ok || (ref >= 0 && !(s[i] == s[static_cast<size_t>(ref)]))) {
        gather(i);
        continue;
      }
      if (ref < 0) ref = static_cast<int>(i);
    }
    for (size_t i = operands; i < s.size(); ++i) gather(i);
    if (ref < 0) return;
    for (size_t j = 0; j < out_types.size(); ++j)
      if (out_types[j].dims.size() == r) p.results[j] = s[static_cast<size_t>(ref)];
    for (size_t i = 0; i < operands && i < s.size(); ++i)
      if (s[i].replicated() && rank(i) == r && in_types[i].dims == in_types[static_cast<size_t>(ref)].dims)
        sliced[i] = s[static_cast<size_t>(ref)];
  };
  // A two-operand rule: with the splits as they come, else with the right
  // operand whole, else both.
  auto with_fallbacks = [&](const std::function<bool()>& attempt) {
    if (attempt()) return;
    gather(1);
    if (attempt()) return;
    gather(0);
    attempt();
  };
  const OpEntry* e = EntryOf(op);
  const Dims& in0 = in_types.empty() ? Dims{} : in_types[0].dims;

  switch (e ? e->shard : Shard::kWhole) {
    case Shard::kBitcastConvert:
      if (out_types.empty() || out_types[0].dims.size() != rank(0)) {
        gather_all();
        break;
      }
      [[fallthrough]];
    case Shard::kSameDims: {
      same_dims([](size_t) { return true; }, s.size());
      break;
    }
    case Shard::kBroadcastInDim: {
      auto bd = Member(TypedAttrs<AxesAttrs>(op), &AxesAttrs::axes);
      Builder b(out_types[0].dims.size());
      bool ok = bd.ok() && bd->size() == rank(0);
      for (size_t k = 0; ok && k < rank(0); ++k) {
        const auto d = static_cast<size_t>((*bd)[k]);
        ok = !s[0].dim(k).split() || (d < out_types[0].dims.size() && out_types[0].dims[d] == in0[k] && b.Assign(d, s[0].dim(k)));
      }
      if (ok) p.results[0] = b.split();
      else gather(0);
      break;
    }
    case Shard::kReshape: {
      // A split dimension keeps its pieces in a result dimension that starts
      // at the same element stride (equal products before both) and still
      // divides by the ways.
      const Dims& od = out_types[0].dims;
      Builder b(od.size());
      bool ok = true;
      int64_t before_in = 1;
      for (size_t k = 0; k < rank(0) && ok; before_in *= in0[k], ++k) {
        if (!s[0].dim(k).split()) continue;
        ok = false;
        int64_t before_out = 1;
        for (size_t j = 0; j < od.size() && !ok; before_out *= od[j], ++j)
          if (before_out == before_in && od[j] % s[0].dim(k).ways == 0)
            ok = b.Assign(j, s[0].dim(k));
      }
      if (ok) p.results[0] = b.split();
      else gather(0);
      break;
    }
    case Shard::kTranspose: {
      auto perm = Member(TypedAttrs<AxesAttrs>(op), &AxesAttrs::axes);
      Builder b(out_types[0].dims.size());
      bool ok = perm.ok() && perm->size() == rank(0);
      for (size_t k = 0; ok && k < perm->size(); ++k) ok = b.Assign(k, s[0].dim(static_cast<size_t>((*perm)[k])));
      if (ok) p.results[0] = b.split();
      else gather(0);
      break;
    }
    case Shard::kDot: {
      auto dd = GetDotDims(op, in_types[0], in_types[1]);
      if (!dd.ok()) {
        gather_all();
        return p;
      }
      auto attempt = [&]() -> bool {
        Builder b(out_types[0].dims.size());
        const size_t nb = dd->lb.size(), nlf = dd->lf.size();
        for (size_t k = 0; k < nb; ++k) {
          const DimSplit l = s[0].dim(static_cast<size_t>(dd->lb[k])), r = s[1].dim(static_cast<size_t>(dd->rb[k]));
          if (l.split() && r.split() && !(l == r)) return false;
          if (!b.Assign(k, l.split() ? l : r)) return false;
        }
        for (size_t k = 0; k < dd->lc.size(); ++k) {
          if (!b.Contract(s[0].dim(static_cast<size_t>(dd->lc[k])), s[1].dim(static_cast<size_t>(dd->rc[k])))) return false;
        }
        for (size_t k = 0; k < nlf; ++k)
          if (!b.Assign(nb + k, s[0].dim(static_cast<size_t>(dd->lf[k])))) return false;
        for (size_t k = 0; k < dd->rf.size(); ++k)
          if (!b.Assign(nb + nlf + k, s[1].dim(static_cast<size_t>(dd->rf[k])))) return false;
        p.results[0] = b.split();
        p.reduced_over = b.reduced();
        return true;
      };
      with_fallbacks(attempt);
      for (size_t k = 0; k < dd->lb.size(); ++k) line_up(static_cast<size_t>(dd->lb[k]), static_cast<size_t>(dd->rb[k]));
      for (size_t k = 0; k < dd->lc.size(); ++k) line_up(static_cast<size_t>(dd->lc[k]), static_cast<size_t>(dd->rc[k]));
      break;
    }
    case Shard::kConvolution: {
      auto cs = GetConvShape(op, in_types[0], in_types[1], out_types[0]);
      if (!cs.ok() || cs->batch_groups != 1) {  // batch groups: computed on whole operands
        gather_all();
        return p;
      }
      const size_t ns = cs->in_sp.size();
      auto at = [](const Dims& order, size_t i) { return static_cast<size_t>(order[i]); };
      for (size_t k = 1; k <= ns; ++k)
        if (s[0].dim(at(cs->in_order, k)).split()) gather(0);
      for (size_t k = 0; k < ns; ++k)
        if (s[1].dim(at(cs->k_order, k)).split()) gather(1);
      if (cs->groups != 1 && (s[0].dim(at(cs->in_order, ns + 1)).split() || !s[1].replicated())) {
        gather(0);
        gather(1);
      }
      auto attempt = [&]() -> bool {
        Builder b(out_types[0].dims.size());
        if (!b.Assign(at(cs->out_order, 0), s[0].dim(at(cs->in_order, 0)))) return false;
        if (!b.Assign(at(cs->out_order, ns + 1), s[1].dim(at(cs->k_order, ns + 1)))) return false;
        if (!b.Contract(s[0].dim(at(cs->in_order, ns + 1)), s[1].dim(at(cs->k_order, ns)))) return false;
        p.results[0] = b.split();
        p.reduced_over = b.reduced();
        return true;
      };
      with_fallbacks(attempt);
      if (cs->groups == 1) line_up(at(cs->in_order, ns + 1), at(cs->k_order, ns));
      break;
    }
    case Shard::kReduce: {
      const size_t inputs = s.size() / 2;
      auto dims = Member(TypedAttrs<AxesAttrs>(op), &AxesAttrs::axes);
      if (!dims.ok() || inputs == 0) {
        gather_all();
        return p;
      }
      for (size_t i = 1; i < inputs; ++i)
        if (!(s[i] == s[0])) gather(i);
      for (size_t i = inputs; i < s.size(); ++i) gather(i);
      Builder b(out_types[0].dims.size());
      bool ok = true;
      for (size_t k = 0; k < rank(0) && ok; ++k) {
        const DimSplit d = s[0].dim(k);
        if (!d.split()) continue;
        if (Contains(*dims, static_cast<int64_t>(k))) {
          ok = b.Reduce(d);
        } else {
          const auto before = std::count_if(dims->begin(), dims->end(), [&](int64_t x) { return x < static_cast<int64_t>(k); });
          ok = b.Assign(k - static_cast<size_t>(before), d);
        }
      }
      if (!ok) {
        gather_all();
        return p;
      }
      for (Split& r : p.results) r = b.split();
      p.reduced_over = b.reduced();
      break;
    }
    case Shard::kReduceWindow: {
      const size_t inputs = s.size() / 2;
      const auto window = TypedAttrs<WindowAttrs>(op);
      auto win = Member(window, &WindowAttrs::dims), stride = Member(window, &WindowAttrs::strides),
           base = Member(window, &WindowAttrs::base_dilations), wdil = Member(window, &WindowAttrs::window_dilations),
           pad = Member(window, &WindowAttrs::padding);
      const bool ok = win.ok() && stride.ok() && base.ok() && wdil.ok() && pad.ok() && win->size() == rank(0) &&
                      stride->size() == rank(0) && base->size() == rank(0) && wdil->size() == rank(0) &&
                      pad->size() == 2 * rank(0);
      same_dims([&](size_t k) {
        return ok && (*win)[k] == 1 && (*stride)[k] == 1 && (*base)[k] == 1 && (*wdil)[k] == 1 && (*pad)[2 * k] == 0 &&
               (*pad)[2 * k + 1] == 0;
      }, inputs);
      break;
    }
    case Shard::kSlice: {
      const auto slice = TypedAttrs<SliceAttrs>(op);
      auto start = Member(slice, &SliceAttrs::start), limit = Member(slice, &SliceAttrs::limit),
           stride = Member(slice, &SliceAttrs::strides);
      same_dims([&](size_t k) {
        return start.ok() && limit.ok() && stride.ok() && k < start->size() && k < limit->size() && k < stride->size() &&
               (*start)[k] == 0 && (*limit)[k] == in0[k] && (*stride)[k] == 1;
      }, 1);
      break;
    }
    case Shard::kPad: {
      const auto padding = TypedAttrs<PadAttrs>(op);
      auto lo = Member(padding, &PadAttrs::low), hi = Member(padding, &PadAttrs::high),
           mid = Member(padding, &PadAttrs::interior);
      // Without interior_padding, each dimension is gathered (as ever).
      const bool interior_given = padding.ok() && padding->interior_given;
      same_dims([&](size_t k) {
        return interior_given && lo.ok() && hi.ok() && mid.ok() && k < lo->size() && k < hi->size() && k < mid->size() && (*lo)[k] == 0 &&
               (*hi)[k] == 0 && (*mid)[k] == 0;
      }, 1);
      break;
    }
    case Shard::kConcatenate: {
      const auto concat = TypedAttrs<AxisAttrs>(op);
      same_dims([&](size_t k) { return concat.ok() && static_cast<int64_t>(k) != concat->axis; }, s.size());
      break;
    }
    case Shard::kDynamicSlice: {
      auto sizes = IntsAttr(op, "slice_sizes");
      same_dims([&](size_t k) { return sizes.ok() && k < sizes->size() && (*sizes)[k] == in0[k]; }, 1);
      break;
    }
    case Shard::kDynamicUpdateSlice: {
      same_dims([&](size_t k) { return in_types.size() > 1 && k < rank(1) && in_types[1].dims[k] == in0[k]; }, 2);
      break;
    }
    case Shard::kSort: {
      const auto sort = TypedAttrs<AxisAttrs>(op);
      int64_t d = sort.ok() ? sort->axis : -1;
      if (d < 0) d += static_cast<int64_t>(rank(0));
      same_dims([&](size_t k) { return static_cast<int64_t>(k) != d; }, s.size());
      break;
    }
    case Shard::kTopK: {
      same_dims([&](size_t k) { return k + 1 != rank(0); }, 1);
      break;
    }
    case Shard::kGather: {
      // The indices split on a batch dimension, which the result keeps (an
      // embedding lookup); the operand split on a dimension it takes whole and
      // does not index (a nearest-neighbour resize's batch), which the result
      // keeps among its offset dimensions. Any other split is gathered.
      const auto g = TypedAttrs<GatherAttrs>(op);
      if (!g.ok() || !g->operand_batching_dims.empty() || s.size() < 2 || g->slice_sizes.size() != rank(0)) {
        gather_all();
        return p;
      }
      const Dims &offset = g->offset_dims, &collapsed = g->collapsed_slice_dims, &index_map = g->start_index_map,
                 &sizes = g->slice_sizes;
      const int64_t ivd = g->index_vector_dim;
      Builder b(out_types[0].dims.size());
      bool ok = true;
      for (size_t k = 0, pos = 0; k < rank(0) && ok; ++k) {
        const int64_t kk = static_cast<int64_t>(k);
        if (Contains(collapsed, kk)) continue;
        const size_t here = pos++;
        if (!s[0].dim(k).split()) continue;
        ok = !Contains(index_map, kk) && sizes[k] == in0[k] && here < offset.size() &&
             b.Assign(static_cast<size_t>(offset[here]), s[0].dim(k));
      }
      if (!ok) {
        gather(0);
        b = Builder(out_types[0].dims.size());
      }
      const Builder operand_only = b;
      std::vector<size_t> batch_out;
      for (size_t j = 0; j < out_types[0].dims.size(); ++j)
        if (!Contains(offset, static_cast<int64_t>(j))) batch_out.push_back(j);
      ok = true;
      for (size_t k = 0; k < rank(1) && ok; ++k) {
        if (!s[1].dim(k).split()) continue;
        const int64_t kk = static_cast<int64_t>(k);
        const size_t pos = static_cast<size_t>(kk - (kk > ivd ? 1 : 0));
        ok = kk != ivd && pos < batch_out.size() && out_types[0].dims[batch_out[pos]] == in_types[1].dims[k] &&
             b.Assign(batch_out[pos], s[1].dim(k));
      }
      if (!ok) {
        gather(1);
        b = operand_only;
      }
      p.results[0] = b.split();
      break;
    }
    case Shard::kUnset:  // refused by tests/hlo/registry_test.cc
    case Shard::kWhole:
    case Shard::kRegions:
      gather_all();
      break;
  }
  return p;
}

}  // namespace tpumesh::hlo
