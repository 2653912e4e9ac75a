#include "models/parallel.h"

#include <algorithm>
#include <chrono>

#include "mesh/interconnect.h"

namespace tpumesh::models {

StatusOr<ModelAxis> ModelAxis::ForDevice(mesh::DeviceContext& dctx, const std::string& axis) {
  TPUMESH_ASSIGN_OR_RETURN(ModelAxis a, Priced(dctx.mesh(), dctx.device_id(), axis));
  a.dctx_ = &dctx;
  return a;
}

StatusOr<ModelAxis> ModelAxis::Priced(const mesh::Mesh& mesh, int device, const std::string& axis) {
  ModelAxis a;
  a.chip_ = &mesh.chip();
  a.topology_ = &mesh.topology();
  a.axis_ = axis;
  const std::string names[] = {axis};
  TPUMESH_ASSIGN_OR_RETURN(a.group_, mesh.Group(device, names));
  a.rank_ = static_cast<int>(std::find(a.group_.begin(), a.group_.end(), device) - a.group_.begin());
  return a;
}

StatusOr<Array> ModelAxis::Run(const Ctx& ctx, mesh::CollectiveKind kind, const Array& x, int dim,
                               const std::string& layer) const {
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<Array> out = InternalError("not run");
  mesh::Shape shape = x.shape();
  if (kind == mesh::CollectiveKind::kAllGather) shape[dim] *= size();
  if (ctx.dry_run) {
    out = ctx.Alloc(shape, mesh::CollectiveName(kind));
  } else if (dctx_ == nullptr) {
    return FailedPreconditionError("model axis of a dry run used to compute " + layer);
  } else if (kind == mesh::CollectiveKind::kPsum) {
    out = dctx_->Psum(x, {axis_});
  } else {
    out = dctx_->AllGather(x, {axis_}, dim, /*tiled=*/true);
  }
  if (!out.ok()) return out.status().WithContext(std::string(ctx.scope) + " " + layer);
  if (ctx.ops != nullptr) {
    mesh::OpRecord r;
    r.name = std::string(mesh::CollectiveName(kind));
    r.type = "collective";
    r.module = std::string(ctx.scope) + "/" + layer;
    r.shape = r.module + " x" + mesh::ShapeToString(x.shape());
    r.precision = ctx.precision == Precision::kHighest ? kernels::Precision::kHighest : kernels::Precision::kDefault;
    const int64_t elem = ctx.precision == Precision::kHighest ? 4 : 2;
    const mesh::CollectiveCost cost =
        mesh::ModelCollective(*chip_, *topology_, kind, group_, x.num_elements() * elem);
    r.ici_seconds = cost.seconds;
    r.ici_bytes = cost.bytes_sent_per_device;
    if (!ctx.dry_run)
      r.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ctx.ops->push_back(std::move(r));
  }
  return out;
}

StatusOr<Array> ModelAxis::Psum(const Ctx& ctx, const Array& x, const std::string& layer) const {
  if (size() == 1) return x;
  return Run(ctx, mesh::CollectiveKind::kPsum, x, 0, layer);
}

StatusOr<Array> ModelAxis::AllGather(const Ctx& ctx, const Array& x, int dim, const std::string& layer) const {
  if (size() == 1) return x;
  return Run(ctx, mesh::CollectiveKind::kAllGather, x, dim, layer);
}

StatusOr<ModelAxis::GatheredWeight> ModelAxis::GatherWeight(const Ctx& ctx, const Array& w,
                                                             const std::string& module) const {
  GatheredWeight g;
  if (size() == 1) return g;
  if (!ctx.dry_run)
    return FailedPreconditionError(module + ": the " + axis_ + " axis is priced by simulate only (a real run shards "
                                   "over data and model)");
  if (ctx.device != nullptr) {
    TPUMESH_ASSIGN_OR_RETURN(g.held, Array::Allocate(*ctx.device, w.dtype(), w.shape(), "fsdp all_gather", true));
  }
  if (ctx.ops == nullptr) return g;
  mesh::OpRecord r;
  r.name = std::string(mesh::CollectiveName(mesh::CollectiveKind::kAllGather));
  r.type = "collective";
  r.module = module;
  r.shape = module + " w" + mesh::ShapeToString(w.shape()) + " (fsdp)";
  r.precision = ctx.precision == Precision::kHighest ? kernels::Precision::kHighest : kernels::Precision::kDefault;
  const int64_t elem = ctx.precision == Precision::kHighest ? 4 : 2;
  const int64_t shard = (w.num_elements() + size() - 1) / size();
  const mesh::CollectiveCost cost =
      mesh::ModelCollective(*chip_, *topology_, mesh::CollectiveKind::kAllGather, group_, shard * elem);
  r.ici_seconds = cost.seconds;
  r.ici_bytes = cost.bytes_sent_per_device;
  r.async_id = static_cast<int64_t>(ctx.ops->size()) + 1;
  r.prefetch = true;
  g.async_id = r.async_id;
  ctx.ops->push_back(std::move(r));
  return g;
}

StatusOr<const ParamMap*> RankParams(const Ctx& ctx, const std::vector<ParamMap>& ranks, const char* component) {
  const int m = static_cast<int>(ranks.size());
  const int axis = ctx.model != nullptr ? ctx.model->size() : 1;
  if (axis != m)
    return FailedPreconditionError(std::string(component) + ": parameters split " + std::to_string(m) +
                                   " ways run on a model axis of " + std::to_string(axis));
  return &ranks[ctx.model != nullptr ? ctx.model->rank() : 0];
}

int64_t LocalUnits(const ParamMap& P, const std::string& param, int64_t whole) {
  const auto* s = P.split(param);
  return s == nullptr ? whole : s->second - s->first;
}

namespace {

// The psum of a partial result, then the bias along `dim`.
StatusOr<Array> ReduceAndBias(const Ctx& ctx, const ParamMap& P, const std::string& layer, const Array& partial,
                              int dim) {
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.model->Psum(ctx, partial, layer));
  if (auto it = P.all().find(layer + ".bias"); it != P.all().end())
    TPUMESH_RETURN_IF_ERROR(AddBiasInPlace(ctx, y, it->second, dim));
  return y;
}

const Array* Bias(const ParamMap& P, const std::string& layer) {
  auto it = P.all().find(layer + ".bias");
  return it == P.all().end() ? nullptr : &it->second;
}

}  // namespace

