#include "models/params.h"

namespace tpumesh::models {

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
    if (it->second.dtype() != mesh::DType::kF32)
      return InvalidArgumentError(std::string(component) + ": tensor " + p.name + " is " +
                                  it->second.ToString() + ", expected f32");
  }
  return OkStatus();
}

int64_t ParamMap::bytes() const {
  int64_t b = 0;
  for (const auto& [name, a] : params_) b += a.size_bytes();
  return b;
}

}  // namespace tpumesh::models
