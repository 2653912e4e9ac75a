#include "models/params.h"

namespace tpumesh::models {

bool MayHoldBf16(const std::string& name, const mesh::Shape& shape) {
  return (shape.size() == 2 || shape.size() == 4) && name.find("embedding.weight") == std::string::npos;
}

Status ParamMap::Check(const std::vector<ParamSpec>& manifest, std::string_view component) const {
  for (const ParamSpec& p : manifest) {
    auto it = params_.find(p.name);
    if (it == params_.end())
      return NotFoundError(std::string(component) + ": missing tensor " + p.name + " " +
                           mesh::ShapeToString(p.shape));
    if (it->second.shape() != p.shape)
      return InvalidArgumentError(std::string(component) + ": tensor " + p.name + " has shape " +
                                  mesh::ShapeToString(it->second.shape()) + " but the config needs " +
                                  mesh::ShapeToString(p.shape));
    const mesh::DType d = it->second.dtype();
    if (d != mesh::DType::kF32 && !(d == mesh::DType::kBF16 && MayHoldBf16(p.name, p.shape)))
      return InvalidArgumentError(std::string(component) + ": tensor " + p.name + " is " +
                                  it->second.ToString() + ", expected f32");
  }
  return OkStatus();
}

Status ParamMap::PackMatmulWeights(const Ctx& ctx, const std::function<bool(const std::string&)>& include) const {
  if (ctx.dry_run || ctx.packs == nullptr) return OkStatus();
  std::vector<const mesh::Array*> weights;
  for (const auto& [name, a] : params_)
    if ((a.rank() == 2 || a.rank() == 4) && (!include || include(name))) weights.push_back(&a);
  return ctx.packs->PackAll(weights, ctx.precision, ctx.threads);
}

int64_t ParamMap::bytes() const {
  int64_t b = 0;
  for (const auto& [name, a] : params_) b += a.size_bytes();
  return b;
}

}  // namespace tpumesh::models
