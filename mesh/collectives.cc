#include "mesh/collectives.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <set>

namespace tpumesh::mesh {
namespace {

std::string AxesToString(const AxisNames& axes) {
  std::string s = "(";
  for (size_t i = 0; i < axes.size(); ++i) {
    if (i) s += ",";
    s += "'" + axes[i] + "'";
  }
  return s + ")";
}

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * shape[i + 1];
  return st;
}

int64_t Prod(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

// Copies a box of `box` elements (row-major over its dims) from src to dst,
// each addressed by its own element strides.
void CopyBox(const std::byte* src, const std::vector<int64_t>& src_strides, std::byte* dst,
             const std::vector<int64_t>& dst_strides, const Shape& box, size_t elem) {
  const int rank = static_cast<int>(box.size());
  if (NumElements(box) == 0) return;
  if (rank == 0) {
    std::memcpy(dst, src, elem);
    return;
  }
  const int64_t run = box[rank - 1];
  const bool contiguous = src_strides[rank - 1] == 1 && dst_strides[rank - 1] == 1;
  std::vector<int64_t> idx(rank, 0);
  const int64_t rows = NumElements(box) / run;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t so = 0, d_o = 0;
    for (int a = 0; a < rank - 1; ++a) {
      so += idx[a] * src_strides[a];
      d_o += idx[a] * dst_strides[a];
    }
    if (contiguous) {
      std::memcpy(dst + d_o * elem, src + so * elem, static_cast<size_t>(run) * elem);
    } else {
      for (int64_t i = 0; i < run; ++i)
        std::memcpy(dst + (d_o + i * dst_strides[rank - 1]) * elem,
                    src + (so + i * src_strides[rank - 1]) * elem, elem);
    }
    for (int a = rank - 2; a >= 0; --a) {
      if (++idx[a] < box[a]) break;
      idx[a] = 0;
    }
  }
}

// Sums len elements at element offset `base` of every input, in input
// order, into out; f32 accumulation for f32/bf16, wrap-around for integers.
void ReduceRun(DType t, const std::vector<const std::byte*>& in, int64_t base, int64_t len,
               std::byte* out, int64_t divisor, float* scratch) {
  const size_t n = in.size();
  switch (t) {
    case DType::kF32:
    case DType::kBF16: {
      float* acc = t == DType::kF32 ? reinterpret_cast<float*>(out) : scratch;
      for (size_t k = 0; k < n; ++k) {
        if (t == DType::kF32) {
          const float* x = reinterpret_cast<const float*>(in[k]) + base;
          if (k == 0) {
            std::memcpy(acc, x, len * sizeof(float));
          } else {
#pragma omp simd
            for (int64_t i = 0; i < len; ++i) acc[i] += x[i];
          }
        } else {
          const kernels::bf16* x = reinterpret_cast<const kernels::bf16*>(in[k]) + base;
          if (k == 0) {
            kernels::Bf16ToF32(x, acc, static_cast<size_t>(len));
          } else {
#pragma omp simd
            for (int64_t i = 0; i < len; ++i) acc[i] += kernels::Bf16ToF32(x[i]);
          }
        }
      }
      if (divisor != 1) {
        const float d = static_cast<float>(divisor);
        for (int64_t i = 0; i < len; ++i) acc[i] /= d;
      }
      if (t == DType::kBF16)
        kernels::F32ToBf16(acc, reinterpret_cast<kernels::bf16*>(out), static_cast<size_t>(len));
      break;
    }
    case DType::kU8:  // refused in Run: never summed
      break;
    case DType::kI32:
    case DType::kU32: {
      uint32_t* o = reinterpret_cast<uint32_t*>(out);
      std::memcpy(o, reinterpret_cast<const uint32_t*>(in[0]) + base, len * sizeof(uint32_t));
      for (size_t k = 1; k < n; ++k) {
        const uint32_t* x = reinterpret_cast<const uint32_t*>(in[k]) + base;
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) o[i] += x[i];
      }
      if (divisor != 1) {
        if (t == DType::kI32) {
          int32_t* s = reinterpret_cast<int32_t*>(o);
          for (int64_t i = 0; i < len; ++i) s[i] = static_cast<int32_t>(s[i] / divisor);
        } else {
          for (int64_t i = 0; i < len; ++i) o[i] = static_cast<uint32_t>(o[i] / divisor);
        }
      }
      break;
    }
  }
}

