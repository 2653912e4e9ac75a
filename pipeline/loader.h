// Builds the models and the tokenizer of a tpumesh model file
// (model_file.h): configs parsed and checked, every parameter of the
// config's manifest read (f32) and shape-checked, before any compute.
//
// Contract: errors name the file and what is wrong — a component missing
// ("model.h5: no dataset unet/config.json"), a bad config value, a missing
// or mis-shaped tensor — as one Status.
#ifndef TPUMESH_PIPELINE_LOADER_H_
#define TPUMESH_PIPELINE_LOADER_H_

#include "base/status.h"
#include "io/model_file.h"
#include "models/clip.h"
#include "models/unet.h"
#include "models/vae.h"
#include "text/tokenizer.h"

namespace tpumesh::pipeline {

StatusOr<ClipTokenizer> LoadTokenizer(const ModelFile& file);
StatusOr<models::ClipTextModel> LoadTextEncoder(const ModelFile& file);
StatusOr<models::UNetModel> LoadUNet(const ModelFile& file);
StatusOr<models::VaeModel> LoadVae(const ModelFile& file);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_LOADER_H_
