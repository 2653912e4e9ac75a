#include "pipeline/convert.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "io/model_file.h"
#include "io/safetensors.h"
#include "nlohmann/json.hpp"

namespace tpumesh::pipeline {
namespace {

namespace fs = std::filesystem;

StatusOr<std::string> ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return NotFoundError(p.string() + ": missing (expected in a diffusers folder)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<std::string> ReadJsonFile(const fs::path& p) {
  TPUMESH_ASSIGN_OR_RETURN(std::string text, ReadFile(p));
  if (nlohmann::json::parse(text, nullptr, false).is_discarded())
    return InvalidArgumentError(p.string() + ": not valid JSON");
  return text;
}

struct Component {
  const char* name;
  const char* weights;  // file inside the component folder
};
constexpr Component kComponents[] = {
    {"text_encoder", "model.safetensors"},
    {"unet", "diffusion_pytorch_model.safetensors"},
    {"vae", "diffusion_pytorch_model.safetensors"},
};

}  // namespace

StatusOr<ConvertStats> ConvertDiffusersFolder(
    const std::string& folder, const std::string& output, mesh::DType dtype,
    const std::function<void(const std::string&, int, int)>& progress) {
  const fs::path root(folder);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return NotFoundError(folder + ": not a directory");
  if (dtype != mesh::DType::kF32 && dtype != mesh::DType::kBF16)
    return InvalidArgumentError("--dtype must be f32 or bf16");

  // Check and open everything before creating the output.
  TPUMESH_ASSIGN_OR_RETURN(std::string model_index, ReadJsonFile(root / "model_index.json"));
  TPUMESH_ASSIGN_OR_RETURN(std::string scheduler,
                           ReadJsonFile(root / "scheduler" / "scheduler_config.json"));
  TPUMESH_ASSIGN_OR_RETURN(std::string vocab, ReadJsonFile(root / "tokenizer" / "vocab.json"));
  TPUMESH_ASSIGN_OR_RETURN(std::string merges, ReadFile(root / "tokenizer" / "merges.txt"));
  std::vector<std::pair<std::string, std::string>> optional_texts;
  for (const char* f : {"special_tokens_map.json", "tokenizer_config.json"}) {
    if (fs::exists(root / "tokenizer" / f)) {
      TPUMESH_ASSIGN_OR_RETURN(std::string t, ReadJsonFile(root / "tokenizer" / f));
      optional_texts.emplace_back(std::string("tokenizer/") + f, t);
    }
  }
  std::vector<std::string> configs;
  std::vector<SafetensorsFile> weights;
  for (const Component& c : kComponents) {
    TPUMESH_ASSIGN_OR_RETURN(std::string cfg, ReadJsonFile(root / c.name / "config.json"));
    configs.push_back(cfg);
    const fs::path w = root / c.name / c.weights;
    if (!fs::exists(w))
      return NotFoundError(w.string() + ": missing (only safetensors weights are read)");
    TPUMESH_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(w.string()));
    weights.push_back(std::move(f));
  }

  TPUMESH_ASSIGN_OR_RETURN(std::unique_ptr<ModelFileWriter> out, ModelFileWriter::Create(output));
  TPUMESH_RETURN_IF_ERROR(out->WriteText("model_index.json", model_index));
  TPUMESH_RETURN_IF_ERROR(out->WriteText("scheduler/scheduler_config.json", scheduler));
  TPUMESH_RETURN_IF_ERROR(out->WriteText("tokenizer/vocab.json", vocab));
  TPUMESH_RETURN_IF_ERROR(out->WriteText("tokenizer/merges.txt", merges));
  for (const auto& [path, text] : optional_texts) TPUMESH_RETURN_IF_ERROR(out->WriteText(path, text));

  ConvertStats stats;
  for (size_t i = 0; i < std::size(kComponents); ++i) {
    const std::string comp = kComponents[i].name;
    TPUMESH_RETURN_IF_ERROR(out->WriteText(comp + "/config.json", configs[i]));
    const auto& entries = weights[i].entries();
    int done = 0;
    for (const SafetensorsEntry& e : entries) {
      ++done;
      if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16") {
        ++stats.skipped;
        continue;
      }
      TPUMESH_ASSIGN_OR_RETURN(mesh::Array a, weights[i].Read(e.name, dtype));
      TPUMESH_RETURN_IF_ERROR(out->WriteTensor(comp, e.name, a, dtype));
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
