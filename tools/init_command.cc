// `tpumesh init --arch sd15|sd21|sdxl|tiny [--seed S] [--dtype f32|bf16]
//  [--tokenizer DIR] -o model.h5`.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "io/run_files.h"
#include "mesh/device.h"
#include "pipeline/init_model.h"
#include "tools/commands.h"
#include "tools/request_flags.h"

namespace tpumesh::tools {
namespace {

struct InitCmdOptions {
  pipeline::InitOptions init;
  std::string seed = "0";  // parsed strictly: 0 .. 2^64 - 1
  std::string dtype = "f32";
  bool quiet = false;
};

Status RunInit(InitCmdOptions opt) {
  RunFiles files;
  files.outputs = {{"--output", opt.init.output}};
  files.input_dirs = {{"--tokenizer", opt.init.tokenizer_dir}};
  TPUMESH_RETURN_IF_ERROR(CheckRunFiles(files));
  TPUMESH_ASSIGN_OR_RETURN(opt.init.seed, pipeline::ParseSeed(opt.seed));
  TPUMESH_ASSIGN_OR_RETURN(opt.init.dtype, mesh::ParseDType(opt.dtype));
  if (opt.init.dtype != mesh::DType::kF32 && opt.init.dtype != mesh::DType::kBF16)
    return InvalidArgumentError("--dtype must be f32 or bf16, not '" + opt.dtype + "'");
  const bool tty = isatty(STDERR_FILENO);
  auto progress = [&](const std::string& comp, int done, int total) {
    if (opt.quiet || (!tty && done != total)) return;
    std::fprintf(stderr, "%sinitialising %-14s %4d/%d tensors", tty ? "\r" : "", comp.c_str(), done, total);
    if (done == total) std::fprintf(stderr, "\n");
  };
  TPUMESH_ASSIGN_OR_RETURN(pipeline::InitStats s, pipeline::InitModel(opt.init, progress));
  std::cout << "wrote " << opt.init.output << ": " << opt.init.arch << " with random weights (seed "
            << opt.init.seed << "), " << s.tensors << " tensors, " << s.parameters << " parameters, "
            << mesh::FormatBytes(s.bytes) << " as " << opt.dtype
            << (opt.init.tokenizer_dir.empty() ? "; the embedded tiny tokenizer (pass --tokenizer DIR for another)"
                                               : "; tokenizer from " + opt.init.tokenizer_dir)
            << "\n";
  return OkStatus();
}

}  // namespace

void RegisterInit(CLI::App& app, RunFn* run) {
  auto opt = std::make_shared<InitCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "init", "Write a model file of a built-in architecture with random weights (no download).");
  cmd->add_option("--arch", opt->init.arch, "Architecture: sd15, sd21, sdxl or tiny (a tiny SD 1.x-shaped test model)")
      ->capture_default_str();
  cmd->add_option("--seed", opt->seed, "Seed of the random weights, 0 to 18446744073709551615")->capture_default_str();
  cmd->add_option("--dtype", opt->dtype, "Parameter storage: f32 or bf16")->capture_default_str();
  cmd->add_option("--tokenizer", opt->init.tokenizer_dir,
                  "Folder with vocab.json and merges.txt to include (default: the embedded tiny tokenizer); "
                  "SDXL's tokenizer_2 is the same, padded with \"!\"");
  cmd->add_option("-o,--output", opt->init.output, "Model file to write (written atomically)")->required();
  cmd->add_flag("-q,--quiet", opt->quiet, "No progress on stderr");
  cmd->callback([opt, run] { *run = [opt] { return RunInit(*opt); }; });
}

}  // namespace tpumesh::tools
