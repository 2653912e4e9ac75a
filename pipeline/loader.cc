#include "pipeline/loader.h"

#include <map>

namespace tpumesh::pipeline {
namespace {

StatusOr<models::ParamMap> ReadParams(const ModelFile& file, const std::string& component,
                                      const std::vector<models::ParamSpec>& manifest) {
  std::map<std::string, mesh::Array> params;
  for (const models::ParamSpec& p : manifest) {
    TPUMESH_ASSIGN_OR_RETURN(mesh::Array a, file.ReadTensor(component, p.name, mesh::DType::kF32));
    if (a.shape() != p.shape)
      return InvalidArgumentError(file.path() + ": tensor " + component + "/" + p.name + " has shape " +
                                  mesh::ShapeToString(a.shape()) + " but " + component +
                                  "/config.json needs " + mesh::ShapeToString(p.shape));
    params.emplace(p.name, std::move(a));
  }
  return models::ParamMap(std::move(params));
}

StatusOr<std::string> Config(const ModelFile& file, const std::string& component) {
  auto text = file.ReadText(component + "/config.json");
  if (!text.ok())
    return Status(text.status().code(), file.path() + ": the model has no " + component +
                                            " (no " + component + "/config.json)");
  return *text;
}

}  // namespace

StatusOr<ClipTokenizer> LoadTokenizer(const ModelFile& file) {
  if (!file.Has("tokenizer/vocab.json") || !file.Has("tokenizer/merges.txt"))
    return NotFoundError(file.path() + ": the model has no tokenizer (tokenizer/vocab.json and merges.txt); "
                         "re-create it with `tpumesh init --tokenizer DIR` or `tpumesh convert`");
  TPUMESH_ASSIGN_OR_RETURN(std::string vocab, file.ReadText("tokenizer/vocab.json"));
  TPUMESH_ASSIGN_OR_RETURN(std::string merges, file.ReadText("tokenizer/merges.txt"));
  std::string special;
  if (file.Has("tokenizer/special_tokens_map.json")) {
    TPUMESH_ASSIGN_OR_RETURN(special, file.ReadText("tokenizer/special_tokens_map.json"));
  }
  return ClipTokenizer::FromStrings(vocab, merges, special, file.path() + ": tokenizer");
}

StatusOr<models::ClipTextModel> LoadTextEncoder(const ModelFile& file) {
  TPUMESH_ASSIGN_OR_RETURN(std::string text, Config(file, "text_encoder"));
  TPUMESH_ASSIGN_OR_RETURN(auto cfg, models::ParseClipTextConfig(text, file.path() + ": text_encoder/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto params, ReadParams(file, "text_encoder", models::ClipTextParams(cfg)));
  return models::ClipTextModel::Create(cfg, std::move(params));
}

StatusOr<models::UNetModel> LoadUNet(const ModelFile& file) {
  TPUMESH_ASSIGN_OR_RETURN(std::string text, Config(file, "unet"));
  TPUMESH_ASSIGN_OR_RETURN(auto cfg, models::ParseUNetConfig(text, file.path() + ": unet/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto params, ReadParams(file, "unet", models::UNetParams(cfg)));
  return models::UNetModel::Create(cfg, std::move(params));
}

StatusOr<models::VaeModel> LoadVae(const ModelFile& file) {
  TPUMESH_ASSIGN_OR_RETURN(std::string text, Config(file, "vae"));
  TPUMESH_ASSIGN_OR_RETURN(auto cfg, models::ParseVaeConfig(text, file.path() + ": vae/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto params, ReadParams(file, "vae", models::VaeParams(cfg)));
  return models::VaeModel::Create(cfg, std::move(params));
}

}  // namespace tpumesh::pipeline
