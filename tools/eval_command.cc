// `tpumesh eval --model M.h5 --component C --input IN.h5 --output OUT.h5
//  [--precision default|highest] [--lora FILE[:SCALE] ...] [device flags: --mesh data=D,model=M ...]`.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "io/atomic_file.h"
#include "io/run_files.h"
#include "pipeline/eval.h"
#include "report/report_files.h"
#include "tools/commands.h"
#include "tools/device_flags.h"
#include "tools/ranks.h"
#include "tools/request_flags.h"

namespace tpumesh::tools {
namespace {

struct EvalCmdOptions {
  pipeline::EvalOptions eval;
  DeviceFlags dev;
  std::string precision = "highest";
  std::vector<std::string> loras;
};

Status RunEvalCommand(EvalCmdOptions opt) {
  // Under mpirun or srun: every rank reads the model and inputs and runs
  // the checks, rank 0 alone prints and writes (docs/cluster.md).
  pipeline::EvalStats s;
  RankSteps steps;
  steps.check = [&](mesh::Cluster&, RankSteps::Inputs* inputs) -> Status {
    RunFiles files;
    const Status checked = [&]() -> Status {
      TPUMESH_ASSIGN_OR_RETURN(opt.eval.precision, models::ParsePrecision(opt.precision));
      files.outputs = opt.dev.out.flags();
      files.outputs.insert(files.outputs.begin(), {"--output", opt.eval.output});
      files.inputs = {{"--model", opt.eval.model}, {"--input", opt.eval.input}, ChipInput(opt.dev.mesh.chip)};
      // The tokenizer runs on the host: no weights, no chip. Flags that only
      // mean something for a model's forward pass are refused, never ignored.
      if (opt.eval.component == "tokenizer") {
        if (!opt.loras.empty())
          return InvalidArgumentError("--lora: the tokenizer has no weights to fuse a LoRA into (eval --component "
                                      "text_encoder, unet, vae_decoder or vae_encoder takes one)");
        for (const auto& [flag, path] : opt.dev.out.flags())
          if (!path.empty())
            return InvalidArgumentError(flag + ": the tokenizer runs on the host, with no chip work to report");
      }
      TPUMESH_ASSIGN_OR_RETURN(opt.eval.loras, pipeline::ParseLoraFlags(opt.loras));
      for (const pipeline::LoraSpec& l : opt.eval.loras) files.inputs.push_back({"--lora", l.path});
      return CheckRunFiles(files);
    }();
    *inputs = files.inputs;
    return checked;
  };
  steps.work = [&](mesh::Cluster& cluster) -> Status {
    opt.eval.mesh = opt.dev.mesh;
    opt.eval.mesh.cluster = &cluster;
    opt.eval.keep_ops = !opt.dev.out.trace.empty();
    TPUMESH_ASSIGN_OR_RETURN(s, pipeline::RunEval(opt.eval));
    return OkStatus();
  };
  // The output, the report and the trace together: all written, or none.
  steps.finish = [&](mesh::Cluster& cluster) -> Status {
    if (cluster.rank() != 0) return OkStatus();
    if (opt.eval.component != "tokenizer") report::AddReportFiles(s.report, opt.dev.out, &s.files);
    return WriteFilesAtomic(s.files);
  };
  steps.report = [&] {
    std::cout << "wrote " << opt.eval.output << ": " << opt.eval.component << " on a batch of " << s.batch;
    if (opt.eval.component != "tokenizer") {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    " over %d device(s), mesh %s, precision=%s, forward %.3f s host (%.3f s with loading)",
                    s.report.devices, s.report.mesh_axes.c_str(), opt.precision.c_str(), s.host_seconds,
                    s.total_seconds);
      std::cout << buf;
      std::snprintf(buf, sizeof buf, "; modelled on %s: %.6f s", s.report.chip.name.c_str(), s.modelled_seconds);
      std::cout << buf;
    }
    std::cout << "\n";
    if (opt.eval.component == "tokenizer") return;
    if (opt.dev.out.any()) std::cout << report::ReportTable(s.report);
    std::cout.flush();
    report::PrintReportFiles(opt.dev.out);
  };
  return RunOnRanks(steps);
}

}  // namespace

void RegisterEval(CLI::App& app, RunFn* run) {
  auto opt = std::make_shared<EvalCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Run one model component on inputs from an HDF5 file: the batch split over the mesh's data axis, the "
      "weights over its model axis (default: one device).");
  cmd->add_option("--model", opt->eval.model, "Model file (tpumesh convert / init)")->required();
  cmd->add_option("--component", opt->eval.component,
                  "tokenizer | text_encoder | unet | vae_decoder | vae_encoder")->required();
  cmd->add_option("--input", opt->eval.input,
                  "HDF5 inputs: prompts | input_ids | sample, timestep, encoder_hidden_states | latents | sample")
      ->required();
  cmd->add_option("--output", opt->eval.output, "HDF5 file to write (atomically)")->required();
  cmd->add_option("--precision", opt->precision, "default (bf16 operands, f32 accumulation) or highest (f32)")
      ->capture_default_str();
  AddLoraFlag(cmd, &opt->loras);
  AddDeviceFlags(cmd, &opt->dev);
  cmd->callback([opt, run] { *run = [opt] { return RunEvalCommand(*opt); }; });
}

}  // namespace tpumesh::tools
