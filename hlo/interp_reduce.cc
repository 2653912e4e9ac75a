// reduce, reduce_window, sort and top_k, with their body regions: a body of
// one binary op folds rows with EvalElementwise, any other runs through the
// interpreter per element.
#include "hlo/attrs.h"
#include "hlo/interpreter_impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>

#include "kernels/ops_parallel.h"

namespace tpumesh::hlo {

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

Status Interpreter::ApplyBody(const Region& body, const Op* simple,
                              const std::vector<const uint8_t*>& acc_in,
                              const std::vector<const uint8_t*>& x,
                              const std::vector<uint8_t*>& acc_out,
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
    std::memcpy(
        t.data.mutable_raw(), i < k ? acc_in[i] : x[i - k],
        static_cast<size_t>(ElementTypeBytes(scalar_types[i % k].element)));
    args.push_back(std::move(t));
  }
  Env env = RegionEnv(body);
  TPUMESH_ASSIGN_OR_RETURN(std::vector<Tensor> r, RunRegion(body, std::move(args), env));
  if (r.size() != k) return InvalidArgumentError("the body returns the wrong number of values");
  for (size_t i = 0; i < k; ++i)
    std::memcpy(acc_out[i], r[i].data.raw(), static_cast<size_t>(ElementTypeBytes(scalar_types[i].element)));
  return OkStatus();
}

Status Interpreter::Fold(const Region& body, const Op* simple,
                         const std::vector<const Tensor*>& in, size_t first,
                         int64_t off, const std::vector<Type>& st,
                         std::vector<std::vector<uint8_t>>& acc,
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

Status Interpreter::Reduce(const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
  const size_t k = in.size() / 2;
  if (k == 0 || in.size() != 2 * k || out.size() != k || op.regions.size() != 1)
    return InvalidArgumentError("needs inputs, as many inits and a body");
  TPUMESH_ASSIGN_OR_RETURN(AxesAttrs reduce, TypedAttrs<AxesAttrs>(op));
  const Dims& dims = reduce.axes;
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
    if (out[i].type.dims != od)
      return InvalidArgumentError("result " + out[i].type.ToString() +
                                  " does not match the reduction");
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

Status Interpreter::ReduceSimple(const Op& op, const Op* body, const Tensor& x,
                                 const Tensor& init, const Dims& kept,
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

Status Interpreter::Sort(const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
  const size_t k = in.size();
  if (k == 0 || out.size() != k || op.regions.size() != 1)
    return InvalidArgumentError("needs operands and a comparator");
  const Dims& d = in[0]->type.dims;
  TPUMESH_ASSIGN_OR_RETURN(AxisAttrs sort, TypedAttrs<AxisAttrs>(op));
  int64_t dim = sort.axis;
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
  Env env = RegionEnv(op.regions[0]);
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

Status Interpreter::TopK(const Op& op, const Tensor& x, std::vector<Tensor>& out) {
  TPUMESH_ASSIGN_OR_RETURN(AxisAttrs top_k, TypedAttrs<AxisAttrs>(op));
  const int64_t k = top_k.axis;
  const Dims& d = x.type.dims;
  if (d.empty() || out.size() != 2 || k < 0 || k > d.back())
    return InvalidArgumentError("bad k for the last dimension");
  if (IsComplex(x.type.element)) return InvalidArgumentError("complex values have no order to take the largest by");
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

Status Interpreter::TopKRow(const std::vector<double>& key,
                            std::vector<int64_t>& idx, int64_t k,
                            const Tensor& x, int64_t r, int64_t n, int w,
                            std::vector<Tensor>& out) {
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

Status Interpreter::ReduceWindow(const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
  const size_t k = in.size() / 2;
  if (k == 0 || in.size() != 2 * k || out.size() != k || op.regions.size() != 1)
    return InvalidArgumentError("needs inputs, as many inits and a body");
  const Dims& d = in[0]->type.dims;
  const size_t rank = d.size();
  TPUMESH_ASSIGN_OR_RETURN(WindowAttrs window, TypedAttrs<WindowAttrs>(op));
  const Dims &win = window.dims, &stride = window.strides, &bdil = window.base_dilations,
             &wdil = window.window_dilations, &pad = window.padding;
  if (win.size() != rank || stride.size() != rank || bdil.size() != rank ||
      wdil.size() != rank || pad.size() != 2 * rank)
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

}  // namespace tpumesh::hlo
