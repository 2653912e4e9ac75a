// gather, scatter and select_and_scatter.
#include "hlo/attrs.h"
#include "hlo/interpreter_impl.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace tpumesh::hlo {

Status Interpreter::Gather(const Op& op, const Tensor& operand, const Tensor& indices, Tensor& out) {
  TPUMESH_ASSIGN_OR_RETURN(GatherAttrs g, TypedAttrs<GatherAttrs>(op));  // of indices' type
  const Dims &offset_dims = g.offset_dims, &collapsed = g.collapsed_slice_dims, &obatch = g.operand_batching_dims,
             &ibatch = g.start_indices_batching_dims, &start_map = g.start_index_map, &sizes = g.slice_sizes;
  const int64_t ivd = g.index_vector_dim;
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
  if (static_cast<int64_t>(start_map.size()) != idx_vec)
    return InvalidArgumentError("start_index_map has the wrong length");
  const Dims is = Strides(id), os = Strides(od);
  // indices' batch dims: all but index_vector_dim, in order
  Dims ibd;
  for (int64_t k = 0; k < static_cast<int64_t>(id.size()); ++k)
    if (k != ivd) ibd.push_back(k);
  if (ibd.size() != batch_dims.size()) return InvalidArgumentError("result rank does not match the indices");
  IndexCopy(operand, out, [&](const Dims& r) -> int64_t {
    Dims full(od.size(), 0);
    int64_t ibase = 0;
    for (size_t j = 0; j < batch_dims.size(); ++j)
      ibase += r[static_cast<size_t>(batch_dims[j])] *
               is[static_cast<size_t>(ibd[j])];
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

Status Interpreter::SelectAndScatter(const Op& op, const std::vector<const Tensor*>& in, Tensor& out) {
  if (in.size() != 3 || op.regions.size() != 2)
    return InvalidArgumentError("needs operand, source, init and two regions");
  const Tensor& x = *in[0];
  const Tensor& src = *in[1];
  const Tensor& init = *in[2];
  const Dims& d = x.type.dims;
  const size_t rank = d.size();
  TPUMESH_ASSIGN_OR_RETURN(WindowAttrs window, TypedAttrs<WindowAttrs>(op));
  const Dims &win = window.dims, &stride = window.strides, &pad = window.padding;
  if (win.size() != rank || stride.size() != rank || pad.size() != 2 * rank)
    return InvalidArgumentError("window attributes have the wrong length");
  const Dims& sd = src.type.dims;
  if (sd.size() != rank) return InvalidArgumentError("the source's rank is not the operand's");
  for (size_t j = 0; j < rank; ++j) {
    if (win[j] < 1 || stride[j] < 1) return InvalidArgumentError("bad window");
    const int64_t ext = d[j] + pad[2 * j] + pad[2 * j + 1];
    const int64_t expect = ext < win[j] ? 0 : (ext - win[j]) / stride[j] + 1;
    if (sd[j] != expect)
      return InvalidArgumentError("source " + src.type.ToString() +
                                  " does not match the windows over " +
                                  x.type.ToString());
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
    if (ce && ce->scalar.kind == ScalarFn::Kind::kCompare &&
        c.operands.size() == 2 && c.operands[0] == sel.blocks[0].args[0] &&
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
    Env env = RegionEnv(sel);
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

StatusOr<ScatterLayout> ScatterLayoutOf(const Op& op) {
  const std::vector<Type>& in = op.operand_types;
  const size_t k = (in.size() - 1) / 2;
  if (in.size() != 2 * k + 1 || k == 0 || op.result_types.size() != k || op.regions.size() != 1)
    return InvalidArgumentError("needs inputs, indices, as many updates and a body");
  TPUMESH_ASSIGN_OR_RETURN(ScatterAttrs s, TypedAttrs<ScatterAttrs>(op));  // of indices' type
  const Dims &uwd = s.update_window_dims, &inserted = s.inserted_window_dims, &ibatch = s.input_batching_dims,
             &sibatch = s.scatter_indices_batching_dims, &to_operand = s.scatter_dims_to_operand_dims;
  const Dims& id = in[k].dims;
  const int64_t ivd = s.index_vector_dim;
  const Dims& od = in[0].dims;
  const Dims& ud = in[k + 1].dims;
  auto in_range = [](const Dims& ds, size_t rank) {
    for (int64_t v : ds)
      if (v < 0 || v >= static_cast<int64_t>(rank)) return false;
    return true;
  };
  for (size_t i = 0; i < k; ++i)
    if (in[i].dims != od || !(op.result_types[i] == in[i]) || in[k + 1 + i].dims != ud)
      return InvalidArgumentError("inputs, updates and results differ in shape");
  if (!in_range(uwd, ud.size()) || !in_range(inserted, od.size()) || !in_range(ibatch, od.size()) ||
      !in_range(sibatch, id.size()) || !in_range(to_operand, od.size()) || ibatch.size() != sibatch.size() ||
      ivd < 0 || ivd > static_cast<int64_t>(id.size()) || std::count(sibatch.begin(), sibatch.end(), ivd))
    return InvalidArgumentError("dimension numbers out of range");
  ScatterLayout l;
  l.k = k;
  l.attrs = s;
  for (int64_t j = 0; j < static_cast<int64_t>(ud.size()); ++j)
    if (std::find(uwd.begin(), uwd.end(), j) == uwd.end()) l.update_scatter_dims.push_back(j);
  for (int64_t j = 0; j < static_cast<int64_t>(od.size()); ++j)
    if (std::find(inserted.begin(), inserted.end(), j) == inserted.end() &&
        std::find(ibatch.begin(), ibatch.end(), j) == ibatch.end())
      l.window_operand.push_back(j);
  if (l.window_operand.size() != uwd.size()) return InvalidArgumentError("update_window_dims do not match the operand");
  // The spec's bound: a window is no larger than the operand along
  // each of its dimensions.
  for (size_t w = 0; w < uwd.size(); ++w)
    if (ud[static_cast<size_t>(uwd[w])] > od[static_cast<size_t>(l.window_operand[w])])
      return InvalidArgumentError("the update window is larger than the operand along dimension " +
                                  std::to_string(l.window_operand[w]));
  for (int64_t j = 0; j < static_cast<int64_t>(id.size()); ++j)
    if (j != ivd) l.index_batch_dims.push_back(j);
  if (l.index_batch_dims.size() != l.update_scatter_dims.size())
    return InvalidArgumentError("updates do not match the indices");
  l.index_vector = ivd < static_cast<int64_t>(id.size()) ? id[static_cast<size_t>(ivd)] : 1;
  if (static_cast<int64_t>(to_operand.size()) != l.index_vector)
    return InvalidArgumentError("scatter_dims_to_operand_dims has the wrong length");
  return l;
}

Status Interpreter::Scatter(const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
  TPUMESH_ASSIGN_OR_RETURN(const ScatterLayout l, ScatterLayoutOf(op));  // the op's types are the values'
  const size_t k = l.k;
  const Tensor& indices = *in[k];
  const ScatterAttrs& s = l.attrs;
  const Dims &uwd = s.update_window_dims, &ibatch = s.input_batching_dims, &sibatch = s.scatter_indices_batching_dims,
             &to_operand = s.scatter_dims_to_operand_dims;
  const Dims& id = indices.type.dims;
  const int64_t ivd = s.index_vector_dim;
  const Dims& od = in[0]->type.dims;
  const Dims& ud = in[k + 1]->type.dims;
  const Dims &update_scatter_dims = l.update_scatter_dims, &window_operand = l.window_operand,
             &ibd = l.index_batch_dims;
  const int64_t idx_vec = l.index_vector;
  for (size_t i = 0; i < k; ++i)
    std::memcpy(out[i].data.mutable_raw(), in[i]->data.raw(), static_cast<size_t>(out[i].type.size_bytes()));
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

}  // namespace tpumesh::hlo