// out[o*inner + i] = (sum_k in[k][o*in_row + off + i]) / divisor. Runs of
// kBlock elements keep the accumulator in L1 while every input streams past
// it once (on 8 devices x 16 MB this halved the psum time against summing
// whole arrays input by input).
void Reduce(DType t, const std::vector<const std::byte*>& in, int64_t outer, int64_t inner,
            int64_t in_row, int64_t off, std::byte* out, int64_t divisor) {
  constexpr int64_t kBlock = 2048;
  const size_t elem = DTypeSize(t);
  std::vector<float> scratch(t == DType::kBF16 ? kBlock : 0);
  for (int64_t r = 0; r < outer; ++r) {
    for (int64_t b = 0; b < inner; b += kBlock) {
      const int64_t len = std::min(kBlock, inner - b);
      ReduceRun(t, in, r * in_row + off + b, len, out + (r * inner + b) * elem, divisor,
                scratch.data());
    }
  }
}

}  // namespace

std::string CollectiveCall::Describe() const {
  std::string s = std::string(CollectiveName(kind)) + " over " + AxesToString(axes) + " of " +
                  std::string(DTypeName(dtype)) + ShapeToString(shape);
  switch (kind) {
    case CollectiveKind::kAllGather:
      s += " (axis=" + std::to_string(axis) + (tiled ? ", tiled)" : ")");
      break;
    case CollectiveKind::kPsumScatter:
      s += " (scatter_dimension=" + std::to_string(axis) + (tiled ? ", tiled)" : ")");
      break;
    case CollectiveKind::kAllToAll:
      s += " (split_axis=" + std::to_string(axis) + ", concat_axis=" +
           std::to_string(concat_axis) + (tiled ? ", tiled)" : ")");
      break;
    case CollectiveKind::kPpermute:
      s += " (" + std::to_string(perm.size()) + " pairs)";
      break;
    default:
      break;
  }
  return s;
}

bool CollectiveCall::SameAs(const CollectiveCall& o) const {
  return kind == o.kind && axes == o.axes && dtype == o.dtype && shape == o.shape &&
         axis == o.axis && concat_axis == o.concat_axis && tiled == o.tiled && perm == o.perm;
}

// ---------------------------------------------------------------------------
// CollectiveHub

CollectiveHub::CollectiveHub(Mesh& mesh, HostCores& host_cores)
    : mesh_(mesh),
      host_cores_(host_cores),
      finished_(mesh.num_devices(), -1),
      finished_status_(mesh.num_devices()),
      secondary_(mesh.num_devices(), false) {}

void CollectiveHub::WaitLocked(std::unique_lock<std::mutex>& lock,
                               const std::function<bool()>& done) {
  if (done()) return;
  // Give this device's host core to another device while parked here.
  host_cores_.Release();
  cv_.wait(lock, done);
  lock.unlock();
  host_cores_.Acquire();
  lock.lock();
}

std::string CollectiveHub::AbandonReasonLocked(int seq) const {
  for (size_t f = 0; f < finished_.size(); ++f) {
    if (finished_[f] < 0 || finished_[f] > seq) continue;
    std::string what = "collective #" + std::to_string(seq);
    auto it = slots_.find(seq);
    if (it != slots_.end() && it->second.first_device >= 0) {
      what += " (" + it->second.first.Describe() + ") that device " +
              std::to_string(it->second.first_device) + " entered";
    }
    if (finished_status_[f].ok()) {
      return "device " + std::to_string(f) + " returned from the pmapped function without entering " + what;
    }
    return "device " + std::to_string(f) + " failed before entering " + what + ": " +
           finished_status_[f].ToString();
  }
  return "";
}

