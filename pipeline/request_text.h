// A text-to-image request as a command line or the Python module gives it
// (the flags' values: numbers, strings, optionals), parsed and checked once
// for both: the CLI's generate and simulate (tools/request_flags.h declares
// the flags), and tpumesh.generate / simulate / eval (python/).
//
// Contract: every parse error is InvalidArgument naming the flag as the CLI
// spells it ("--guidance", "--seed", "--lora"), so that the CLI and Python
// print the same one-line message.
#ifndef TPUMESH_PIPELINE_REQUEST_TEXT_H_
#define TPUMESH_PIPELINE_REQUEST_TEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "pipeline/lora.h"
#include "pipeline/txt2img.h"

namespace tpumesh::pipeline {

// Guidance past a few tens already saturates every image; 1000 is far past
// any use and keeps u + G (c - u) finite. GuidanceRange names the range in
// messages and help: "0 to 1000".
inline constexpr float kMaxGuidance = 1000;
std::string GuidanceRange();

struct RequestFlags {
  GenerateRequest request;  // defaults and the plain values
  std::optional<float> guidance;
  std::vector<std::string> scheduler_opts;
  std::string precision = "default";
  std::string original_size, crops_coords_top_left, target_size;
};

// img2img and inpainting (generate): the init images, masks and strength.
struct ImageInputFlags {
  std::vector<std::string> init_images, masks;
  std::optional<double> strength;
};
// Reads the PNGs into the request (an init image must be 8-bit RGB; a mask
// any 8-bit grey, RGB or palette PNG, read as grey levels); errors name the
// flag and the file.
Status ReadImageInputs(const ImageInputFlags& flags, GenerateRequest* request);
// Copies the parsed flags into flags->request (InvalidArgument naming the
// flag for a malformed value) and returns it.
StatusOr<GenerateRequest> ParseRequestFlags(const RequestFlags& flags);

// A seed as JAX takes it (generate's, init's and run's --seed): a whole number from
// 0 to 2^64 - 1, nothing else (strtoull, and CLI11's own parsing, would wrap
// "-1" to 2^64 - 1 and clamp 2^64 silently).
StatusOr<uint64_t> ParseSeed(const std::string& text);
// Each --lora parsed (ParseLoraSpec); InvalidArgument naming the
// flag for a bad one.
StatusOr<std::vector<LoraSpec>> ParseLoraFlags(const std::vector<std::string>& loras);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_REQUEST_TEXT_H_
