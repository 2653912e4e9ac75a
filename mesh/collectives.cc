#include "mesh/collectives.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <set>

#include "mesh/rank_split.h"

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

// Sums len elements of every input (each pointing at its run), in input
// order, into out; f32 accumulation for f32/bf16, wrap-around for integers.
void ReduceRun(DType t, std::span<const std::byte* const> in, int64_t len, std::byte* out, int64_t divisor,
               float* scratch) {
  const size_t n = in.size();
  switch (t) {
    case DType::kF32:
    case DType::kBF16: {
      float* acc = t == DType::kF32 ? reinterpret_cast<float*>(out) : scratch;
      for (size_t k = 0; k < n; ++k) {
        if (t == DType::kF32) {
          const float* x = reinterpret_cast<const float*>(in[k]);
          if (k == 0) {
            std::memcpy(acc, x, len * sizeof(float));
          } else {
#pragma omp simd
            for (int64_t i = 0; i < len; ++i) acc[i] += x[i];
          }
        } else {
          const kernels::bf16* x = reinterpret_cast<const kernels::bf16*>(in[k]);
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
      std::memcpy(o, in[0], len * sizeof(uint32_t));
      for (size_t k = 1; k < n; ++k) {
        const uint32_t* x = reinterpret_cast<const uint32_t*>(in[k]);
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

// One input of a reduction: its first element and the distance in elements
// between its rows (its own layout: a device's whole input, or the part of
// it another rank sent, rank_split.h).
struct ReduceInput {
  const std::byte* data;
  int64_t row_stride;
};

// The one reduction of psum, pmean and psum_scatter, in one process and
// across ranks: out[r*inner + i] = (sum_k in[k][r*row_stride_k + i]) /
// divisor, summed in input (group) order. Runs of kBlock elements keep the
// accumulator in L1 while every input streams past it once (on 8 devices x
// 16 MB this halved the psum time against summing whole arrays input by
// input).
void Reduce(DType t, std::span<const ReduceInput> in, int64_t outer, int64_t inner, std::byte* out,
            int64_t divisor) {
  constexpr int64_t kBlock = 2048;
  const int64_t elem = static_cast<int64_t>(DTypeSize(t));
  std::vector<float> scratch(t == DType::kBF16 ? kBlock : 0);
  std::vector<const std::byte*> run(in.size());
  for (int64_t r = 0; r < outer; ++r) {
    for (int64_t b = 0; b < inner; b += kBlock) {
      const int64_t len = std::min(kBlock, inner - b);
      for (size_t k = 0; k < in.size(); ++k) run[k] = in[k].data + (r * in[k].row_stride + b) * elem;
      ReduceRun(t, run, len, out + (r * inner + b) * elem, divisor, scratch.data());
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
  // Another rank's input is the part of it sent here (rank_split.h).
  const RankSplit split(mesh_, call, group);
  const int my_rank = mesh_.cluster().rank();
  auto is_here = [&](int k) { return split.rank_of_member(k) == my_rank; };
  bool synced = false;
  StatusOr<Array> result = [&]() -> StatusOr<Array> {
   try {
    std::vector<const std::byte*> in(n);
    for (int k = 0; k < n; ++k) in[k] = data.inputs[group[k]];
    std::byte* o = call.output;
    const int64_t elem = static_cast<int64_t>(DTypeSize(call.dtype));
    const Shape& s = call.shape;
    const int64_t count = NumElements(s);
    switch (call.kind) {
      case CollectiveKind::kPsum:
      case CollectiveKind::kPmean: {
        // As the chip does it: reduce-scatter, then all-gather. Each rank
        // of the group owns a range of the array (all of it in one
        // process); the group's members on this rank split that range into
        // pieces; member j sums piece j of every input into its own output;
        // then it copies the other pieces from their owners' outputs, and
        // the other ranks' ranges from the sums they sent (Reduced). Each
        // element is summed in group order, so every device gets the same
        // bits as a serial sum however the array is split; host work is 2S
        // per device, not (n+1)S, and each rank sums only its range.
        const int64_t divisor = call.kind == CollectiveKind::kPmean ? n : 1;
        const std::vector<int> here = split.MembersOn(my_rank);
        const int m = static_cast<int>(here.size());
        const int j = split.PositionOnRank(me);
        const auto [begin, end] = split.spans_ranks() ? split.OwnedElements(my_rank)
                                                      : std::pair<int64_t, int64_t>(0, count);
        auto piece = [&, begin = begin, end = end](int i) { return begin + (end - begin) * i / m; };
        const int64_t b = piece(j), e = piece(j + 1);
        std::vector<ReduceInput> inputs(n);
        for (int k = 0; k < n; ++k)
          inputs[k] = {is_here(k) ? in[k] + b * elem : in[k] + (b - begin) * elem, 0};
        if (e > b) Reduce(call.dtype, inputs, 1, e - b, o + b * elem, divisor);
        std::vector<const std::byte*> sums;
        synced = true;
        if (data.two_phase) {
          TPUMESH_RETURN_IF_ERROR(hub_->Reduced(device_, seq, &sums));
        } else {
          hub_->Sync(device_, seq);
        }
        for (int i = 0; i < m; ++i) {
          if (i == j || piece(i + 1) == piece(i)) continue;
          const std::byte* owner = data.outputs[group[here[i]]];
          std::memcpy(o + piece(i) * elem, owner + piece(i) * elem, (piece(i + 1) - piece(i)) * elem);
        }
        if (!split.spans_ranks()) break;
        for (int r : split.ranks()) {
          const auto [rb, re] = split.OwnedElements(r);
          if (r == my_rank || re == rb) continue;
          if (sums[r] == nullptr) return InternalError("no sums from rank " + std::to_string(r));
          std::memcpy(o + rb * elem, sums[r], (re - rb) * elem);
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
        // Another rank sent only its blocks for this rank's members,
        // [outer, q_n, chunk], this device's at its position q.
        const int64_t outer = Prod(s, 0, call.axis);
        const int64_t chunk = Prod(s, call.axis, s.size()) / n;
        const int64_t q = split.PositionOnRank(me);
        const int64_t q_n = static_cast<int64_t>(split.MembersOn(my_rank).size());
        std::vector<ReduceInput> inputs(n);
        for (int k = 0; k < n; ++k)
          inputs[k] = is_here(k) ? ReduceInput{in[k] + me * chunk * elem, n * chunk}
                                 : ReduceInput{in[k] + q * chunk * elem, q_n * chunk};
        Reduce(call.dtype, inputs, outer, chunk, o, 1);
        break;
      }
      case CollectiveKind::kPpermute:
        for (const auto& [src, dst] : call.perm)
          if (dst == me) std::memcpy(o, in[src], count * elem);
        break;
      case CollectiveKind::kAllToAll: {
        // This device's chunk of source j's split axis is a box of the
        // source (extent c on the split axis); another rank sent only the
        // boxes of this rank's members, packed, this device's at its
        // position q.
        const int a = call.axis, b = call.concat_axis;
        const auto xs = Strides(s);
        const auto ys = Strides(out_shape);
        const Shape box = split.AllToAllBox();
        const int64_t c = box[a];
        const auto box_strides = Strides(box);
        const int64_t q = split.PositionOnRank(me);
        for (int j = 0; j < n; ++j) {
          const std::byte* src = is_here(j) ? in[j] + me * c * xs[a] * elem : in[j] + q * NumElements(box) * elem;
          const std::vector<int64_t>& src_strides = is_here(j) ? xs : box_strides;
          if (call.tiled) {
            // Lands at block j of the concat axis.
            const int64_t dst_block = (a == b) ? c : s[b];
            CopyBox(src, src_strides, o + j * dst_block * ys[b] * elem, ys, box, elem);
          } else {
            // Lands at index j of the new concat axis; the remaining dims
            // keep their order.
            Shape sub;
            std::vector<int64_t> src_st, dst_st;
            for (int d = 0; d < static_cast<int>(s.size()); ++d)
              if (d != a) { sub.push_back(s[d]); src_st.push_back(src_strides[d]); }
            for (int d = 0; d < static_cast<int>(out_shape.size()); ++d)
              if (d != b) dst_st.push_back(ys[d]);
            CopyBox(src, src_st, o + j * ys[b] * elem, dst_st, sub, elem);
          }
        }
        break;
      }
    }
    return out;
   } catch (const std::exception& e) {
    // Never leave the others parked in Sync or Depart.
    if (!synced && (call.kind == CollectiveKind::kPsum || call.kind == CollectiveKind::kPmean)) {
      if (data.two_phase) {
        std::vector<const std::byte*> ignored;
        (void)hub_->Reduced(device_, seq, &ignored);
      } else {
        hub_->Sync(device_, seq);
      }
    }
    return InternalError(std::string(CollectiveName(call.kind)) + " failed: " + e.what());
   }
  }();
  hub_->Depart(device_, seq);
  return result;
}

}  // namespace tpumesh::mesh
