// `tpumesh eval --model M.h5 --component C --input IN.h5 --output OUT.h5
//  [--precision default|highest] [--devices N]`.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "pipeline/eval.h"
#include "tools/commands.h"

namespace tpumesh::tools {
namespace {

struct EvalCmdOptions {
  pipeline::EvalOptions eval;
  std::string precision = "highest";
};

Status RunEvalCommand(EvalCmdOptions opt) {
  TPUMESH_ASSIGN_OR_RETURN(opt.eval.precision, models::ParsePrecision(opt.precision));
  if (opt.eval.devices < 1) return InvalidArgumentError("--devices must be >= 1");
  TPUMESH_ASSIGN_OR_RETURN(pipeline::EvalStats s, pipeline::RunEval(opt.eval));
  std::cout << "wrote " << opt.eval.output << ": " << opt.eval.component << " on a batch of " << s.batch;
  if (opt.eval.component != "tokenizer") {
    char buf[128];
    std::snprintf(buf, sizeof buf, " over %d device(s), precision=%s, forward %.3f s host (%.3f s with loading)",
                  opt.eval.devices, opt.precision.c_str(), s.host_seconds, s.total_seconds);
    std::cout << buf;
    std::snprintf(buf, sizeof buf, "; modelled on %s: %.6f s", s.report.chip.name.c_str(), s.modelled_seconds);
    std::cout << buf;
  }
  std::cout << "\n";
  if (!opt.eval.report.empty() || !opt.eval.trace.empty()) std::cout << pipeline::ReportTable(s.report);
  return OkStatus();
}

}  // namespace

void RegisterEval(CLI::App& app, RunFn* run) {
  auto opt = std::make_shared<EvalCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Run one model component on inputs from an HDF5 file (batch sharded over the devices).");
  cmd->add_option("--model", opt->eval.model, "Model file (tpumesh convert / init)")->required();
  cmd->add_option("--component", opt->eval.component,
                  "tokenizer | text_encoder | unet | vae_decoder | vae_encoder")->required();
  cmd->add_option("--input", opt->eval.input,
                  "HDF5 inputs: prompts | input_ids | sample, timestep, encoder_hidden_states | latents | sample")
      ->required();
  cmd->add_option("--output", opt->eval.output, "HDF5 file to write (atomically)")->required();
  cmd->add_option("--precision", opt->precision, "default (bf16 operands, f32 accumulation) or highest (f32)")
      ->capture_default_str();
  cmd->add_option("--devices", opt->eval.devices, "Emulated devices to shard the batch over")->capture_default_str();
  cmd->add_option("--chip", opt->eval.chip, "Chip: v5e, v4, v2 or a chip JSON file")->capture_default_str();
  cmd->add_option("--report", opt->eval.report, "Write the chip's view of the run as JSON");
  cmd->add_option("--trace", opt->eval.trace, "Write a Chrome trace (Perfetto)");
  cmd->callback([opt, run] { *run = [opt] { return RunEvalCommand(*opt); }; });
}

}  // namespace tpumesh::tools
