// `tpumesh convert SOURCE -o model.h5 [--dtype f32|bf16]`: SOURCE is a
// diffusers folder (pipeline/convert.h) or a single-file .safetensors
// checkpoint (pipeline/single_file.h: --arch, --config, --prediction-type).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "io/run_files.h"
#include "mesh/device.h"
#include "pipeline/convert.h"
#include "pipeline/single_file.h"
#include "tools/commands.h"

namespace tpumesh::tools {
namespace {

struct ConvertOptions {
  std::string folder;
  std::string output;
  std::string dtype = "f32";
  pipeline::SingleFileOptions single;
  bool quiet = false;
};

Status RunConvert(const ConvertOptions& opt) {
  std::error_code ec;
  const bool folder = std::filesystem::is_directory(opt.folder, ec);
  const bool single = !folder && std::filesystem::is_regular_file(opt.folder, ec);
  if (!folder && !single) {
    // A pickle is refused by its name whether or not it exists.
    TPUMESH_RETURN_IF_ERROR(pipeline::RefusePickle(opt.folder));
    return (std::filesystem::exists(opt.folder, ec) ? InvalidArgumentError : NotFoundError)(
        opt.folder + ": not a directory nor a regular file (a diffusers folder or a single-file .safetensors "
        "checkpoint is expected)");
  }
  if (folder) {
    for (const auto& [flag, value] : {std::pair{"--arch", opt.single.arch}, {"--config", opt.single.config_dir},
                                      {"--prediction-type", opt.single.prediction_type}})
      if (!value.empty())
        return InvalidArgumentError(std::string(flag) + ": only for a single-file checkpoint; " + opt.folder +
                                    " is a diffusers folder");
  }
  RunFiles files;
  files.outputs = {{"--output", opt.output}};
  if (folder) {
    files.input_dirs = {{"the diffusers folder", opt.folder}};
    files.inputs = {{"the diffusers folder", opt.folder}};
  } else {
    files.inputs = {{"the checkpoint", opt.folder}};
    if (!opt.single.config_dir.empty()) files.input_dirs = {{"--config", opt.single.config_dir}};
  }
  TPUMESH_RETURN_IF_ERROR(CheckRunFiles(files));
  TPUMESH_ASSIGN_OR_RETURN(mesh::DType dtype, mesh::ParseDType(opt.dtype));
  if (dtype != mesh::DType::kF32 && dtype != mesh::DType::kBF16)
    return InvalidArgumentError("--dtype must be f32 or bf16, not '" + opt.dtype + "'");
  // A live counter on a terminal; one line per component otherwise.
  const bool tty = isatty(STDERR_FILENO);
  auto progress = [&](const std::string& comp, int done, int total) {
    if (opt.quiet || (!tty && done != total)) return;
    std::fprintf(stderr, "%sconverting %-12s %4d/%d tensors", tty ? "\r" : "", comp.c_str(), done, total);
    if (done == total) std::fprintf(stderr, "\n");
  };
  TPUMESH_ASSIGN_OR_RETURN(
      pipeline::ConvertStats s,
      folder ? pipeline::ConvertDiffusersFolder(opt.folder, opt.output, dtype, progress)
             : pipeline::ConvertSingleFile(opt.folder, opt.output, dtype, opt.single, progress));
  std::cout << "wrote " << opt.output << ": " << s.tensors << " tensors, " << s.parameters
            << " parameters, " << mesh::FormatBytes(s.bytes_written) << " as " << opt.dtype;
  if (s.skipped) std::cout << " (skipped " << s.skipped << " non-float buffers)";
  if (s.unused) {
    std::cout << " (" << s.unused << " tensors of the checkpoint unused, e.g.";
    for (const std::string& n : s.unused_examples) std::cout << " " << n;
    std::cout << ")";
  }
  std::cout << "\n";
  return OkStatus();
}

}  // namespace

void RegisterConvert(CLI::App& app, RunFn* run) {
  auto opt = std::make_shared<ConvertOptions>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "Convert a diffusers Stable Diffusion folder, or a single-file .safetensors checkpoint in the original "
      "(LDM / SGM) key layout (SD 1.x, SD 2.x, SDXL base), into one tpumesh model file (HDF5).");
  cmd->add_option("SOURCE", opt->folder,
                  "A diffusers folder (model_index.json, text_encoder/, unet/, vae/, tokenizer/, scheduler/), or a "
                  "single-file CKPT.safetensors, mapped as diffusers' from_single_file maps it. Pickles (.ckpt, "
                  ".pt, ...) are refused unread")
      ->required();
  cmd->add_option("-o,--output", opt->output, "Model file to write (written atomically)")->required();
  cmd->add_option("--dtype", opt->dtype, "Parameter storage: f32 or bf16")->capture_default_str();
  cmd->add_option("--arch", opt->single.arch,
                  "Single file: the built-in architecture whose configs to use (sd15, sd21, sdxl, tiny); default: "
                  "detected from the tensors (SD 1.x -> sd15, SD 2.x -> sd21, SDXL -> sdxl; a 9-channel UNet is an "
                  "inpainting model). The tokenizer is then the OpenAI CLIP vocabulary built into tpumesh (tiny: "
                  "the tiny one)");
  cmd->add_option("--config", opt->single.config_dir,
                  "Single file: a diffusers folder whose configs, tokenizer(s) and scheduler to use instead (as "
                  "from_single_file(config=DIR)); its weights are not read");
  cmd->add_option("--prediction-type", opt->single.prediction_type,
                  "Single file: the scheduler's prediction_type (epsilon, v_prediction, sample); default: the "
                  "config's, for an SD 2.x file v_prediction unless its global_step is 875000 (SD 2.x base) or it "
                  "is an inpainting model");
  cmd->add_flag("-q,--quiet", opt->quiet, "No progress on stderr");
  cmd->callback([opt, run] { *run = [opt] { return RunConvert(*opt); }; });
}

}  // namespace tpumesh::tools
