#include "mesh/collectives.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <set>

namespace tpumesh::mesh {
namespace {

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
  CollectiveData data;
  TPUMESH_RETURN_IF_ERROR(hub_->Arrive(device_, seq, call, &data));

  // Every participant's input is alive and unchanged until all depart.
  bool synced = false;
  StatusOr<Array> result = [&]() -> StatusOr<Array> {
   try {
    std::vector<const std::byte*> in(n);
    for (int k = 0; k < n; ++k) in[k] = data.inputs[group[k]];
    std::byte* o = call.output;
    const size_t elem = DTypeSize(call.dtype);
    const Shape& s = call.shape;
    const int64_t count = NumElements(s);
    switch (call.kind) {
      case CollectiveKind::kPsum:
      case CollectiveKind::kPmean: {
        // As the chip does it: reduce-scatter, then all-gather. The
        // group's members on this rank (all of it in one process) split the
        // array into chunks; member j sums chunk j of every input into its
        // own output; after a barrier, it copies the other chunks from
        // their owners' outputs. Each element is summed in group order, so
        // every device gets the same bits as a serial sum however the array
        // is chunked; host work is 2S per device, not (n+1)S.
        const int64_t divisor = call.kind == CollectiveKind::kPmean ? n : 1;
        std::vector<int> owners;  // this rank's members of the group
        for (int d : group)
          if (mesh_.is_local(d)) owners.push_back(d);
        const int m = static_cast<int>(owners.size());
        const int j = static_cast<int>(std::find(owners.begin(), owners.end(), device_) - owners.begin());
        auto chunk_begin = [&](int k) { return count * k / m; };
        Reduce(call.dtype, in, 1, chunk_begin(j + 1) - chunk_begin(j), count, chunk_begin(j),
               o + chunk_begin(j) * elem, divisor);
        hub_->Sync(device_, seq);
        synced = true;
        for (int k = 0; k < m; ++k) {
          if (k == j) continue;
          const std::byte* owner = data.outputs[owners[k]];
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
