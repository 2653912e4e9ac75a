// Elementwise ops (hlo/elementwise.h over the values, with broadcast views)
// and the data ops: constants, iota, copies, broadcasts, transposes, slices,
// concatenation, padding.
#include "hlo/attrs.h"
#include "hlo/interpreter_impl.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <mutex>

#include "kernels/ops_parallel.h"

namespace tpumesh::hlo {

Status Interpreter::Uncontract(const Op& op, std::vector<const Tensor*>& in, std::vector<Tensor>& held,
                               MulAdd& form) {
  const OpEntry* e = EntryOf(op);
  const bool binary = e && e->scalar.kind == ScalarFn::Kind::kBinary && in.size() == 2;
  held.reserve(1);
  for (size_t k = 0; k < in.size(); ++k) {
    if (!in[k]->product) continue;
    const UnroundedProduct& p = *in[k]->product;
    const Tensor* other = in[1 - k];
    if (binary && form == MulAdd::kNone && !other->product &&
        (e->scalar.bin == Bin::kAdd || e->scalar.bin == Bin::kSub)) {
      form = e->scalar.bin == Bin::kAdd ? MulAdd::kAdd : (k == 0 ? MulAdd::kProductMinus : MulAdd::kMinusProduct);
      in = {&p.factor[0], &p.factor[1], other};
      return OkStatus();
    }
    if (!binary || e->scalar.bin != Bin::kMul || !held.empty() || other->product)
      return InternalError("an unrounded product reached an op that cannot take it");
    // (y * c1) * c2 = y * (c1 * c2): both constants splats, read at element 0.
    Tensor c;
    c.type.element = op.result_types[0].element;
    const int w = ElementTypeBytes(c.type.element);
    c.data = mesh::Array::Host(mesh::DType::kU8, {w});
    if (c.type.element == ElementType::kF32)
      *c.mutable_as<float>() = p.factor[1].as<float>()[0] * other->as<float>()[0];
    else if (c.type.element == ElementType::kF64)
      *c.mutable_as<double>() = p.factor[1].as<double>()[0] * other->as<double>()[0];
    else
      return InternalError("a folded product of " + std::string(ElementTypeName(c.type.element)));
    held.push_back(std::move(c));
    in[k] = &p.factor[0];
    in[1 - k] = &held.back();
  }
  return OkStatus();
}

StatusOr<Tensor> Interpreter::Unrounded(const Op& op, const std::vector<const Tensor*>& operands) {
  std::vector<const Tensor*> in = operands;
  std::vector<Tensor> held;
  MulAdd form = MulAdd::kNone;
  TPUMESH_RETURN_IF_ERROR(Uncontract(op, in, held, form));
  if (in.size() != 2 || form != MulAdd::kNone) return InternalError("an unrounded product of another op");
  const size_t constant = products_[static_cast<size_t>(op.results[0])] == Product::kFoldedLhs ? 0 : 1;
  auto p = std::make_shared<UnroundedProduct>();
  p->factor[0] = *in[1 - constant];
  p->factor[1] = *in[constant];
  Tensor x;
  x.type = op.result_types[0];
  x.product = std::move(p);
  return x;
}

Status Interpreter::Elementwise(const Op& op, const ScalarFn& fn, const std::vector<const Tensor*>& operands,
                                Tensor& out) {
  std::vector<const Tensor*> in = operands;
  std::vector<Tensor> held;
  ElementwiseCall c;
  TPUMESH_RETURN_IF_ERROR(Uncontract(op, in, held, c.mul_add));
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

void Interpreter::AffineCopy(const Tensor& in, Tensor& out, int64_t base, const Dims& stride) {
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

int64_t Interpreter::ScalarInt(const Tensor& t) {
  const void* p = t.data.raw();
  switch (t.type.element) {
    case ElementType::kI8: return *static_cast<const int8_t*>(p);
    case ElementType::kI16: return *static_cast<const int16_t*>(p);
    case ElementType::kI32: return *static_cast<const int32_t*>(p);
    case ElementType::kI64: return *static_cast<const int64_t*>(p);
    case ElementType::kU8: case ElementType::kPred: return *static_cast<const uint8_t*>(p);
    case ElementType::kU16: return *static_cast<const uint16_t*>(p);
    case ElementType::kU32: return *static_cast<const uint32_t*>(p);
    case ElementType::kU64:
      return static_cast<int64_t>(
          std::min<uint64_t>(*static_cast<const uint64_t*>(p), INT64_MAX));
    default: return 0;
  }
}


Status Interpreter::Data(Run run, const Op& op, const std::vector<const Tensor*>& in, Tensor& out) {
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
    TPUMESH_ASSIGN_OR_RETURN(AxisAttrs iota, TypedAttrs<AxisAttrs>(op));
    const int64_t d = iota.axis;
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
    TPUMESH_ASSIGN_OR_RETURN(AxesAttrs broadcast, TypedAttrs<AxesAttrs>(op));
    const Dims& bd = broadcast.axes;
    const Dims& id = in[0]->type.dims;
    const Dims is = Strides(id);
    Dims st(out.type.dims.size(), 0);
    for (size_t k = 0; k < bd.size(); ++k)
      if (id[k] != 1) st[static_cast<size_t>(bd[k])] += is[k];
    AffineCopy(*in[0], out, 0, st);
    return OkStatus();
  }
  if (run == Run::kTranspose) {
    TPUMESH_ASSIGN_OR_RETURN(AxesAttrs transpose, TypedAttrs<AxesAttrs>(op));
    const Dims& perm = transpose.axes;
    const Dims is = Strides(in[0]->type.dims);
    Dims st(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) st[k] = is[static_cast<size_t>(perm[k])];
    AffineCopy(*in[0], out, 0, st);
    return OkStatus();
  }
  if (run == Run::kReverse) {
    TPUMESH_ASSIGN_OR_RETURN(AxesAttrs reverse, TypedAttrs<AxesAttrs>(op));
    const Dims& dims = reverse.axes;
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
    TPUMESH_ASSIGN_OR_RETURN(SliceAttrs slice, TypedAttrs<SliceAttrs>(op));
    const Dims &start = slice.start, &limit = slice.limit, &stride = slice.strides;
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
    TPUMESH_ASSIGN_OR_RETURN(AxisAttrs concat, TypedAttrs<AxisAttrs>(op));
    const int64_t dim = concat.axis;
    const Dims& od = out.type.dims;
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < dim; ++k) outer *= od[static_cast<size_t>(k)];
    for (size_t k = static_cast<size_t>(dim) + 1; k < od.size(); ++k) inner *= od[k];
    int64_t offset = 0;
    const int64_t row = od[static_cast<size_t>(dim)] * inner * w;
    for (const Tensor* t : in) {
      const int64_t part = t->type.dims[static_cast<size_t>(dim)] * inner * w;
      const uint8_t* src = static_cast<const uint8_t*>(t->data.raw());
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + o * row + offset, src + o * part,
                    static_cast<size_t>(part));
      offset += part;
    }
    return OkStatus();
  }
  if (run == Run::kPad) {
    const Dims& d = in[0]->type.dims;
    TPUMESH_ASSIGN_OR_RETURN(PadAttrs pad, TypedAttrs<PadAttrs>(op));
    const Dims &lo = pad.low, &hi = pad.high, &interior = pad.interior;
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

}  // namespace tpumesh::hlo
