// The collectives (all_reduce, all_gather, reduce_scatter, collective_permute,
// all_to_all) over the device's pmap (mesh/collectives.h).
#include "hlo/attrs.h"
#include "hlo/interpreter_impl.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace tpumesh::hlo {

StatusOr<std::vector<std::vector<int64_t>>> Interpreter::Groups(const Op& op) const {
  TPUMESH_ASSIGN_OR_RETURN(CollectiveAttrs c, TypedAttrs<CollectiveAttrs>(op));
  if (c.groups.empty()) {
    std::vector<int64_t> all(static_cast<size_t>(site_.num_devices));
    std::iota(all.begin(), all.end(), 0);
    return std::vector<std::vector<int64_t>>{all};
  }
  for (const auto& g : c.groups)
    for (int64_t d : g)
      if (d < 0 || d >= site_.num_devices)
        return InvalidArgumentError("replica group names device " + std::to_string(d) + " of a mesh of " +
                                    std::to_string(site_.num_devices));
  return std::move(c.groups);
}

Status Interpreter::CheckPairs(const Op& op) const {
  TPUMESH_ASSIGN_OR_RETURN(CollectiveAttrs permute, TypedAttrs<CollectiveAttrs>(op));
  for (int64_t d : permute.pairs)
    if (d < 0 || d >= site_.num_devices)
      return InvalidArgumentError("source_target_pairs names device " + std::to_string(d) + " of a mesh of " +
                                  std::to_string(site_.num_devices));
  return OkStatus();
}

StatusOr<std::vector<int64_t>> Interpreter::MyGroup(const Op& op) const {
  TPUMESH_ASSIGN_OR_RETURN(auto groups, Groups(op));
  for (auto& g : groups)
    if (std::find(g.begin(), g.end(), site_.device_id) != g.end()) return g;
  return InvalidArgumentError("device " + std::to_string(site_.device_id) + " is in no replica group");
}

StatusOr<std::vector<const uint8_t*>> Interpreter::GatherAll(const Tensor& x, mesh::Array* keep) {
  if (!site_.collectives) return FailedPreconditionError("collectives need a mesh (run the module with tpumesh run)");
  std::vector<std::string> axes;
  for (const auto& a : site_.axes) axes.push_back(a.name);
  const int64_t bytes = x.type.size_bytes();
  TPUMESH_ASSIGN_OR_RETURN(mesh::Array view, x.data.View(mesh::DType::kU8, {std::max<int64_t>(bytes, 0)}));
  TPUMESH_ASSIGN_OR_RETURN(*keep, site_.collectives->AllGather(view, axes, 0, false));
  std::vector<const uint8_t*> out;
  for (int d = 0; d < site_.num_devices; ++d) out.push_back(static_cast<const uint8_t*>(keep->raw()) + d * bytes);
  return out;
}

