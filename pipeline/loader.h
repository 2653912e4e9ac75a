// Builds the models and the tokenizer of a tpumesh model file
// (model_file.h): configs parsed and checked, every parameter of the
// config's manifest read (f32) and shape-checked, before any compute.
//
// Contract: errors name the file and what is wrong — a component missing
// ("model.h5: no dataset unet/config.json"), a bad config value, a missing
// or mis-shaped tensor — as one Status.
#ifndef TPUMESH_PIPELINE_LOADER_H_
#define TPUMESH_PIPELINE_LOADER_H_

#include <memory>
#include <string>

#include "base/host_memory.h"
#include "base/status.h"
#include "io/model_file.h"
#include "mesh/mesh.h"
#include "models/clip.h"
#include "models/params.h"
#include "models/unet.h"
#include "models/vae.h"
#include "pipeline/lora.h"
#include "pipeline/txt2img.h"
#include "text/tokenizer.h"

namespace tpumesh::pipeline {

// The model ranks whose shares this process holds: those of its devices
// (mesh.is_local; AxisIndices(d)[1] is a device's model rank). One process
// holds every model rank.
models::ModelRanks LocalModelRanks(const mesh::Mesh& mesh);

// component: "tokenizer" or "tokenizer_2".
StatusOr<ClipTokenizer> LoadTokenizer(const ModelFile& file, const std::string& component = "tokenizer");
// One component; model_ranks and loras as for LoadTextToImage below.
StatusOr<models::ClipTextModel> LoadTextEncoder(const ModelFile& file, const models::ModelRanks& model_ranks = 1,
                                                const LoraSet* loras = nullptr);
StatusOr<models::UNetModel> LoadUNet(const ModelFile& file, const models::ModelRanks& model_ranks = 1,
                                     const LoraSet* loras = nullptr);
StatusOr<models::VaeModel> LoadVae(const ModelFile& file, const models::ModelRanks& model_ranks = 1);
// The whole text-to-image model: its family (model_index.json), every
// component, its tokenizer(s) and scheduler config.
// model_ranks: the size of the mesh's model axis (an int: every model rank
// held here, one process) and which of its ranks this process holds
// (LocalModelRanks of the mesh under MPI). Each component's parameters are
// split into model_ranks.count shares (models/params.h ShardBuilder); only
// the local ranks' shares are kept, the others are lazy zeros of their
// shapes that hold no memory and must never be read (models::ModelRanks).
// Tensors are read one at a time, each cut into the local shares before the
// next: a process's peak host memory for the weights is its shares (the
// parameters no model rank splits held whole) plus one tensor (plus, with
// loras, the weights they change, held whole until fused).
// Every tensor is still read and checked whole on every process, so each
// finds the same errors.
// loras (pipeline/lora.h, opened against this file): fused into each
// component's weights as read, before the split, so each share holds its
// part of the fused weights.
StatusOr<std::unique_ptr<TextToImage>> LoadTextToImage(const ModelFile& file,
                                                       const models::ModelRanks& model_ranks = 1,
                                                       const LoraSet* loras = nullptr);
// Host memory a loaded model takes before any compute: every parameter as
// the loader holds it (bf16 where the file stores bf16 and the models allow
// it, else f32) and the packed bf16 copies of the Linear and conv weights
// that precision default builds at the first call (highest: f32 copies,
// twice that).
struct HostMemoryEstimate {
  int64_t f32_bytes = 0, bf16_bytes = 0, packed_bytes = 0;
  int64_t total() const { return f32_bytes + bf16_bytes + packed_bytes; }
};
// With model_ranks (LocalModelRanks under MPI): what this process holds of
// it, each split parameter for the units of its local model ranks (the
// unsplit ones whole); a model whose configs do not parse is counted whole.
StatusOr<HostMemoryEstimate> EstimateHostMemory(const ModelFile& file, const models::ModelRanks& model_ranks = 1);
// NaN or Inf anywhere in a f32 or bf16 tensor: InvalidArgument naming
// `where` (e.g. "model.h5: tensor unet/conv_in.weight") and the index.
Status CheckFiniteTensor(const std::string& where, const mesh::Array& a);
using ::tpumesh::HostMemoryAvailable;  // base/host_memory.h

// Every config text of the file (the components a model has), for a dry run.
StatusOr<ModelConfigs> ReadModelConfigs(const ModelFile& file);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_LOADER_H_
