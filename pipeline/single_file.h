// `tpumesh convert CKPT.safetensors`: a single-file Stable Diffusion
// checkpoint in the original (LDM / CompVis / SGM) key layout -> one tpumesh
// model file (model_file.h), with the tensors named, split and reshaped as
// diffusers 0.42.1's from_single_file maps them
// (diffusers/loaders/single_file_utils.py).
//
// Contract:
// - Layouts, detected from the tensor names: SD 1.x (the UNet under
//   model.diffusion_model., the VAE under first_stage_model. or vae., CLIP
//   under cond_stage_model.transformer.), SD 2.x (OpenCLIP under
//   cond_stage_model.model.) and SDXL base (CLIP under
//   conditioner.embedders.0.transformer., OpenCLIP under
//   conditioner.embedders.1.model.). Anything else is InvalidArgument naming
//   what was looked for (an SDXL refiner and a diffusers component file are
//   named as such).
// - Configs, tokenizers and scheduler: with options.config_dir, a diffusers
//   folder's (as from_single_file(config=DIR)); else a built-in architecture
//   (models/architectures.h): options.arch, or the layout's (sd15, sd21,
//   sdxl), with the OpenAI CLIP vocabulary embedded in the binary
//   (clip_vocab.h; "tiny" uses the embedded tiny tokenizer). The file's
//   layout must be the architecture's / folder's (SDXL or not; CLIP or
//   OpenCLIP).
// - A UNet of 9 input channels on the built-in path is an inpainting model,
//   as diffusers infers it: the architecture's configs with in_channels 9
//   (SD 2.x: sample_size 64) and an ...InpaintPipeline; 8 (InstructPix2Pix)
//   is Unimplemented.
// - Prediction type: options.prediction_type when set; else the config
//   folder's scheduler; else the architecture's, with diffusers' rule for an
//   SD 2.x file: v_prediction, epsilon when the file holds a global_step of
//   875000 (SD 2.x base) or is an inpainting model.
// - Mapping, as diffusers: the UNet's input/middle/output blocks by the
//   config's layers_per_block (label_emb -> add_embedding for SDXL), the VAE's
//   down/up blocks by its block count (its attention's 1x1 convs squeezed to
//   matrices), CLIP by removing the prefix, OpenCLIP renamed with its fused
//   in_proj split into q/k/v at text_projection's rows (else the hidden size)
//   and its text_projection transposed (SD 2.x: resblocks.23 and
//   text_projection ignored). Tensors no rule names (EMA copies, the noise
//   schedule, logit_scale, position_ids, layers beyond the config's) are
//   counted as unused, not written. Every parameter the configs need must be
//   mapped from the file with its shape and a float dtype; the configs,
//   tokenizers and tensors pass the loader's checks before the output is
//   created; the output is written atomically, one tensor at a time.
// - Pickles are refused unread: by extension (.ckpt .pt .pth .bin .pkl
//   .pickle) and by magic bytes (a zip, torch's format; a pickle opcode).
#ifndef TPUMESH_PIPELINE_SINGLE_FILE_H_
#define TPUMESH_PIPELINE_SINGLE_FILE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "io/safetensors.h"
#include "mesh/array.h"
#include "pipeline/convert.h"

namespace tpumesh::pipeline {

enum class CheckpointLayout { kSd1, kSd2, kSdxl };
// "SD 1.x (CLIP under cond_stage_model.transformer.)" and the like.
std::string LayoutDescription(CheckpointLayout layout);

struct SingleFileOptions {
  std::string arch;             // a built-in architecture; empty: the layout's
  std::string config_dir;       // a diffusers folder; excludes arch
  std::string prediction_type;  // epsilon | v_prediction | sample; empty: the rule
};

// InvalidArgument for a pickle checkpoint (by extension or magic bytes),
// naming the file; OK for anything else (the file may not exist). Only a
// regular file is opened for its magic bytes (never a FIFO).
Status RefusePickle(const std::string& path);

StatusOr<CheckpointLayout> DetectLayout(const SafetensorsFile& file);

// One parameter of the model file and where it comes from.
struct MappedTensor {
  enum class Op { kCopy, kSqueeze, kTranspose, kRows };
  std::string component;  // "unet"
  std::string name;       // diffusers' name, "down_blocks.0.resnets.0.conv1.weight"
  std::string source;     // the file's tensor
  Op op = Op::kCopy;
  int64_t row_begin = 0, row_end = 0;  // kRows: rows [begin, end) of the source
  mesh::Shape shape;                   // after op
};
struct LdmMapping {
  std::vector<MappedTensor> tensors;
  std::vector<std::string> unused;  // file tensors no rule maps
};
// Maps every tensor of `file` for the components whose configs `configs`
// holds (texts as ReadDiffusersTexts gives them).
StatusOr<LdmMapping> MapLdmCheckpoint(const SafetensorsFile& file, const DiffusersTexts& configs);

// Everything ConvertSingleFile decides and checks before it writes: the
// layout, the texts (configs, tokenizers, scheduler) and, per component in
// the order of texts.configs, the tensors to write (exactly its manifest, in
// file order), all checked by the loader's checks (CheckModelBuilds).
struct SingleFilePlan {
  CheckpointLayout layout = CheckpointLayout::kSd1;
  DiffusersTexts texts;
  std::vector<std::pair<std::string, std::vector<MappedTensor>>> components;
  std::vector<std::string> unused;  // file tensors no rule maps
};
StatusOr<SingleFilePlan> PlanSingleFile(const SafetensorsFile& file, const SingleFileOptions& options);

StatusOr<ConvertStats> ConvertSingleFile(
    const std::string& checkpoint, const std::string& output, mesh::DType dtype, const SingleFileOptions& options,
    const std::function<void(const std::string&, int, int)>& progress = {});

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_SINGLE_FILE_H_
