// Converts a diffusers Stable Diffusion folder (model_index.json,
// text_encoder/, unet/, vae/, tokenizer/, scheduler/) into one tpumesh model
// file (model_file.h).
//
// Folders as transformers >= 5.6 saves them are read too: a CLIPTextModel's
// parameters without their "text_model." prefix get it back (the model file
// keeps transformers 4.x names), and a tokenizer folder holding only
// tokenizer.json (+ tokenizer_config.json) gives the vocab.json, merges.txt
// and tokenizer_config.json (added_tokens_decoder from tokenizer.json's
// added_tokens) that 4.x wrote.
//
// Contract: every required file is checked to exist and parse before the
// output is created; tensors stream from safetensors to HDF5 one at a time;
// the output appears only when complete (the writer's temp-file + rename).
// Non-float buffers (e.g. an int64 position_ids) are skipped and counted.
#ifndef TPUMESH_PIPELINE_CONVERT_H_
#define TPUMESH_PIPELINE_CONVERT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "mesh/array.h"
#include "models/configs.h"

namespace tpumesh::pipeline {

struct ConvertStats {
  int64_t tensors = 0;
  int64_t parameters = 0;  // elements
  int64_t skipped = 0;     // non-float buffers not converted
  int64_t bytes_written = 0;
  // A single file's tensors that map to no parameter (EMA copies, the noise
  // schedule, ...), with the first few names.
  int64_t unused = 0;
  std::vector<std::string> unused_examples;
};

// progress(component, tensors done in it, tensors in it) is called after
// each tensor; may be empty.
StatusOr<ConvertStats> ConvertDiffusersFolder(
    const std::string& folder, const std::string& output, mesh::DType dtype,
    const std::function<void(const std::string&, int, int)>& progress = {});

// Everything a diffusers folder holds besides its weights: model_index.json,
// the scheduler config, each component's config.json (in the order
// text_encoder, text_encoder_2 (SDXL), unet, vae), the tokenizer files
// (vocab.json and merges.txt required, or tokenizer.json; the two JSON
// configs optional) and a training record, each checked to exist and parse. `tpumesh convert`'s
// --config reads a folder's configs through this.
struct DiffusersTexts {
  std::string origin;          // the folder or architecture, for errors
  std::string model_index;     // model_index.json
  std::string scheduler;       // scheduler/scheduler_config.json
  std::string sdxl_evidence;   // why the folder is SDXL; empty: it is not
  // (component, config.json text).
  std::vector<std::pair<std::string, std::string>> configs;
  // (dataset, text): "tokenizer/vocab.json", ..., tpumesh_training.json.
  std::vector<std::pair<std::string, std::string>> texts;
  const std::string* Config(const std::string& component) const;
};
StatusOr<DiffusersTexts> ReadDiffusersTexts(const std::string& folder);

// Checks that the texts and a component's tensors make a model that loads:
// the loader's own checks on the configs and the tokenizers, and
// check_tensors(component, manifest) for each component's parameters (names,
// dtypes, shapes). Nothing is written.
using ManifestCheck =
    std::function<Status(const std::string& component, const std::vector<models::ParamSpec>& manifest)>;
Status CheckModelBuilds(const DiffusersTexts& texts, const ManifestCheck& check_tensors);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_CONVERT_H_