void CollectiveHub::AdvanceClocksLocked(const Slot& slot) {
  const CollectiveCall& call = slot.first;
  const int n = mesh_.num_devices();
  std::vector<double> next(n);
  std::vector<int64_t> sent(n, 0);
  std::map<int, std::pair<double, int64_t>> by_group;  // first member -> (end time, bytes)
  for (int d = 0; d < n; ++d) {
    auto group = mesh_.Group(d, call.axes);
    if (!group.ok()) continue;  // validated before arrival
    const int key = group->front();
    auto it = by_group.find(key);
    if (it == by_group.end()) {
      double start = 0;
      for (int m : *group) start = std::max(start, mesh_.device(m).clock_seconds());
      std::vector<std::pair<int, int>> pairs;
      for (const auto& [s, t] : call.perm) pairs.emplace_back((*group)[s], (*group)[t]);
      const int64_t bytes = NumElements(call.shape) * static_cast<int64_t>(DTypeSize(call.dtype));
      CollectiveCost cost = ModelCollective(mesh_.chip(), mesh_.topology(), call.kind, *group,
                                            bytes, pairs);
      it = by_group.emplace(key, std::make_pair(start + cost.seconds, cost.bytes_sent_per_device))
               .first;
    }
    next[d] = it->second.first;
    sent[d] = it->second.second;
  }
  for (int d = 0; d < n; ++d) {
    mesh_.device(d).SetClock(next[d]);
    mesh_.device(d).AddIciBytes(sent[d]);
  }
}

Status CollectiveHub::Arrive(int device, int seq, const CollectiveCall& call,
                             std::vector<const CollectiveCall*>* calls) {
  std::unique_lock<std::mutex> lock(mu_);
  const int n = mesh_.num_devices();
  Slot& s = slots_[seq];
  if (s.calls.empty()) s.calls.resize(n, nullptr);
  if (s.first_device < 0) {
    s.first = call;
    s.first.input = nullptr;
    s.first_device = device;
  } else if (s.error.ok() && !s.first.SameAs(call)) {
    s.error = FailedPreconditionError(
        "collective #" + std::to_string(seq) + " does not match across devices: device " +
        std::to_string(s.first_device) + " calls " + s.first.Describe() + " but device " +
        std::to_string(device) + " calls " + call.Describe());
  }
  s.calls[device] = &call;
  ++s.arrived;
  if (s.arrived == n) {
    s.ready = true;
    if (s.error.ok()) AdvanceClocksLocked(s);
    cv_.notify_all();
  } else {
    WaitLocked(lock, [&] { return s.ready || !AbandonReasonLocked(seq).empty(); });
  }
  if (!s.ready) {
    secondary_[device] = true;
    return FailedPreconditionError(AbandonReasonLocked(seq));
  }
  if (!s.error.ok()) return s.error;
  *calls = s.calls;
  return OkStatus();
}

void CollectiveHub::Sync(int device, int seq) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot& s = slots_[seq];
  const int n = mesh_.num_devices();
  if (++s.synced == n) {
    cv_.notify_all();
    return;
  }
  WaitLocked(lock, [&] { return s.synced == n; });
}

void CollectiveHub::Depart(int device, int seq) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot& s = slots_[seq];
  const int n = mesh_.num_devices();
  if (++s.departed == n) {
    cv_.notify_all();
    return;
  }
  WaitLocked(lock, [&] { return s.departed == n; });
}

void CollectiveHub::Finish(int device, int entered, const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_[device] = entered;
  finished_status_[device] = status;
  cv_.notify_all();
}

bool CollectiveHub::IsSecondary(int device) const {
  std::lock_guard<std::mutex> lock(mu_);
  return secondary_[device];
}

// ---------------------------------------------------------------------------
// DeviceContext

