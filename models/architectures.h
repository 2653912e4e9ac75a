// Built-in architectures: the real diffusers / transformers configs of
// Stable Diffusion 1.5, 2.1 and SDXL base 1.0, and "tiny" (the SD 1.x-shaped
// test model, the same configs as the tiny-sd-a reference). They let
// `tpumesh init` make a model file with random weights and `tpumesh simulate`
// price a model, with nothing downloaded.
//
// Contract: the config texts are data copied from the published model
// repositories (configs, not code); every one parses with configs.h and its
// parameter count equals the published model's (tests check SD 1.5, 2.1 and
// SDXL against their known counts).
#ifndef TPUMESH_MODELS_ARCHITECTURES_H_
#define TPUMESH_MODELS_ARCHITECTURES_H_

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tpumesh::models {

struct Architecture {
  std::string name;                 // "sd15", "sd21", "sdxl", "tiny"
  std::string description;
  std::string model_index;          // model_index.json
  std::string text_encoder;         // text_encoder/config.json
  std::string text_encoder_2;       // SDXL only, else empty
  std::string unet;                 // unet/config.json
  std::string vae;                  // vae/config.json
  std::string scheduler;            // scheduler/scheduler_config.json
  int default_image_size = 512;     // pixels
};

std::vector<std::string> ArchitectureNames();  // {"sd15", "sd21", "sdxl", "tiny"}
StatusOr<Architecture> BuiltinArchitecture(std::string_view name);

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_ARCHITECTURES_H_