StatusOr<Array> RowLinear(const Ctx& ctx, const ParamMap& P, const std::string& layer, const Array& x) {
  const std::string w = layer + ".weight";
  if (P.split(w) == nullptr) return Linear(ctx, x, P[w], Bias(P, layer));
  TPUMESH_ASSIGN_OR_RETURN(Array partial, Linear(ctx, x, P[w], nullptr));
  return ReduceAndBias(ctx, P, layer, partial, partial.rank() - 1);
}

StatusOr<Array> RowConv2d(const Ctx& ctx, const ParamMap& P, const std::string& layer, const Array& x, int stride,
                          int pad) {
  const std::string w = layer + ".weight";
  if (P.split(w) == nullptr) return Conv2d(ctx, x, P[w], Bias(P, layer), stride, pad);
  TPUMESH_ASSIGN_OR_RETURN(Array partial, Conv2d(ctx, x, P[w], nullptr, stride, pad));
  return ReduceAndBias(ctx, P, layer, partial, 1);
}

StatusOr<Array> GatheredLinear(const Ctx& ctx, const ParamMap& P, const std::string& layer, const Array& x) {
  TPUMESH_ASSIGN_OR_RETURN(Array y, Linear(ctx, x, P[layer + ".weight"], Bias(P, layer)));
  if (P.split(layer + ".weight") == nullptr) return y;
  return ctx.model->AllGather(ctx, y, y.rank() - 1, layer);
}

StatusOr<Array> GatheredConv2d(const Ctx& ctx, const ParamMap& P, const std::string& layer, const Array& x,
                               int stride, int pad_top, int pad_left, int pad_bottom, int pad_right) {
  TPUMESH_ASSIGN_OR_RETURN(
      Array y, Conv2d(ctx, x, P[layer + ".weight"], Bias(P, layer), stride, pad_top, pad_left, pad_bottom, pad_right));
  if (P.split(layer + ".weight") == nullptr) return y;
  return ctx.model->AllGather(ctx, y, 1, layer);
}

}  // namespace tpumesh::models
