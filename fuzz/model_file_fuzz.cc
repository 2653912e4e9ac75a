// A model file (HDF5): configs, tokenizers and every tensor as the loader
// reads them. With TPUMESH_FUZZ_WRITE_SEED=PATH it writes the seed instead
// and exits: the tiny architecture's configs and tokenizer without tensors,
// small enough to mutate.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_util.h"
#include "io/model_file.h"
#include "models/architectures.h"
#include "pipeline/loader.h"
#include "text/embedded.h"

namespace {

int WriteSeed(const char* path) {
  auto arch = tpumesh::models::BuiltinArchitecture("tiny");
  auto w = tpumesh::pipeline::ModelFileWriter::Create(path);
  if (!arch.ok() || !w.ok()) return 1;
  namespace e = tpumesh::pipeline::embedded;
  const std::pair<const char*, std::string> texts[] = {
      {"model_index.json", arch->model_index},
      {"scheduler/scheduler_config.json", arch->scheduler},
      {"text_encoder/config.json", arch->text_encoder},
      {"unet/config.json", arch->unet},
      {"vae/config.json", arch->vae},
      {"tokenizer/vocab.json", std::string(e::TinyTokenizer_vocab_json())},
      {"tokenizer/merges.txt", std::string(e::TinyTokenizer_merges_txt())},
  };
  for (const auto& [name, text] : texts)
    if (!(*w)->WriteText(name, text).ok()) return 1;
  return (*w)->Commit().ok() ? 0 : 1;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* seed = std::getenv("TPUMESH_FUZZ_WRITE_SEED")) std::exit(WriteSeed(seed));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpumesh::fuzz::MemFile f(data, size);
  auto file = tpumesh::pipeline::ModelFile::Open(f.path());
  if (!file.ok()) return 0;
  (void)tpumesh::pipeline::EstimateHostMemory(**file);
  (void)tpumesh::pipeline::LoadTextToImage(**file);
  return 0;
}