StatusOr<int> DeviceContext::axis_index(std::string_view axis) const {
  TPUMESH_ASSIGN_OR_RETURN(int pos, mesh_.AxisPosition(axis));
  return mesh_.AxisIndices(device_)[pos];
}

StatusOr<int> DeviceContext::axis_size(std::string_view axis) const {
  TPUMESH_ASSIGN_OR_RETURN(int pos, mesh_.AxisPosition(axis));
  return mesh_.axes()[pos].size;
}

StatusOr<Array> DeviceContext::Psum(const Array& x, const AxisNames& axes) {
  CollectiveCall c;
  c.kind = CollectiveKind::kPsum;
  c.axes = axes;
  c.input = &x;
  return Run(std::move(c));
}

StatusOr<Array> DeviceContext::Pmean(const Array& x, const AxisNames& axes) {
  CollectiveCall c;
  c.kind = CollectiveKind::kPmean;
  c.axes = axes;
  c.input = &x;
  return Run(std::move(c));
}

StatusOr<Array> DeviceContext::AllGather(const Array& x, const AxisNames& axes, int axis,
                                         bool tiled) {
  CollectiveCall c;
  c.kind = CollectiveKind::kAllGather;
  c.axes = axes;
  c.axis = axis;
  c.tiled = tiled;
  c.input = &x;
  return Run(std::move(c));
}

StatusOr<Array> DeviceContext::PsumScatter(const Array& x, const AxisNames& axes,
                                           int scatter_dimension, bool tiled) {
  CollectiveCall c;
  c.kind = CollectiveKind::kPsumScatter;
  c.axes = axes;
  c.axis = scatter_dimension;
  c.tiled = tiled;
  c.input = &x;
  return Run(std::move(c));
}

StatusOr<Array> DeviceContext::Ppermute(const Array& x, const AxisNames& axes,
                                        std::vector<std::pair<int, int>> perm) {
  CollectiveCall c;
  c.kind = CollectiveKind::kPpermute;
  c.axes = axes;
  c.perm = std::move(perm);
  c.input = &x;
  return Run(std::move(c));
}

StatusOr<Array> DeviceContext::AllToAll(const Array& x, const AxisNames& axes, int split_axis,
                                        int concat_axis, bool tiled) {
  CollectiveCall c;
  c.kind = CollectiveKind::kAllToAll;
  c.axes = axes;
  c.axis = split_axis;
  c.concat_axis = concat_axis;
  c.tiled = tiled;
  c.input = &x;
  return Run(std::move(c));
}