Status Interpreter::Collective(Run run, const Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
  if (in.size() != 1 || out.size() != 1) return UnimplementedError("variadic collectives are not supported");
  const Tensor& x = *in[0];
  Tensor& y = out[0];
  const int w = ElementTypeBytes(x.type.element);
  mesh::Array keep;
  TPUMESH_ASSIGN_OR_RETURN(auto all, GatherAll(x, &keep));
  uint8_t* dst = static_cast<uint8_t*>(y.data.mutable_raw());
  const int me = site_.device_id;
  if (run == Run::kCollectivePermute) {
    TPUMESH_RETURN_IF_ERROR(CheckPairs(op));
    TPUMESH_ASSIGN_OR_RETURN(CollectiveAttrs permute, TypedAttrs<CollectiveAttrs>(op));
    const Dims& flat = permute.pairs;
    if (!(x.type == y.type)) return InvalidArgumentError("result type differs from the operand's");
    for (size_t i = 0; i < flat.size(); i += 2) {
      if (flat[i + 1] == me)
        std::memcpy(dst, all[static_cast<size_t>(flat[i])], static_cast<size_t>(x.type.size_bytes()));
    }
    return OkStatus();
  }
  TPUMESH_ASSIGN_OR_RETURN(CollectiveAttrs attrs, TypedAttrs<CollectiveAttrs>(op));
  TPUMESH_ASSIGN_OR_RETURN(std::vector<int64_t> group, MyGroup(op));
  const int64_t n = static_cast<int64_t>(group.size());
  const int64_t pos = std::find(group.begin(), group.end(), me) - group.begin();
  const Dims& d = x.type.dims;
  if (run == Run::kAllReduce || run == Run::kReduceScatter) {
    // stablehlo.cross-replica-sum has no body: its sum is an add
    const bool sum = op.regions.empty() && run == Run::kAllReduce;
    if (op.regions.size() != 1 && !sum) return InvalidArgumentError("needs a body");
    // the reduction of the group's values, in group order
    const int64_t cnt = x.num_elements();
    std::vector<uint8_t> acc(static_cast<size_t>(cnt * w)), nxt(acc.size());
    std::memcpy(acc.data(), all[static_cast<size_t>(group[0])], acc.size());
    const Op* simple = sum ? nullptr : SimpleBody(op.regions[0]);
    Type scalar = x.type;
    scalar.dims.clear();
    for (int64_t j = 1; j < n; ++j) {
      const uint8_t* v = all[static_cast<size_t>(group[static_cast<size_t>(j)])];
      if (sum) {
        TPUMESH_RETURN_IF_ERROR(AddElements(x.type.element, acc.data(), v, cnt, nxt.data()));
      } else if (simple) {
        ElementwiseCall c;
        c.op = simple;
        c.in_type = c.out_type = x.type.element;
        c.in[0] = acc.data();
        c.in[1] = v;
        TPUMESH_RETURN_IF_ERROR(EvalElementwise(c, 0, cnt, nxt.data()));
      } else {
        for (int64_t e = 0; e < cnt; ++e)
          TPUMESH_RETURN_IF_ERROR(ApplyBody(op.regions[0], nullptr,
                                            {acc.data() + e * w}, {v + e * w},
                                            {nxt.data() + e * w}, {scalar}));
      }
      std::swap(acc, nxt);
    }
    if (run == Run::kAllReduce) {
      if (!(x.type == y.type)) return InvalidArgumentError("result type differs from the operand's");
      std::memcpy(dst, acc.data(), acc.size());
      return OkStatus();
    }
    const int64_t sd = attrs.dim;  // scatter_dimension
    if (sd < 0 || sd >= static_cast<int64_t>(d.size()) || d[static_cast<size_t>(sd)] % n ||
        y.type.dims[static_cast<size_t>(sd)] * n != d[static_cast<size_t>(sd)])
      return InvalidArgumentError("scatter_dimension does not split evenly over the group");
    return CopyBlock(acc.data(), x.type, y, sd, pos, n);
  }
  if (run == Run::kAllGather) {
    const int64_t ad = attrs.dim;  // all_gather_dim
    if (ad < 0 || ad >= static_cast<int64_t>(d.size()) ||
        y.type.dims[static_cast<size_t>(ad)] != d[static_cast<size_t>(ad)] * n)
      return InvalidArgumentError("result does not match all_gather_dim over the group");
    int64_t outer = 1, inner = w;
    for (int64_t k = 0; k < ad; ++k) outer *= d[static_cast<size_t>(k)];
    for (size_t k = static_cast<size_t>(ad); k < d.size(); ++k) inner *= d[k];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(dst + (o * n + j) * inner, all[static_cast<size_t>(group[static_cast<size_t>(j)])] + o * inner,
                    static_cast<size_t>(inner));
    return OkStatus();
  }
  if (run == Run::kAllToAll) {
    const int64_t sd = attrs.dim, cd = attrs.concat_dim, sc = attrs.split_count;
    if (sc != n || sd < 0 || cd < 0 || sd >= static_cast<int64_t>(d.size()) || cd >= static_cast<int64_t>(d.size()) ||
        d[static_cast<size_t>(sd)] % n)
      return InvalidArgumentError("split_count, split_dimension or concat_dimension does not fit the group");
    // member j's block `pos` along sd, concatenated over j along cd
    Type block = x.type;
    block.dims[static_cast<size_t>(sd)] /= n;
    const int64_t bbytes = block.size_bytes();
    std::vector<uint8_t> blocks(static_cast<size_t>(bbytes * n));
    for (int64_t j = 0; j < n; ++j) {
      TPUMESH_ASSIGN_OR_RETURN(Tensor b, NewTensor(block, nullptr));
      TPUMESH_RETURN_IF_ERROR(
          CopyBlock(all[static_cast<size_t>(group[static_cast<size_t>(j)])],
                    x.type, b, sd, pos, n));
      std::memcpy(blocks.data() + j * bbytes, b.data.raw(), static_cast<size_t>(bbytes));
    }
    int64_t outer = 1, inner = w;
    for (int64_t k = 0; k < cd; ++k) outer *= block.dims[static_cast<size_t>(k)];
    for (size_t k = static_cast<size_t>(cd); k < block.dims.size(); ++k) inner *= block.dims[k];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(dst + (o * n + j) * inner, blocks.data() + j * bbytes + o * inner, static_cast<size_t>(inner));
    return OkStatus();
  }
  return UnimplementedError("collective not supported");
}

Status Interpreter::CopyBlock(const uint8_t* src, const Type& t, Tensor& y, int64_t dim, int64_t index, int64_t n) {
  const int w = ElementTypeBytes(t.element);
  int64_t outer = 1, inner = w;
  for (int64_t k = 0; k < dim; ++k) outer *= t.dims[static_cast<size_t>(k)];
  for (size_t k = static_cast<size_t>(dim) + 1; k < t.dims.size(); ++k) inner *= t.dims[k];
  const int64_t full = t.dims[static_cast<size_t>(dim)], part = full / n;
  uint8_t* dst = static_cast<uint8_t*>(y.data.mutable_raw());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * part * inner, src + (o * full + index * part) * inner, static_cast<size_t>(part * inner));
  return OkStatus();
}

}  // namespace tpumesh::hlo
