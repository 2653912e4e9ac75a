#include "pipeline/loader.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

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

// A component's parameters, one map per model rank (models::ShardBuilder):
// each tensor read whole (bf16 where stored so and MayHoldBf16, else f32),
// checked (shape, finite) and cut into the local model ranks' shares before
// the next is read, so a process never holds more than its shares and one
// whole tensor. The weights the LoRAs change are held whole until every
// tensor is read, then fused and cut.
StatusOr<std::vector<models::ParamMap>> ReadSharded(const ModelFile& file, const std::string& component,
                                                   const std::vector<models::ParamSpec>& manifest,
                                                   const models::ModelRanks& ranks, const LoraSet* loras) {
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
  std::set<std::string> fused_names;
  if (loras != nullptr)
    for (std::string& name : loras->Touched(component)) fused_names.insert(std::move(name));
  models::ShardBuilder shards(manifest, ranks);
  std::map<std::string, mesh::Array> fused;
  for (const models::ParamSpec& p : manifest) {
    // Stored bf16: kept bf16 where the models allow it (no f32 copy).
    TPUMESH_ASSIGN_OR_RETURN(TensorInfo info, file.Info(component, p.name));
    // Checked before the read: a compressed dataset may declare far more
    // than the file's size, and only what the config needs is allocated.
    if (info.shape != p.shape)
      return InvalidArgumentError(file.path() + ": tensor " + component + "/" + p.name + " has shape " +
                                  mesh::ShapeToString(info.shape) + " but " + component +
                                  "/config.json needs " + mesh::ShapeToString(p.shape));
    const mesh::DType as = info.stored == mesh::DType::kBF16 && models::MayHoldBf16(p.name, p.shape)
                               ? mesh::DType::kBF16
                               : mesh::DType::kF32;
    TPUMESH_ASSIGN_OR_RETURN(mesh::Array a, file.ReadTensor(component, p.name, as));
    TPUMESH_RETURN_IF_ERROR(CheckFiniteTensor(file.path() + ": tensor " + component + "/" + p.name, a));
    if (fused_names.count(p.name)) {
      fused.emplace(p.name, std::move(a));
    } else {
      shards.Add(p.name, a);
    }
  }
  if (loras != nullptr && !fused_names.empty()) {
    TPUMESH_RETURN_IF_ERROR(loras->Fuse(component, &fused));
    for (const auto& [name, a] : fused) shards.Add(name, a);
  }
  return std::move(shards).Finish();
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

namespace {

// component/name -> the part of a parameter the local model ranks hold
// (numerator, denominator): its split units they hold, or all of it.
using HeldParts = std::map<std::string, std::pair<int64_t, int64_t>>;
StatusOr<HeldParts> HeldByLocalRanks(const ModelFile& file, const models::ModelRanks& ranks) {
  TPUMESH_ASSIGN_OR_RETURN(ModelConfigs c, ReadModelConfigs(file));
  std::vector<std::pair<std::string, std::vector<models::ParamSpec>>> manifests;
  for (const auto& [component, text] : {std::pair<std::string, const std::string*>{"text_encoder", &c.text_encoder},
                                        {"text_encoder_2", &c.text_encoder_2}}) {
    if (text->empty()) continue;
    TPUMESH_ASSIGN_OR_RETURN(auto cfg, models::ParseClipTextConfig(*text, file.path() + ": " + component));
    manifests.emplace_back(component, models::ClipTextParams(cfg));
  }
  TPUMESH_ASSIGN_OR_RETURN(auto uc, models::ParseUNetConfig(c.unet, file.path() + ": unet"));
  manifests.emplace_back("unet", models::UNetParams(uc));
  TPUMESH_ASSIGN_OR_RETURN(auto vc, models::ParseVaeConfig(c.vae, file.path() + ": vae"));
  manifests.emplace_back("vae", models::VaeParams(vc));
  HeldParts held;
  const int m = ranks.count;
  for (const auto& [component, manifest] : manifests)
    for (const models::ParamSpec& p : manifest) {
      int64_t units = 0;
      for (int r = 0; r < m; ++r) {
        if (!ranks.is_local(r)) continue;
        const auto [u0, u1] = models::ShardUnits(p.split.units, m, r);
        units += p.split.SplitsOver(m) ? u1 - u0 : 0;
      }
      held[component + "/" + p.name] = p.split.SplitsOver(m) ? std::pair<int64_t, int64_t>{units, p.split.units}
                                                             : std::pair<int64_t, int64_t>{1, 1};
    }
  return held;
}

}  // namespace

StatusOr<HostMemoryEstimate> EstimateHostMemory(const ModelFile& file, const models::ModelRanks& ranks) {
  // Only some model ranks here: each split parameter counted for the units
  // they hold. A config that does not parse is left to the loader to report
  // (the whole model is counted).
  HeldParts held;
  if (!ranks.all_local()) {
    auto parts = HeldByLocalRanks(file, ranks);
    if (parts.ok()) held = std::move(parts).value();
  }
  HostMemoryEstimate e;
  for (const char* component : {"text_encoder", "text_encoder_2", "unet", "vae"}) {
    if (!file.Has(std::string(component) + "/config.json")) continue;
    TPUMESH_ASSIGN_OR_RETURN(std::vector<std::string> names, file.TensorNames(component));
    for (const std::string& name : names) {
      TPUMESH_ASSIGN_OR_RETURN(TensorInfo info, file.Info(component, name));
      const auto it = held.find(std::string(component) + "/" + name);
      const auto [num, den] = it == held.end() ? std::pair<int64_t, int64_t>{1, 1} : it->second;
      const int64_t n = mesh::NumElements(info.shape) / den * num;
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

models::ModelRanks LocalModelRanks(const mesh::Mesh& mesh) {
  const int m = mesh.axes().size() > 1 ? mesh.axes()[1].size : 1;
  std::vector<bool> local(m, false);
  for (int d = mesh.first_local(); d < mesh.first_local() + mesh.num_local(); ++d) {
    const std::vector<int> at = mesh.AxisIndices(d);
    local[at.size() > 1 ? at[1] : 0] = true;
  }
  return models::ModelRanks(m, std::move(local));
}

StatusOr<std::unique_ptr<TextToImage>> LoadTextToImage(const ModelFile& file,
                                                       const models::ModelRanks& model_ranks,
                                                       const LoraSet* loras) {
  TPUMESH_ASSIGN_OR_RETURN(ModelConfigs configs, ReadModelConfigs(file));
  TPUMESH_ASSIGN_OR_RETURN(ClipTokenizer tok, LoadTokenizer(file, "tokenizer"));
  std::unique_ptr<ClipTokenizer> tok2;
  if (!configs.text_encoder_2.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(ClipTokenizer t, LoadTokenizer(file, "tokenizer_2"));
    tok2 = std::make_unique<ClipTokenizer>(std::move(t));
  }
  auto read = [&](const std::string& component, const std::vector<models::ParamSpec>& manifest,
                  int ranks) -> StatusOr<std::vector<models::ParamMap>> {
    if (ranks != model_ranks.count)
      return InternalError(component + ": split " + std::to_string(ranks) + " ways, loaded for " +
                           std::to_string(model_ranks.count) + " model ranks");
    return ReadSharded(file, component, manifest, model_ranks, loras);
  };
  return BuildTextToImage(configs, read, std::make_unique<ClipTokenizer>(std::move(tok)), std::move(tok2),
                          model_ranks.count);
}

StatusOr<models::ClipTextModel> LoadTextEncoder(const ModelFile& file, const models::ModelRanks& model_ranks, const LoraSet* loras) {
  TPUMESH_ASSIGN_OR_RETURN(std::string text, Config(file, "text_encoder"));
  TPUMESH_ASSIGN_OR_RETURN(auto cfg, models::ParseClipTextConfig(text, file.path() + ": text_encoder/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto ranks, ReadSharded(file, "text_encoder", models::ClipTextParams(cfg), model_ranks, loras));
  return models::ClipTextModel::Create(cfg, std::move(ranks));
}

StatusOr<models::UNetModel> LoadUNet(const ModelFile& file, const models::ModelRanks& model_ranks, const LoraSet* loras) {
  TPUMESH_ASSIGN_OR_RETURN(std::string text, Config(file, "unet"));
  TPUMESH_ASSIGN_OR_RETURN(auto cfg, models::ParseUNetConfig(text, file.path() + ": unet/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto ranks, ReadSharded(file, "unet", models::UNetParams(cfg), model_ranks, loras));
  return models::UNetModel::Create(cfg, std::move(ranks));
}

StatusOr<models::VaeModel> LoadVae(const ModelFile& file, const models::ModelRanks& model_ranks) {
  TPUMESH_ASSIGN_OR_RETURN(std::string text, Config(file, "vae"));
  TPUMESH_ASSIGN_OR_RETURN(auto cfg, models::ParseVaeConfig(text, file.path() + ": vae/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto ranks, ReadSharded(file, "vae", models::VaeParams(cfg), model_ranks, nullptr));
  return models::VaeModel::Create(cfg, std::move(ranks));
}

}  // namespace tpumesh::pipeline