namespace {

// Checks a call against its group size before any device waits for another;
// returns the output shape.
StatusOr<Shape> OutputShape(const CollectiveCall& c, int n) {
  const Shape& s = c.shape;
  const int rank = static_cast<int>(s.size());
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError(c.Describe() + ": " + why);
  };
  switch (c.kind) {
    case CollectiveKind::kPsum:
    case CollectiveKind::kPmean:
      return s;
    case CollectiveKind::kAllGather: {
      Shape out = s;
      if (c.tiled) {
        if (c.axis < 0 || c.axis >= rank)
          return bad("tiled axis must name an existing dimension (0.." + std::to_string(rank - 1) + ")");
        out[c.axis] *= n;
      } else {
        if (c.axis < 0 || c.axis > rank)
          return bad("axis must be in 0.." + std::to_string(rank));
        out.insert(out.begin() + c.axis, n);
      }
      return out;
    }
    case CollectiveKind::kPsumScatter: {
      if (c.axis < 0 || c.axis >= rank)
        return bad("scatter_dimension must name an existing dimension");
      Shape out = s;
      if (c.tiled) {
        if (s[c.axis] % n != 0)
          return bad("dimension " + std::to_string(c.axis) + " of size " + std::to_string(s[c.axis]) +
                     " is not divisible by the group size " + std::to_string(n));
        out[c.axis] /= n;
      } else {
        if (s[c.axis] != n)
          return bad("dimension " + std::to_string(c.axis) + " has size " + std::to_string(s[c.axis]) +
                     " but untiled psum_scatter needs the group size " + std::to_string(n));
        out.erase(out.begin() + c.axis);
      }
      return out;
    }
    case CollectiveKind::kPpermute: {
      std::set<int> srcs, dsts;
      for (const auto& [a, b] : c.perm) {
        if (a < 0 || a >= n || b < 0 || b >= n)
          return bad("pair (" + std::to_string(a) + "," + std::to_string(b) +
                     ") out of range for a group of " + std::to_string(n));
        if (!srcs.insert(a).second) return bad("source " + std::to_string(a) + " appears twice");
        if (!dsts.insert(b).second) return bad("destination " + std::to_string(b) + " appears twice");
      }
      return s;
    }
    case CollectiveKind::kAllToAll: {
      if (c.axis < 0 || c.axis >= rank) return bad("split_axis must name an existing dimension");
      if (c.concat_axis < 0 || c.concat_axis >= rank)
        return bad("concat_axis must be in 0.." + std::to_string(rank - 1));
      Shape out = s;
      if (c.tiled) {
        if (s[c.axis] % n != 0)
          return bad("split_axis size " + std::to_string(s[c.axis]) +
                     " is not divisible by the group size " + std::to_string(n));
        out[c.axis] /= n;
        out[c.concat_axis] *= n;
      } else {
        if (s[c.axis] != n)
          return bad("split_axis has size " + std::to_string(s[c.axis]) +
                     " but untiled all_to_all needs the group size " + std::to_string(n));
        out.erase(out.begin() + c.axis);
        out.insert(out.begin() + c.concat_axis, n);
      }
      return out;
    }
  }
  return InternalError("unknown collective");
}

}  // namespace

