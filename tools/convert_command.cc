// `tpumesh convert DIFFUSERS_DIR -o model.h5 [--dtype f32|bf16]`.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "mesh/device.h"
#include "pipeline/convert.h"
#include "tools/commands.h"
#include "tools/report_output.h"

namespace tpumesh::tools {
namespace {

struct ConvertOptions {
  std::string folder;
  std::string output;
  std::string dtype = "f32";
  bool quiet = false;
};

Status RunConvert(const ConvertOptions& opt) {
  RunFiles files;
  files.outputs = {{"--output", opt.output}};
  files.input_dirs = {{"the diffusers folder", opt.folder}};
  files.inputs = {{"the diffusers folder", opt.folder}};
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
  TPUMESH_ASSIGN_OR_RETURN(pipeline::ConvertStats s,
                           pipeline::ConvertDiffusersFolder(opt.folder, opt.output, dtype, progress));
  std::cout << "wrote " << opt.output << ": " << s.tensors << " tensors, " << s.parameters
            << " parameters, " << mesh::FormatBytes(s.bytes_written) << " as " << opt.dtype;
  if (s.skipped) std::cout << " (skipped " << s.skipped << " non-float buffers)";
  std::cout << "\n";
  return OkStatus();
}

}  // namespace

void RegisterConvert(CLI::App& app, RunFn* run) {
  auto opt = std::make_shared<ConvertOptions>();
  CLI::App* cmd = app.add_subcommand(
      "convert", "Convert a diffusers Stable Diffusion folder into one tpumesh model file (HDF5).");
  cmd->add_option("DIFFUSERS_DIR", opt->folder,
                  "Folder with model_index.json, text_encoder/, unet/, vae/, tokenizer/, scheduler/")
      ->required();
  cmd->add_option("-o,--output", opt->output, "Model file to write (written atomically)")->required();
  cmd->add_option("--dtype", opt->dtype, "Parameter storage: f32 or bf16")->capture_default_str();
  cmd->add_flag("-q,--quiet", opt->quiet, "No progress on stderr");
  cmd->callback([opt, run] { *run = [opt] { return RunConvert(*opt); }; });
}

}  // namespace tpumesh::tools
