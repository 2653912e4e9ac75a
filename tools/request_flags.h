// The flags that shape a text-to-image request (pipeline::GenerateRequest),
// declared once for every command that runs or prices one (generate,
// simulate): steps, guidance, scheduler and its overrides, size, batch per
// device, precision and SDXL's size conditioning.
#ifndef TPUMESH_TOOLS_REQUEST_FLAGS_H_
#define TPUMESH_TOOLS_REQUEST_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/status.h"
#include "pipeline/lora.h"
#include "pipeline/txt2img.h"

namespace tpumesh::tools {

struct RequestFlags {
  pipeline::GenerateRequest request;  // defaults and the plain values
  std::optional<float> guidance;
  std::vector<std::string> scheduler_opts;
  std::string precision = "default";
  std::string original_size, crops_coords_top_left, target_size;
};

void AddRequestFlags(CLI::App* cmd, RequestFlags* flags);

// img2img and inpainting (generate): the init images, masks and strength.
struct ImageInputFlags {
  std::vector<std::string> init_images, masks;
  std::optional<double> strength;
};
void AddImageInputFlags(CLI::App* cmd, ImageInputFlags* flags);
// Reads the PNGs into the request (an init image must be 8-bit RGB; a mask
// any 8-bit grey, RGB or palette PNG, read as grey levels); errors name the
// flag and the file.
Status ReadImageInputs(const ImageInputFlags& flags, pipeline::GenerateRequest* request);
// Copies the parsed flags into flags->request (InvalidArgument naming the
// flag for a malformed value) and returns it.
StatusOr<pipeline::GenerateRequest> ParseRequestFlags(const RequestFlags& flags);

// A seed as JAX takes it (generate's, init's and run's --seed): a whole number from
// 0 to 2^64 - 1, nothing else (strtoull, and CLI11's own parsing, would wrap
// "-1" to 2^64 - 1 and clamp 2^64 silently).
StatusOr<uint64_t> ParseSeed(const std::string& text);
// ParseSeed as a CLI11 check, for a --seed held as uint64_t (run's).
CLI::Validator SeedNumber();

// --lora FILE[:SCALE], repeatable: the LoRAs a command that loads a model's
// weights (generate, eval) fuses into them (pipeline/lora.h).
void AddLoraFlag(CLI::App* cmd, std::vector<std::string>* loras);
// Each --lora parsed (pipeline::ParseLoraSpec); InvalidArgument naming the
// flag for a bad one.
StatusOr<std::vector<pipeline::LoraSpec>> ParseLoraFlags(const std::vector<std::string>& loras);

}  // namespace tpumesh::tools

#endif  // TPUMESH_TOOLS_REQUEST_FLAGS_H_
