#include "pipeline/convert.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "base/input_file.h"
#include "io/model_file.h"
#include "io/safetensors.h"
#include "pipeline/loader.h"
#include "nlohmann/json.hpp"

namespace tpumesh::pipeline {
namespace {

namespace fs = std::filesystem;

StatusOr<std::string> ReadFile(const fs::path& p) {
  auto text = ReadInputFile(p.string());
  if (!text.ok() && text.status().code() == StatusCode::kNotFound)
    return NotFoundError(p.string() + ": missing (expected in a diffusers folder)");
  return text;
}

StatusOr<std::string> ReadJsonFile(const fs::path& p) {
  TPUMESH_ASSIGN_OR_RETURN(std::string text, ReadFile(p));
  if (nlohmann::json::parse(text, nullptr, false).is_discarded())
    return InvalidArgumentError(p.string() + ": not valid JSON");
  return text;
}

// A tokenizer folder as transformers >= 5 saves it (tokenizer.json, the
// tokenizers library's file, and tokenizer_config.json without the added
// tokens): the vocab.json, merges.txt and tokenizer_config.json (with
// added_tokens_decoder from tokenizer.json's added_tokens) transformers 4.x
// wrote for the same tokenizer, as (file, text) pairs.
StatusOr<std::vector<std::pair<std::string, std::string>>> FromTokenizerJson(const fs::path& dir) {
  const fs::path p = dir / "tokenizer.json";
  TPUMESH_ASSIGN_OR_RETURN(std::string text, ReadJsonFile(p));
  const auto j = nlohmann::json::parse(text);
  const auto* model = j.is_object() && j.contains("model") && j["model"].is_object() ? &j["model"] : nullptr;
  if (!model || model->value("type", "") != "BPE" || !model->contains("vocab") || !(*model)["vocab"].is_object() ||
      !model->contains("merges") || !(*model)["merges"].is_array() ||
      !(*model)["end_of_word_suffix"].is_string() || (*model)["end_of_word_suffix"] != "</w>")
    return InvalidArgumentError(p.string() + ": not a CLIP BPE tokenizer (model.type BPE with vocab, merges and "
                                "end_of_word_suffix \"</w>\")");
  std::string merges = "#version: 0.2\n";
  for (const auto& m : (*model)["merges"]) {
    if (m.is_string()) {
      merges += m.get<std::string>() + "\n";
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges += m[0].get<std::string>() + " " + m[1].get<std::string>() + "\n";
    } else {
      return InvalidArgumentError(p.string() + ": a merge that is neither \"a b\" nor [a, b]");
    }
  }
  nlohmann::json config = nlohmann::json::object();
  if (fs::exists(dir / "tokenizer_config.json")) {
    TPUMESH_ASSIGN_OR_RETURN(std::string c, ReadJsonFile(dir / "tokenizer_config.json"));
    config = nlohmann::json::parse(c);
    if (!config.is_object()) return InvalidArgumentError((dir / "tokenizer_config.json").string() + ": not a JSON object");
  }
  if (!config.contains("added_tokens_decoder") && j.contains("added_tokens") && j["added_tokens"].is_array()) {
    nlohmann::json added = nlohmann::json::object();
    for (const auto& t : j["added_tokens"]) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
          !t["content"].is_string())
        return InvalidArgumentError(p.string() + ": an added token without an integer id and a content");
      nlohmann::json e = {{"content", t["content"]}};
      for (const char* k : {"lstrip", "normalized", "rstrip", "single_word", "special"})
        if (t.contains(k)) e[k] = t[k];
      added[std::to_string(t["id"].get<int64_t>())] = e;
    }
    config["added_tokens_decoder"] = added;
  }
  return std::vector<std::pair<std::string, std::string>>{
      {"vocab.json", (*model)["vocab"].dump()}, {"merges.txt", merges}, {"tokenizer_config.json", config.dump(2)}};
}

