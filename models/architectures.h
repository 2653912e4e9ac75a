// Built-in architectures: the real diffusers / transformers configs of
// Stable Diffusion 1.5, 2.1, SDXL base 1.0, FLUX.1-dev and FLUX.1-schnell,
// "tiny" (the SD 1.x-shaped test model, the same configs as the tiny-sd-a
// reference) and "flux-tiny" (a Flux-shaped test model small enough to
// compute on a host). They let
// `tpumesh init` make a model file with random weights and `tpumesh simulate`
// price a model, with nothing downloaded.
//
// Contract: the config texts are data copied from the published model
// repositories (configs, not code); every one parses with configs.h and its
// parameter count equals the published model's (tests check SD 1.5, 2.1,
// SDXL and Flux's components against their known counts).
#ifndef TPUMESH_MODELS_ARCHITECTURES_H_
#define TPUMESH_MODELS_ARCHITECTURES_H_

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tpumesh::models {

struct Architecture {
  std::string name;                 // "sd15", "sd21", "sdxl", "tiny", "flux-dev", ...
  std::string description;
  std::string model_index;          // model_index.json
  std::string text_encoder;         // text_encoder/config.json
  std::string text_encoder_2;       // SDXL's second CLIP, Flux's T5; else empty
  std::string unet;                 // unet/config.json (empty for Flux)
  std::string transformer;          // transformer/config.json (Flux only)
  std::string vae;                  // vae/config.json
  std::string scheduler;            // scheduler/scheduler_config.json
  int default_image_size = 512;     // pixels
};

// {"sd15", "sd21", "sdxl", "tiny", "flux-dev", "flux-schnell", "flux-tiny"}
std::vector<std::string> ArchitectureNames();
StatusOr<Architecture> BuiltinArchitecture(std::string_view name);

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_ARCHITECTURES_H_