StatusOr<Array> DeviceContext::Run(CollectiveCall call) {
  if (hub_ == nullptr) {
    return FailedPreconditionError("collectives can only be called inside Mesh::Pmap");
  }
  if (call.input->device() != &device()) {
    return InvalidArgumentError(std::string(CollectiveName(call.kind)) + " on device " +
                                std::to_string(device_) + " got an input on " +
                                (call.input->device() ? "device " + std::to_string(call.input->device()->id())
                                                      : std::string("the host")));
  }
  call.dtype = call.input->dtype();
  call.shape = call.input->shape();
  if (call.dtype == DType::kU8 && (call.kind == CollectiveKind::kPsum || call.kind == CollectiveKind::kPmean ||
                                   call.kind == CollectiveKind::kPsumScatter)) {
    return InvalidArgumentError(std::string(CollectiveName(call.kind)) + " of raw bytes (u8): only data moves");
  }
  TPUMESH_ASSIGN_OR_RETURN(std::vector<int> group, mesh_.Group(device_, call.axes));
  const int n = static_cast<int>(group.size());
  const int me = static_cast<int>(std::find(group.begin(), group.end(), device_) - group.begin());
  TPUMESH_ASSIGN_OR_RETURN(Shape out_shape, OutputShape(call, n));

  // The output is allocated before arriving: a device out of HBM fails on
  // its own (the others then fail as abandoned), and psum's second phase can
  // read the other devices' outputs.
  TPUMESH_ASSIGN_OR_RETURN(Array out, Allocate(call.dtype, out_shape, CollectiveName(call.kind)));
  call.output = static_cast<std::byte*>(out.mutable_raw());

  const int seq = seq_++;
  std::vector<const CollectiveCall*> calls;
  TPUMESH_RETURN_IF_ERROR(hub_->Arrive(device_, seq, call, &calls));

  // Every participant's input is alive and unchanged until all depart.
  bool synced = false;
  StatusOr<Array> result = [&]() -> StatusOr<Array> {
   try {
    std::vector<const std::byte*> in(n);
    for (int k = 0; k < n; ++k)
      in[k] = static_cast<const std::byte*>(calls[group[k]]->input->raw());
    std::byte* o = call.output;
    const size_t elem = DTypeSize(call.dtype);
    const Shape& s = call.shape;
    const int64_t count = NumElements(s);
    switch (call.kind) {
      case CollectiveKind::kPsum:
      case CollectiveKind::kPmean: {
        // As the chip does it: reduce-scatter, then all-gather. Device `me`
        // sums chunk `me` of every input into its own output; after a
        // barrier, it copies the other chunks from their owners' outputs.
        // Each chunk is summed in group order, so every device gets the
        // same bits as a serial sum; host work is 2S per device, not (n+1)S.
        const int64_t divisor = call.kind == CollectiveKind::kPmean ? n : 1;
        auto chunk_begin = [&](int k) { return count * k / n; };
        Reduce(call.dtype, in, 1, chunk_begin(me + 1) - chunk_begin(me), count, chunk_begin(me),
               o + chunk_begin(me) * elem, divisor);
        hub_->Sync(device_, seq);
        synced = true;
        for (int k = 0; k < n; ++k) {
          if (k == me) continue;
          const std::byte* owner = calls[group[k]]->output;
          std::memcpy(o + chunk_begin(k) * elem, owner + chunk_begin(k) * elem,
                      (chunk_begin(k + 1) - chunk_begin(k)) * elem);
        }
        break;
      }
      case CollectiveKind::kAllGather: {
        // Tiled or not, the output is [outer, n, inner] in memory.
        const int64_t outer = Prod(s, 0, call.axis);
        const int64_t inner = Prod(s, call.axis, s.size());
        for (int64_t r = 0; r < outer; ++r)
          for (int k = 0; k < n; ++k)
            std::memcpy(o + ((r * n + k) * inner) * elem, in[k] + r * inner * elem, inner * elem);
        break;
      }
      case CollectiveKind::kPsumScatter: {
        // Input viewed as [outer, n, chunk]; this device keeps chunk `me`.
        const int64_t outer = Prod(s, 0, call.axis);
        const int64_t chunk = Prod(s, call.axis, s.size()) / n;
        Reduce(call.dtype, in, outer, chunk, n * chunk, me * chunk, o, 1);
        break;
      }
      case CollectiveKind::kPpermute:
        for (const auto& [src, dst] : call.perm)
          if (dst == me) std::memcpy(o, in[src], count * elem);
        break;
      case CollectiveKind::kAllToAll: {
        const int a = call.axis, b = call.concat_axis;
        const auto xs = Strides(s);
        const auto ys = Strides(out_shape);
        for (int j = 0; j < n; ++j) {
          if (call.tiled) {
            // Chunk `me` of source j's split axis lands at block j of the
            // concat axis.
            const int64_t c = s[a] / n;
            Shape box = s;
            box[a] = c;
            const int64_t dst_block = (a == b) ? c : s[b];
            CopyBox(in[j] + me * c * xs[a] * elem, xs, o + j * dst_block * ys[b] * elem, ys, box,
                    elem);
          } else {
            // Source j's index `me` on the split axis lands at index j of the
            // new concat axis; the remaining dims keep their order.
            Shape box;
            std::vector<int64_t> src_st, dst_st;
            for (int d = 0; d < static_cast<int>(s.size()); ++d)
              if (d != a) { box.push_back(s[d]); src_st.push_back(xs[d]); }
            for (int d = 0; d < static_cast<int>(out_shape.size()); ++d)
              if (d != b) dst_st.push_back(ys[d]);
            CopyBox(in[j] + me * xs[a] * elem, src_st, o + j * ys[b] * elem, dst_st, box, elem);
          }
        }
        break;
      }
    }
    return out;
   } catch (const std::exception& e) {
    // Never leave the others parked in Sync or Depart.
    if (!synced && (call.kind == CollectiveKind::kPsum || call.kind == CollectiveKind::kPmean))
      hub_->Sync(device_, seq);
    return InternalError(std::string(CollectiveName(call.kind)) + " failed: " + e.what());
   }
  }();
  hub_->Depart(device_, seq);
  return result;
}

}  // namespace tpumesh::mesh