// transformers >= 5.6 saves a CLIPTextModel's parameters without their
// "text_model." prefix; the model file keeps the 4.x names (the manifest's).
// The file name -> model name of each tensor of a text encoder's weights.
std::map<std::string, std::string> TextEncoderNames(const SafetensorsFile& f) {
  std::map<std::string, std::string> names;
  bool flat = false, prefixed = false;
  for (const SafetensorsEntry& e : f.entries()) {
    prefixed |= e.name.rfind("text_model.", 0) == 0;
    for (const char* p : {"embeddings.", "encoder.", "final_layer_norm."}) flat |= e.name.rfind(p, 0) == 0;
  }
  for (const SafetensorsEntry& e : f.entries()) {
    bool add = false;
    if (flat && !prefixed)
      for (const char* p : {"embeddings.", "encoder.", "final_layer_norm."}) add |= e.name.rfind(p, 0) == 0;
    names[e.name] = add ? "text_model." + e.name : e.name;
  }
  return names;
}

struct Component {
  const char* name;
  const char* weights;  // file inside the component folder
  bool sdxl_only;       // text_encoder_2: present in an SDXL folder only
};
constexpr Component kComponents[] = {
    {"text_encoder", "model.safetensors", false},
    {"text_encoder_2", "model.safetensors", true},
    {"unet", "diffusion_pytorch_model.safetensors", false},
    {"vae", "diffusion_pytorch_model.safetensors", false},
};

// Whether the folder is an SDXL pipeline, and what says so: model_index.json's
// class, or a second text encoder or tokenizer folder.
std::string SdxlEvidence(const fs::path& root, const std::string& model_index) {
  const auto j = nlohmann::json::parse(model_index, nullptr, false);
  if (j.is_object() && j.contains("_class_name") && j["_class_name"].is_string()) {
    const std::string c = j["_class_name"];
    if (c.find("StableDiffusionXL") != std::string::npos) return "model_index.json names " + c;
  }
  for (const char* d : {"text_encoder_2", "tokenizer_2"})
    if (fs::exists(root / d)) return std::string("it has ") + d + "/";
  return "";
}

}  // namespace

const std::string* DiffusersTexts::Config(const std::string& component) const {
  for (const auto& [name, text] : configs)
    if (name == component) return &text;
  return nullptr;
}

StatusOr<DiffusersTexts> ReadDiffusersTexts(const std::string& folder) {
  const fs::path root(folder);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return NotFoundError(folder + ": not a directory");
  DiffusersTexts d;
  d.origin = folder;
  TPUMESH_ASSIGN_OR_RETURN(d.model_index, ReadJsonFile(root / "model_index.json"));
  TPUMESH_ASSIGN_OR_RETURN(d.scheduler, ReadJsonFile(root / "scheduler" / "scheduler_config.json"));
  d.sdxl_evidence = SdxlEvidence(root, d.model_index);
  const std::string& sdxl = d.sdxl_evidence;
  // An SDXL folder must be whole: each missing part is named with the
  // reason the folder counts as SDXL.
  auto need = [&](const fs::path& p) -> Status {
    if (sdxl.empty() || fs::exists(p)) return OkStatus();
    return NotFoundError(folder + ": an SDXL folder (" + sdxl + ") without " +
                         fs::relative(p, root).string() + "; both text encoders and both tokenizers are needed");
  };
  for (const std::string tok : {"tokenizer", "tokenizer_2"}) {
    if (tok == "tokenizer_2" && sdxl.empty()) continue;
    if ((!fs::exists(root / tok / "vocab.json") || !fs::exists(root / tok / "merges.txt")) &&
        fs::exists(root / tok / "tokenizer.json")) {
      TPUMESH_ASSIGN_OR_RETURN(auto files, FromTokenizerJson(root / tok));
      for (auto& [f, t] : files) d.texts.emplace_back(tok + "/" + f, std::move(t));
      if (fs::exists(root / tok / "special_tokens_map.json")) {
        TPUMESH_ASSIGN_OR_RETURN(std::string t, ReadJsonFile(root / tok / "special_tokens_map.json"));
        d.texts.emplace_back(tok + "/special_tokens_map.json", std::move(t));
      }
      continue;
    }
    for (const char* f : {"vocab.json", "merges.txt", "special_tokens_map.json", "tokenizer_config.json"}) {
      const fs::path p = root / tok / f;
      const bool required = std::string(f) == "vocab.json" || std::string(f) == "merges.txt";
      if (required) TPUMESH_RETURN_IF_ERROR(need(p));
      if (!required && !fs::exists(p)) continue;
      TPUMESH_ASSIGN_OR_RETURN(std::string t, std::string(f) == "merges.txt" ? ReadFile(p) : ReadJsonFile(p));
      d.texts.emplace_back(tok + "/" + f, std::move(t));
    }
  }
  if (fs::exists(root / kTrainingMetadata)) {
    TPUMESH_ASSIGN_OR_RETURN(std::string t, ReadJsonFile(root / kTrainingMetadata));
    d.texts.emplace_back(kTrainingMetadata, std::move(t));
  }
  for (const Component& c : kComponents) {
    if (c.sdxl_only && sdxl.empty()) continue;
    TPUMESH_RETURN_IF_ERROR(need(root / c.name / "config.json"));
    TPUMESH_ASSIGN_OR_RETURN(std::string cfg, ReadJsonFile(root / c.name / "config.json"));
    d.configs.emplace_back(c.name, std::move(cfg));
  }
  return d;
}

