// `tpumesh simulate`: prices a whole generation on the emulated chip without
// computing it (pipeline/simulate.h). See docs/cli.md and docs/cost-model.md.
#include <cstdio>
#include <memory>
#include <string>

#include "pipeline/simulate.h"
#include "tools/commands.h"
#include "tools/report_output.h"
#include "tools/request_flags.h"

namespace tpumesh::tools {
namespace {

struct SimulateCmdOptions {
  pipeline::SimulateOptions sim;
  RequestFlags req;
  std::string report;
  std::string trace;
};

Status RunSimulate(SimulateCmdOptions o) {
  TPUMESH_ASSIGN_OR_RETURN(o.sim.request, ParseRequestFlags(o.req));
  o.sim.request.keep_ops = !o.trace.empty();
  TPUMESH_ASSIGN_OR_RETURN(pipeline::RunReport r, pipeline::Simulate(o.sim));
  const double t = r.modelled_seconds();
  std::printf("simulated %s: %lld image(s) %s on %d emulated %s device(s) x %d per device, %s steps (%s UNet calls), "
              "%s, guidance %.2f, precision %s\n",
              r.info["model"].c_str(), static_cast<long long>(r.images), r.info["size"].c_str(), r.devices,
              r.chip.name.c_str(), o.sim.request.batch_per_device, r.info["steps"].c_str(),
              r.info["unet_calls"].c_str(), r.info["scheduler"].c_str(), std::stod(r.info["guidance"]),
              o.req.precision.c_str());
  std::printf("modelled: %.3f s per batch, %.2f images/s (priced in %s s, nothing computed)\n", t,
              t > 0 ? r.images / t : 0.0, r.info["simulation_wall_seconds"].substr(0, 5).c_str());
  std::printf("%s", pipeline::ReportTable(r).c_str());
  TPUMESH_RETURN_IF_ERROR(WriteReportFiles(r, o.report, o.trace));
  return OkStatus();
}

}  // namespace

void RegisterSimulate(CLI::App& app, RunFn* run) {
  auto opt = std::make_shared<SimulateCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Price a whole generation on the emulated chip without computing it (no weights needed).");
  cmd->add_option("--arch", opt->sim.arch, "Built-in architecture: sd15, sd21, sdxl or tiny");
  cmd->add_option("--model", opt->sim.model, "A model file (only its configs are read)");
  cmd->add_option("--chip", opt->sim.chip, "Chip: v5e, v4, v2 or a chip JSON file")->capture_default_str();
  cmd->add_option("--devices", opt->sim.devices, "Emulated devices")->capture_default_str();
  AddRequestFlags(cmd, &opt->req);
  cmd->add_option("-n,--negative-prompt", opt->req.request.negative_prompts,
                  "Price as with a negative prompt (its text is not read): SDXL encodes it instead of zeroing");
  cmd->add_option("--report", opt->report, "Write the report as JSON");
  cmd->add_option("--trace", opt->trace, "Write a Chrome trace (Perfetto)");
  cmd->callback([opt, run] { *run = [opt] { return RunSimulate(*opt); }; });
}

}  // namespace tpumesh::tools
