// The flags that shape a text-to-image request (pipeline::GenerateRequest),
// declared once for every command that runs or prices one (generate,
// simulate): steps, guidance, scheduler and its overrides, size, batch per
// device, precision and SDXL's size conditioning; img2img's and LoRA's; and
// run's --seed check. The values are parsed and checked by
// pipeline/request_text.h, which the Python module shares.
#ifndef TPUMESH_TOOLS_REQUEST_FLAGS_H_
#define TPUMESH_TOOLS_REQUEST_FLAGS_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "pipeline/request_text.h"

namespace tpumesh::tools {

void AddRequestFlags(CLI::App* cmd, pipeline::RequestFlags* flags);

// img2img and inpainting (generate): the init images, masks and strength.
void AddImageInputFlags(CLI::App* cmd, pipeline::ImageInputFlags* flags);

// pipeline::ParseSeed as a CLI11 check, for a --seed held as uint64_t (run's).
CLI::Validator SeedNumber();

// --lora FILE[:SCALE], repeatable: the LoRAs a command that loads a model's
// weights (generate, eval) fuses into them (pipeline/lora.h).
void AddLoraFlag(CLI::App* cmd, std::vector<std::string>* loras);

}  // namespace tpumesh::tools

#endif  // TPUMESH_TOOLS_REQUEST_FLAGS_H_