Status CheckModelBuilds(const DiffusersTexts& d, const ManifestCheck& check_tensors) {
  ModelConfigs cf;
  cf.origin = d.origin;
  cf.model_index = d.model_index;
  cf.scheduler = d.scheduler;
  for (const auto& [name, text] : d.configs) {
    (name == "text_encoder"     ? cf.text_encoder
     : name == "text_encoder_2" ? cf.text_encoder_2
     : name == "unet"           ? cf.unet
                                : cf.vae) = text;
  }
  auto tokenizer = [&](const std::string& tok) -> StatusOr<std::unique_ptr<ClipTokenizer>> {
    ClipTokenizerTexts t;
    for (const auto& [path, text] : d.texts) {
      if (path == tok + "/vocab.json") t.vocab_json = text;
      if (path == tok + "/merges.txt") t.merges_txt = text;
      if (path == tok + "/special_tokens_map.json") t.special_tokens_map_json = text;
      if (path == tok + "/tokenizer_config.json") t.tokenizer_config_json = text;
    }
    TPUMESH_ASSIGN_OR_RETURN(ClipTokenizer k, ClipTokenizer::FromStrings(t, d.origin + "/" + tok));
    return std::make_unique<ClipTokenizer>(std::move(k));
  };
  TPUMESH_ASSIGN_OR_RETURN(auto tok, tokenizer("tokenizer"));
  std::unique_ptr<ClipTokenizer> tok2;
  if (!cf.text_encoder_2.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(tok2, tokenizer("tokenizer_2"));
  }
  auto shapes = [&](const std::string& component, const std::vector<models::ParamSpec>& manifest,
                    int ranks) -> StatusOr<std::vector<models::ParamMap>> {
    TPUMESH_RETURN_IF_ERROR(check_tensors(component, manifest));
    return ZeroParams(component, manifest, ranks, false);
  };
  return BuildTextToImage(cf, shapes, std::move(tok), std::move(tok2)).status();
}

