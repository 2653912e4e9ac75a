#include "pipeline/loader.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>

namespace tpumesh::pipeline {
namespace {

// A weight with NaN or Inf turns every image black: refused at load.
// Chunks, so that the scan vectorises (about 1 GB/s): the exact index only
// in the chunk that has a bad value.
template <typename T, typename Bad>
int64_t FirstNonFinite(const T* v, int64_t n, Bad bad) {
  constexpr int64_t kChunk = 4096;
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t e = std::min(n, c + kChunk);
    int any = 0;
    for (int64_t i = c; i < e; ++i) any |= bad(v[i]);
    if (any)
      for (int64_t i = c; i < e; ++i)
        if (bad(v[i])) return i;
  }
  return -1;
}

StatusOr<models::ParamMap> ReadParams(const ModelFile& file, const std::string& component,
                                      const std::vector<models::ParamSpec>& manifest, const LoraSet* loras) {
  // What the config declares, against what the file can hold (2 bytes a
  // parameter at the least, bf16, compressed at most kMaxCompression times),
  // before any tensor is read: a config of a huge model in a small file is
  // refused here, not after gigabytes. Summed as doubles: at the configs'
  // bounds the count passes 2^63.
  double declared = 0;
  for (const models::ParamSpec& p : manifest) declared += static_cast<double>(mesh::NumElements(p.shape));
  if (2 * declared > static_cast<double>(kMaxCompression) * static_cast<double>(file.size_bytes())) {
    char count[32];
    std::snprintf(count, sizeof count, "%.0f", declared);
    return InvalidArgumentError(file.path() + ": " + component + "/config.json declares " + count +
                                " parameters, more than the file's " + std::to_string(file.size_bytes()) +
                                " bytes can hold (2 bytes each, compressed " + std::to_string(kMaxCompression) +
                                " times at most)");
  }
  std::map<std::string, mesh::Array> params;
  for (const models::ParamSpec& p : manifest) {
    // Stored bf16: kept bf16 where the models allow it (no f32 copy).
    TPUMESH_ASSIGN_OR_RETURN(TensorInfo info, file.Info(component, p.name));
    const mesh::DType as = info.stored == mesh::DType::kBF16 && models::MayHoldBf16(p.name, p.shape)
                               ? mesh::DType::kBF16
                               : mesh::DType::kF32;
    TPUMESH_ASSIGN_OR_RETURN(mesh::Array a, file.ReadTensor(component, p.name, as));
    TPUMESH_RETURN_IF_ERROR(CheckFiniteTensor(file.path() + ": tensor " + component + "/" + p.name, a));
    if (a.shape() != p.shape)
      return InvalidArgumentError(file.path() + ": tensor " + component + "/" + p.name + " has shape " +
                                  mesh::ShapeToString(a.shape()) + " but " + component +
                                  "/config.json needs " + mesh::ShapeToString(p.shape));
    params.emplace(p.name, std::move(a));
  }
  if (loras != nullptr) TPUMESH_RETURN_IF_ERROR(loras->Fuse(component, &params));
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

Status CheckFiniteTensor(const std::string& where, const mesh::Array& a) {
  const int64_t n = a.num_elements();
  const int64_t bad =
      a.dtype() == mesh::DType::kBF16
          ? FirstNonFinite(reinterpret_cast<const uint16_t*>(a.raw()), n,
                           [](uint16_t x) { return static_cast<int>((x & 0x7f80) == 0x7f80); })
          : FirstNonFinite(reinterpret_cast<const uint32_t*>(a.raw()), n,
                           [](uint32_t x) { return static_cast<int>((x & 0x7f800000u) == 0x7f800000u); });
  if (bad >= 0)
    return InvalidArgumentError(where + " holds NaN or Inf at index " + std::to_string(bad) +
                                " (a corrupt or diverged checkpoint)");
  return OkStatus();
}

StatusOr<ClipTokenizer> LoadTokenizer(const ModelFile& file, const std::string& component) {
  const std::string& c = component;
  if (!file.Has(c + "/vocab.json") || !file.Has(c + "/merges.txt"))
    return NotFoundError(file.path() + ": the model has no " + c + " (" + c +
                         "/vocab.json and merges.txt); re-create it with `tpumesh init --tokenizer DIR` or "
                         "`tpumesh convert`");
  TPUMESH_ASSIGN_OR_RETURN(std::string vocab, file.ReadText(c + "/vocab.json"));
  TPUMESH_ASSIGN_OR_RETURN(std::string merges, file.ReadText(c + "/merges.txt"));
  std::string special, config;
  if (file.Has(c + "/special_tokens_map.json")) {
    TPUMESH_ASSIGN_OR_RETURN(special, file.ReadText(c + "/special_tokens_map.json"));
  }
  if (file.Has(c + "/tokenizer_config.json")) {
    TPUMESH_ASSIGN_OR_RETURN(config, file.ReadText(c + "/tokenizer_config.json"));
  }
  ClipTokenizerTexts texts{vocab, merges, special, config};
  return ClipTokenizer::FromStrings(texts, file.path() + ": " + c);
}

StatusOr<HostMemoryEstimate> EstimateHostMemory(const ModelFile& file) {
  HostMemoryEstimate e;
  for (const char* component : {"text_encoder", "text_encoder_2", "unet", "vae"}) {
    if (!file.Has(std::string(component) + "/config.json")) continue;
    TPUMESH_ASSIGN_OR_RETURN(std::vector<std::string> names, file.TensorNames(component));
    for (const std::string& name : names) {
      TPUMESH_ASSIGN_OR_RETURN(TensorInfo info, file.Info(component, name));
      const int64_t n = mesh::NumElements(info.shape);
      if (info.stored == mesh::DType::kBF16 && models::MayHoldBf16(name, info.shape)) e.bf16_bytes += 2 * n;
      else e.f32_bytes += 4 * n;
      if (models::OnlyPacked(name, info.shape)) e.packed_bytes += 2 * n;
    }
  }
  return e;
}

StatusOr<ModelConfigs> ReadModelConfigs(const ModelFile& file) {
  ModelConfigs c;
  c.origin = file.path();
  if (file.Has("model_index.json")) {
    TPUMESH_ASSIGN_OR_RETURN(c.model_index, file.ReadText("model_index.json"));
  }
  TPUMESH_ASSIGN_OR_RETURN(c.text_encoder, Config(file, "text_encoder"));
  if (file.Has("text_encoder_2/config.json")) {
    TPUMESH_ASSIGN_OR_RETURN(c.text_encoder_2, Config(file, "text_encoder_2"));
  }
  TPUMESH_ASSIGN_OR_RETURN(c.unet, Config(file, "unet"));
  TPUMESH_ASSIGN_OR_RETURN(c.vae, Config(file, "vae"));
  if (!file.Has("scheduler/scheduler_config.json"))
    return NotFoundError(file.path() + ": the model has no scheduler (no scheduler/scheduler_config.json)");
  TPUMESH_ASSIGN_OR_RETURN(c.scheduler, file.ReadText("scheduler/scheduler_config.json"));
  return c;
}

namespace {

// A component read whole, then split into the model ranks' shares (the
// whole copy is released on return).
StatusOr<std::vector<models::ParamMap>> ReadSharded(const ModelFile& file, const std::string& component,
                                                   const std::vector<models::ParamSpec>& manifest, int ranks,
                                                   const LoraSet* loras) {
  TPUMESH_ASSIGN_OR_RETURN(models::ParamMap full, ReadParams(file, component, manifest, loras));
  TPUMESH_RETURN_IF_ERROR(full.Check(manifest, component));
  return models::ShardParams(full, manifest, ranks);
}

}  // namespace

StatusOr<std::unique_ptr<TextToImage>> LoadTextToImage(const ModelFile& file, int model_ranks,
                                                       const LoraSet* loras) {
  TPUMESH_ASSIGN_OR_RETURN(ModelConfigs configs, ReadModelConfigs(file));
  TPUMESH_ASSIGN_OR_RETURN(ClipTokenizer tok, LoadTokenizer(file, "tokenizer"));
  std::unique_ptr<ClipTokenizer> tok2;
  if (!configs.text_encoder_2.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(ClipTokenizer t, LoadTokenizer(file, "tokenizer_2"));
    tok2 = std::make_unique<ClipTokenizer>(std::move(t));
  }
  auto read = [&](const std::string& component, const std::vector<models::ParamSpec>& manifest,
                  int ranks) { return ReadSharded(file, component, manifest, ranks, loras); };
  return BuildTextToImage(configs, read, std::make_unique<ClipTokenizer>(std::move(tok)), std::move(tok2),
                          model_ranks);
}

StatusOr<models::ClipTextModel> LoadTextEncoder(const ModelFile& file, int model_ranks, const LoraSet* loras) {
  TPUMESH_ASSIGN_OR_RETURN(std::string text, Config(file, "text_encoder"));
  TPUMESH_ASSIGN_OR_RETURN(auto cfg, models::ParseClipTextConfig(text, file.path() + ": text_encoder/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto ranks, ReadSharded(file, "text_encoder", models::ClipTextParams(cfg), model_ranks, loras));
  return models::ClipTextModel::Create(cfg, std::move(ranks));
}

StatusOr<models::UNetModel> LoadUNet(const ModelFile& file, int model_ranks, const LoraSet* loras) {
  TPUMESH_ASSIGN_OR_RETURN(std::string text, Config(file, "unet"));
  TPUMESH_ASSIGN_OR_RETURN(auto cfg, models::ParseUNetConfig(text, file.path() + ": unet/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto ranks, ReadSharded(file, "unet", models::UNetParams(cfg), model_ranks, loras));
  return models::UNetModel::Create(cfg, std::move(ranks));
}

StatusOr<models::VaeModel> LoadVae(const ModelFile& file, int model_ranks) {
  TPUMESH_ASSIGN_OR_RETURN(std::string text, Config(file, "vae"));
  TPUMESH_ASSIGN_OR_RETURN(auto cfg, models::ParseVaeConfig(text, file.path() + ": vae/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto ranks, ReadSharded(file, "vae", models::VaeParams(cfg), model_ranks, nullptr));
  return models::VaeModel::Create(cfg, std::move(ranks));
}

}  // namespace tpumesh::pipeline
