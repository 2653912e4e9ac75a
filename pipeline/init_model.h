// `tpumesh init`: a model file of a built-in architecture (models/
// architectures.h) with random weights, for benchmarks and hardware studies
// without downloading anything; `tiny` is the tiny SD 1.x-shaped test model
// (the embedded default model, pipeline/default_model.h, is a trained one).
//
// Contract: weights are deterministic in (seed, parameter name) — the same
// seed gives the same file bits whatever the order of writing. Conv and
// linear weights ~ N(0, 1/fan_in), token and position embeddings ~ N(0,
// 0.02^2), norm scales 1, biases 0: activations keep unit scale through the
// network, so timings and numerics are representative. The file is written
// atomically (model_file.h).
#ifndef TPUMESH_PIPELINE_INIT_MODEL_H_
#define TPUMESH_PIPELINE_INIT_MODEL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "mesh/array.h"

namespace tpumesh::pipeline {

struct InitOptions {
  std::string arch = "tiny";   // sd15 | sd21 | sdxl | tiny
  uint64_t seed = 0;
  mesh::DType dtype = mesh::DType::kF32;
  // A folder with vocab.json and merges.txt (e.g. a diffusers tokenizer/).
  // Empty: the embedded tiny tokenizer (1000 ids, within every
  // architecture's vocabulary). SDXL's tokenizer_2 is the same vocabulary and
  // merges padded with "!", as stabilityai's tokenizer_2 is.
  std::string tokenizer_dir;
  std::string output;
};

struct InitStats {
  int64_t tensors = 0;
  int64_t parameters = 0;
  int64_t bytes = 0;
};

// SDXL's tokenizer_2 from tokenizer/'s texts ((dataset, text) pairs named
// "tokenizer/vocab.json" ...): the same vocabulary and merges, padded with
// "!" as stabilityai's tokenizer_2 is — pad_token "!" in both JSON configs,
// and "!" an added token of its own id in added_tokens_decoder, so that
// transformers splits it out of prompts. Returned as "tokenizer_2/..." pairs.
StatusOr<std::vector<std::pair<std::string, std::string>>> SdxlTokenizer2Texts(
    const std::vector<std::pair<std::string, std::string>>& tokenizer);

// progress(component, tensors done, tensors total); may be empty.
StatusOr<InitStats> InitModel(const InitOptions& options,
                              const std::function<void(const std::string&, int, int)>& progress = {});

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_INIT_MODEL_H_