StatusOr<ConvertStats> ConvertDiffusersFolder(
    const std::string& folder, const std::string& output, mesh::DType dtype,
    const std::function<void(const std::string&, int, int)>& progress) {
  const fs::path root(folder);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return NotFoundError(folder + ": not a directory");
  if (dtype != mesh::DType::kF32 && dtype != mesh::DType::kBF16)
    return InvalidArgumentError("--dtype must be f32 or bf16");

  // Check and open everything before creating the output.
  TPUMESH_ASSIGN_OR_RETURN(DiffusersTexts d, ReadDiffusersTexts(folder));
  std::vector<const Component*> present;
  std::vector<SafetensorsFile> weights;
  std::vector<std::map<std::string, std::string>> names;  // file -> model name, per component
  for (const auto& [name, text] : d.configs) {
    const Component* c = nullptr;
    for (const Component& k : kComponents)
      if (name == k.name) c = &k;
    present.push_back(c);
    const fs::path w = root / c->name / c->weights;
    if (!fs::exists(w))
      return NotFoundError(w.string() + ": missing (only safetensors weights are read)");
    TPUMESH_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(w.string()));
    std::map<std::string, std::string> n;
    if (std::string(c->name).rfind("text_encoder", 0) == 0) {
      n = TextEncoderNames(f);
    } else {
      for (const SafetensorsEntry& e : f.entries()) n[e.name] = e.name;
    }
    names.push_back(std::move(n));
    weights.push_back(std::move(f));
  }

  // The folder must make a model that runs: the loader's own checks, on the
  // configs, the tokenizers and every tensor's presence, dtype and shape,
  // before anything is written (a converted file always loads).
  TPUMESH_RETURN_IF_ERROR(CheckModelBuilds(
      d, [&](const std::string& component, const std::vector<models::ParamSpec>& manifest) -> Status {
        size_t i = 0;
        while (i < present.size() && present[i]->name != component) ++i;
        if (i == present.size()) return NotFoundError(folder + ": no " + component + " folder");
        const std::string file = (root / component / present[i]->weights).string();
        std::map<std::string, const SafetensorsEntry*> by_name;
        for (const SafetensorsEntry& e : weights[i].entries()) by_name[names[i].at(e.name)] = &e;
        for (const models::ParamSpec& p : manifest) {
          auto it = by_name.find(p.name);
          if (it == by_name.end())
            return NotFoundError(file + ": no tensor " + p.name + " (" + component + "/config.json needs it, shape " +
                                 mesh::ShapeToString(p.shape) + ")");
          const SafetensorsEntry& e = *it->second;
          if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16")
            return InvalidArgumentError(file + ": tensor " + p.name + " is " + e.dtype +
                                        ", not a float (F32, F16, BF16)");
          if (e.shape != p.shape)
            return InvalidArgumentError(file + ": tensor " + p.name + " has shape " + mesh::ShapeToString(e.shape) +
                                        " but " + component + "/config.json needs " + mesh::ShapeToString(p.shape));
        }
        return OkStatus();
      }));

  TPUMESH_ASSIGN_OR_RETURN(std::unique_ptr<ModelFileWriter> out, ModelFileWriter::Create(output));
  TPUMESH_RETURN_IF_ERROR(out->WriteText("model_index.json", d.model_index));
  TPUMESH_RETURN_IF_ERROR(out->WriteText("scheduler/scheduler_config.json", d.scheduler));
  for (const auto& [path, text] : d.texts) TPUMESH_RETURN_IF_ERROR(out->WriteText(path, text));

  ConvertStats stats;
  for (size_t i = 0; i < present.size(); ++i) {
    const std::string comp = present[i]->name;
    TPUMESH_RETURN_IF_ERROR(out->WriteText(comp + "/config.json", d.configs[i].second));
    const auto& entries = weights[i].entries();
    int done = 0;
    for (const SafetensorsEntry& e : entries) {
      ++done;
      if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16") {
        ++stats.skipped;
        continue;
      }
      TPUMESH_ASSIGN_OR_RETURN(mesh::Array a, weights[i].Read(e.name, dtype));
      TPUMESH_RETURN_IF_ERROR(CheckFiniteTensor((root / comp / present[i]->weights).string() + ": tensor " + e.name, a));
      TPUMESH_RETURN_IF_ERROR(out->WriteTensor(comp, names[i].at(e.name), a, dtype));
      ++stats.tensors;
      stats.parameters += a.num_elements();
      stats.bytes_written += a.size_bytes();
      if (progress) progress(comp, done, static_cast<int>(entries.size()));
    }
  }
  TPUMESH_RETURN_IF_ERROR(out->Commit());
  return stats;
}

}  // namespace tpumesh::pipeline
