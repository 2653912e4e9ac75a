#include "pipeline/init_model.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/input_file.h"
#include "io/model_file.h"
#include "models/architectures.h"
#include "models/configs.h"
#include "nlohmann/json.hpp"
#include "text/embedded.h"
#include "text/tokenizer.h"

namespace tpumesh::pipeline {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t HashName(const std::string& s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Fills `a` with N(0, std^2), deterministic in (seed, name).
void FillNormal(mesh::Array& a, uint64_t seed, const std::string& name, float stddev) {
  uint64_t state = seed * 0x2545f4914f6cdd1dull ^ HashName(name);
  float* p = a.mutable_data<float>();
  const int64_t n = a.num_elements();
  for (int64_t i = 0; i < n; i += 2) {
    // Box-Muller on two 53-bit uniforms in (0, 1].
    const double u1 = (static_cast<double>(SplitMix64(state) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    p[i] = static_cast<float>(r * std::cos(2 * M_PI * u2) * stddev);
    if (i + 1 < n) p[i + 1] = static_cast<float>(r * std::sin(2 * M_PI * u2) * stddev);
  }
}

StatusOr<std::string> ReadText(const std::filesystem::path& p) {
  auto text = ReadInputFile(p.string());
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) return NotFoundError(p.string() + ": missing");
  return text;
}

}  // namespace

StatusOr<std::vector<std::pair<std::string, std::string>>> SdxlTokenizer2Texts(
    const std::vector<std::pair<std::string, std::string>>& tokenizer) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string vocab_text;
  for (const auto& [path, text] : tokenizer)
    if (path == "tokenizer/vocab.json") vocab_text = text;
  const auto vocab = nlohmann::json::parse(vocab_text, nullptr, false);
  if (!vocab.is_object() || !vocab.contains("!") || !vocab["!"].is_number_integer())
    return InvalidArgumentError("tokenizer/vocab.json has no \"!\" token, which SDXL's tokenizer_2 pads with");
  const int bang = vocab["!"];
  bool have_special = false;
  for (const auto& [path, text] : tokenizer) {
    const std::string file = path.substr(path.find('/') + 1);
    std::string t = text;
    if (file == "special_tokens_map.json" || file == "tokenizer_config.json") {
      auto j = nlohmann::json::parse(text, nullptr, false);
      if (!j.is_object()) return InvalidArgumentError(path + ": not a JSON object");
      j["pad_token"] = "!";
      if (file == "tokenizer_config.json" && j.contains("added_tokens_decoder"))
        j["added_tokens_decoder"][std::to_string(bang)] = {{"content", "!"},  {"lstrip", false},
                                                           {"normalized", false}, {"rstrip", false},
                                                           {"single_word", false}, {"special", true}};
      t = j.dump(2);
      have_special |= file == "special_tokens_map.json";
    }
    out.emplace_back("tokenizer_2/" + file, t);
  }
  if (!have_special) out.emplace_back("tokenizer_2/special_tokens_map.json", R"({"pad_token": "!"})");
  return out;
}

StatusOr<InitStats> InitModel(const InitOptions& opt,
                              const std::function<void(const std::string&, int, int)>& progress) {
  TPUMESH_ASSIGN_OR_RETURN(models::Architecture arch, models::BuiltinArchitecture(opt.arch));
  if (!arch.transformer.empty())
    return UnimplementedError("init --arch " + opt.arch + ": Flux model files are not implemented (no T5 tokenizer); "
                              "price Flux with `tpumesh simulate --arch " + opt.arch + "`");
  if (opt.dtype != mesh::DType::kF32 && opt.dtype != mesh::DType::kBF16)
    return InvalidArgumentError("--dtype must be f32 or bf16");

  // Tokenizer texts, checked before anything is written.
  std::vector<std::pair<std::string, std::string>> tokenizer;
  if (!opt.tokenizer_dir.empty()) {
    const std::filesystem::path dir(opt.tokenizer_dir);
    TPUMESH_ASSIGN_OR_RETURN(std::string vocab, ReadText(dir / "vocab.json"));
    if (nlohmann::json::parse(vocab, nullptr, false).is_discarded())
      return InvalidArgumentError((dir / "vocab.json").string() + ": not valid JSON");
    TPUMESH_ASSIGN_OR_RETURN(std::string merges, ReadText(dir / "merges.txt"));
    tokenizer = {{"tokenizer/vocab.json", vocab}, {"tokenizer/merges.txt", merges}};
    for (const char* f : {"special_tokens_map.json", "tokenizer_config.json"})
      if (std::filesystem::exists(dir / f)) {
        TPUMESH_ASSIGN_OR_RETURN(std::string t, ReadText(dir / f));
        tokenizer.emplace_back(std::string("tokenizer/") + f, t);
      }
    ClipTokenizerTexts texts;
    for (const auto& [path, text] : tokenizer) {
      if (path == "tokenizer/vocab.json") texts.vocab_json = text;
      if (path == "tokenizer/merges.txt") texts.merges_txt = text;
      if (path == "tokenizer/special_tokens_map.json") texts.special_tokens_map_json = text;
      if (path == "tokenizer/tokenizer_config.json") texts.tokenizer_config_json = text;
    }
    // Built as generate will build it: a broken vocabulary or merges list
    // fails here, not in the first run.
    TPUMESH_RETURN_IF_ERROR(ClipTokenizer::FromStrings(texts, opt.tokenizer_dir).status());
  } else {
    // Every architecture's vocabulary holds the tiny tokenizer's 1000 ids.
    tokenizer = {{"tokenizer/vocab.json", std::string(embedded::TinyTokenizer_vocab_json())},
                 {"tokenizer/merges.txt", std::string(embedded::TinyTokenizer_merges_txt())},
                 {"tokenizer/special_tokens_map.json",
                  std::string(embedded::TinyTokenizer_special_tokens_map_json())},
                 {"tokenizer/tokenizer_config.json",
                  std::string(embedded::TinyTokenizer_tokenizer_config_json())}};
  }

  if (!arch.text_encoder_2.empty() && !tokenizer.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(auto t2, SdxlTokenizer2Texts(tokenizer));
    tokenizer.insert(tokenizer.end(), t2.begin(), t2.end());
  }

  struct Component {
    std::string name;
    std::string config;
    std::vector<models::ParamSpec> params;
  };
  std::vector<Component> components;
  {
    TPUMESH_ASSIGN_OR_RETURN(auto te, models::ParseClipTextConfig(arch.text_encoder, "text_encoder/config.json"));
    components.push_back({"text_encoder", arch.text_encoder, models::ClipTextParams(te)});
    if (!arch.text_encoder_2.empty()) {
      TPUMESH_ASSIGN_OR_RETURN(auto te2, models::ParseClipTextConfig(arch.text_encoder_2, "text_encoder_2/config.json"));
      components.push_back({"text_encoder_2", arch.text_encoder_2, models::ClipTextParams(te2)});
    }
    TPUMESH_ASSIGN_OR_RETURN(auto unet, models::ParseUNetConfig(arch.unet, "unet/config.json"));
    components.push_back({"unet", arch.unet, models::UNetParams(unet)});
    TPUMESH_ASSIGN_OR_RETURN(auto vae, models::ParseVaeConfig(arch.vae, "vae/config.json"));
    components.push_back({"vae", arch.vae, models::VaeParams(vae)});
  }

  TPUMESH_ASSIGN_OR_RETURN(auto out, ModelFileWriter::Create(opt.output));
  TPUMESH_RETURN_IF_ERROR(out->WriteText("model_index.json", arch.model_index));
  TPUMESH_RETURN_IF_ERROR(out->WriteText("scheduler/scheduler_config.json", arch.scheduler));
  for (const auto& [path, text] : tokenizer) TPUMESH_RETURN_IF_ERROR(out->WriteText(path, text));
  InitStats stats;
  for (const Component& c : components) {
    TPUMESH_RETURN_IF_ERROR(out->WriteText(c.name + "/config.json", c.config));
    int done = 0;
    for (const models::ParamSpec& p : c.params) {
      mesh::Array a = mesh::Array::Host(mesh::DType::kF32, p.shape);
      const bool is_bias = p.name.size() > 5 && p.name.compare(p.name.size() - 5, 5, ".bias") == 0;
      if (is_bias) {
        // zeros
      } else if (p.shape.size() == 1) {
        float* w = a.mutable_data<float>();
        for (int64_t i = 0; i < a.num_elements(); ++i) w[i] = 1.0f;  // norm scale
      } else if (p.name.find("embedding.weight") != std::string::npos) {
        FillNormal(a, opt.seed, c.name + "/" + p.name, 0.02f);
      } else {
        const int64_t fan_in = a.num_elements() / p.shape[0];
        FillNormal(a, opt.seed, c.name + "/" + p.name, 1.0f / std::sqrt(static_cast<float>(fan_in)));
      }
      TPUMESH_RETURN_IF_ERROR(out->WriteTensor(c.name, p.name, a, opt.dtype));
      ++stats.tensors;
      stats.parameters += a.num_elements();
      stats.bytes += a.num_elements() * static_cast<int64_t>(mesh::DTypeSize(opt.dtype));
      if (progress) progress(c.name, ++done, static_cast<int>(c.params.size()));
    }
  }
  TPUMESH_RETURN_IF_ERROR(out->Commit());
  return stats;
}

}  // namespace tpumesh::pipeline
