// A component's parameters by checkpoint name, checked against the manifest
// of its config (configs.h) before any model is built from them.
#ifndef TPUMESH_MODELS_PARAMS_H_
#define TPUMESH_MODELS_PARAMS_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "mesh/array.h"
#include "models/configs.h"
#include "models/nn.h"

namespace tpumesh::models {

// Name -> f32 array. Arrays may be replicated views (read-only, shared).
class ParamMap {
 public:
  ParamMap() = default;
  explicit ParamMap(std::map<std::string, mesh::Array> params) : params_(std::move(params)) {}

  // NotFound / InvalidArgument naming `component` and the first missing or
  // mis-shaped tensor (expected vs got), before any compute.
  Status Check(const std::vector<ParamSpec>& manifest, std::string_view component) const;
  // The parameter; Check() guarantees presence for manifest names.
  const mesh::Array& operator[](const std::string& name) const { return params_.at(name); }
  const std::map<std::string, mesh::Array>& all() const { return params_; }
  int64_t bytes() const;
  // The packed forms of these weights (shared by copies of this map).
  WeightPacks* packs() const { return packs_.get(); }

 private:
  std::map<std::string, mesh::Array> params_;
  std::shared_ptr<WeightPacks> packs_ = std::make_shared<WeightPacks>();
};

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_PARAMS_H_
