// `tpumesh simulate`: prices a whole generation on the emulated chip without
// computing it (pipeline/simulate.h); --sweep-mesh prices it on every
// data x model factorisation of the devices. See docs/cli.md,
// docs/cost-model.md and docs/sharding.md.
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "io/atomic_file.h"
#include "io/run_files.h"
#include "nlohmann/json.hpp"
#include "pipeline/simulate.h"
#include "report/report_files.h"
#include "tools/commands.h"
#include "tools/device_flags.h"
#include "tools/ranks.h"
#include "tools/request_flags.h"
#include "tools/run_command.h"
#include "tools/sweep_chart.h"

namespace tpumesh::tools {
namespace {

// "8 emulated v5e device(s)", and where a chip holds several devices (v2's
// cores, TPU7x's chiplets) the chips too: "8 emulated tpu7x device(s) on 4
// chips".
std::string EmulatedDevices(const report::RunReport& r) {
  std::string s = std::to_string(r.devices) + " emulated " + r.chip.name + " device(s)";
  if (r.chip.devices_per_chip > 1) s += " on " + std::to_string(r.devices / r.chip.devices_per_chip) + " chips";
  return s;
}

struct SimulateCmdOptions {
  pipeline::SimulateOptions sim;
  std::string workload;
  std::string stablehlo;
  std::string inputs;  // with --stablehlo: computed on these (tools/run_command.h)
  DeviceFlags dev;
  pipeline::RequestFlags req;
  bool sweep_mesh = false;
  bool sweep_dataflow = false;
  bool no_hbm_limit = false;
  bool json = false;
  std::string svg;
  int64_t max_layers = pipeline::kDefaultMaxWorkloadLayers;
};

Status RunSweep(const SimulateCmdOptions& o) {
  TPUMESH_ASSIGN_OR_RETURN(std::vector<pipeline::MeshSweepRow> rows, pipeline::SweepMesh(o.sim));
  if (!o.svg.empty()) {
    const std::string arch = o.sim.arch.empty() ? o.sim.model : o.sim.arch;
    const std::string title = arch + " on " + std::to_string(rows.empty() ? 0 : rows[0].data) + " " + o.sim.mesh.chip +
                              " devices, every data x fsdp x model mesh";
    TPUMESH_RETURN_IF_ERROR(WriteFileAtomic(o.svg, SweepChartSvg(rows, title)));
  }
  if (o.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& r : rows)
      j.push_back({{"mesh", r.mesh},
                   {"data", r.data},
                   {"fsdp", r.fsdp},
                   {"model", r.model},
                   {"images", r.images},
                   {"seconds_per_image", r.seconds},
                   {"serial_seconds_per_image", r.serial_seconds},
                   {"images_per_second", r.images_per_second},
                   {"param_bytes_per_device", r.param_bytes},
                   {"activation_bytes_per_device", r.activation_bytes},
                   {"hbm_capacity_bytes", r.hbm_capacity},
                   {"fits", r.fits},
                   {"mxu_utilisation", r.mxu_utilisation},
                   {"ici_seconds", r.ici_seconds},
                   {"ici_share", r.ici_share},
                   {"ici_bytes", r.ici_bytes},
                   {"modelled", true}});
    std::cout << j.dump(1) << "\n";
    return OkStatus();
  }
  std::printf("modelled (the emulated chip, nothing computed); latency = one batch, every image of it in parallel;\n"
              "s per image with collectives overlapped with compute (overlap on) and serial (off)\n");
  std::printf("%-22s %12s %12s %10s %11s %11s %5s %6s %7s %10s\n", "mesh", "s/image on", "s/image off", "images/s",
              "params/dev", "activ./dev", "fits", "MXU", "ICI", "ICI bytes");
  for (const auto& r : rows) {
    std::printf("%-22s %12.4f %12.4f %10.3f %11s %11s %5s %5.0f%% %6.1f%% %10s\n", r.mesh.c_str(), r.seconds,
                r.serial_seconds, r.images_per_second, mesh::FormatBytes(r.param_bytes).c_str(),
                mesh::FormatBytes(r.activation_bytes).c_str(), r.fits ? "yes" : "NO", 100 * r.mxu_utilisation,
                100 * r.ici_share, mesh::FormatBytes(r.ici_bytes).c_str());
  }
  if (!rows.empty())
    std::printf("HBM per device: %s\n", mesh::FormatBytes(rows.front().hbm_capacity).c_str());
  return OkStatus();
}

// --sweep-dataflow: `run` under ws / os / is and every swept VMEM size.
Status RunDataflowSweep(const SimulateCmdOptions& o, const std::string& what,
                        const std::function<StatusOr<report::RunReport>(const mesh::MeshSpec&)>& run) {
  TPUMESH_ASSIGN_OR_RETURN(std::vector<pipeline::DataflowSweepRow> rows, pipeline::SweepDataflow(o.dev.mesh, run));
  if (!o.svg.empty()) {
    const std::string title = what + " on " + o.dev.mesh.chip + ": dataflow x VMEM";
    TPUMESH_RETURN_IF_ERROR(WriteFileAtomic(o.svg, DataflowChartSvg(rows, title)));
  }
  if (o.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& r : rows)
      j.push_back({{"dataflow", r.dataflow},
                   {"vmem_mib", r.vmem_mib},
                   {"modelled_seconds", r.seconds},
                   {"mxu_cycles", r.mxu_cycles},
                   {"mxu_utilisation", r.mxu_utilisation},
                   {"hbm_bytes", r.hbm_bytes},
                   {"energy_joules", r.energy_joules},
                   {"average_watts", r.average_watts},
                   {"modelled", true},
                   {"energy_estimated", true}});
    std::cout << j.dump(1) << "\n";
    return OkStatus();
  }
  std::printf("modelled (the emulated chip, nothing computed); energy and power are estimates; all devices\n");
  std::printf("%-8s %9s %12s %14s %6s %10s %11s %9s\n", "dataflow", "VMEM MiB", "modelled s", "MXU cycles", "MXU",
              "HBM GB", "energy J", "avg W");
  for (const auto& r : rows)
    std::printf("%-8s %9.0f %12.6g %14.0f %5.1f%% %10.4f %11.5g %9.1f\n", r.dataflow.c_str(), r.vmem_mib, r.seconds,
                r.mxu_cycles, 100 * r.mxu_utilisation, r.hbm_bytes / 1e9, r.energy_joules, r.average_watts);
  return OkStatus();
}

// --workload: the file's layers on the mesh, a line per layer (device 0).
Status RunWorkload(const SimulateCmdOptions& o) {
  if (!o.sim.arch.empty() || !o.sim.model.empty())
    return InvalidArgumentError("--workload prices its own layers: give it without --arch or --model");
  if (o.sweep_mesh) return InvalidArgumentError("--sweep-mesh splits a model over the mesh: it needs --arch or --model");
  pipeline::WorkloadOptions w;
  w.path = o.workload;
  w.mesh = o.dev.mesh;
  TPUMESH_ASSIGN_OR_RETURN(w.precision, models::ParsePrecision(o.req.precision));
  w.keep_ops = !o.dev.out.trace.empty();
  w.max_layers = o.max_layers;
  w.device_rows = o.dev.out.any() && !o.sweep_dataflow;
  if (o.sweep_dataflow)
    return RunDataflowSweep(o, o.workload, [w](const mesh::MeshSpec& spec) {
      pipeline::WorkloadOptions at = w;
      at.mesh = spec;
      return pipeline::SimulateWorkload(at);
    });
  TPUMESH_ASSIGN_OR_RETURN(report::RunReport r, pipeline::SimulateWorkload(w));
  std::printf("simulated %s: %s layer(s) on %s, mesh %s, dataflow %s, precision %s\n", o.workload.c_str(),
              r.info["workload_layers"].c_str(), EmulatedDevices(r).c_str(), r.mesh_axes.c_str(),
              r.info["dataflow"].c_str(), o.req.precision.c_str());
  std::printf("modelled: %.6g s (priced in %s s, nothing computed)\n", r.modelled_seconds(),
              r.info["simulation_wall_seconds"].substr(0, 5).c_str());
  std::printf("%-24s %-12s %14s %8s %10s %10s %12s %6s\n", "layer (device 0)", "op", "MXU cycles", "MXU",
              "VMEM MB", "HBM MB", "modelled s", "bound");
  const auto& layers = r.logs[0].layers();
  const size_t shown = std::min<size_t>(layers.size(), 40);
  for (size_t i = 0; i < shown; ++i) {
    const mesh::OpTypeTotals& t = layers[i].totals;
    std::printf("%-24s %-12s %14.0f %7.1f%% %10.3f %10.3f %12.6g %6s\n", layers[i].module.substr(0, 24).c_str(),
                layers[i].name.c_str(), t.mxu_cycles, 100 * t.utilisation(), t.vmem_bytes / 1e6, t.bytes / 1e6,
                t.modelled_seconds, t.bound().c_str());
  }
  if (shown < layers.size())
    std::printf("... %zu more layer(s): --report or --report-csv has them all\n", layers.size() - shown);
  std::printf("%s", report::ReportTable(r).c_str());
  return report::WriteReportFiles(r, o.dev.out);
}

// simulate's checks: flags that go together, outputs writable.
Status CheckSimulate(const SimulateCmdOptions& o, RunFiles* files) {
  files->outputs = o.dev.out.flags();
  files->outputs.emplace_back("--svg", o.svg);
  files->inputs = {{"--model", o.sim.model}, {"--workload", o.workload}, {"--stablehlo", o.stablehlo},
                   ChipInput(o.dev.mesh.chip)};
  TPUMESH_RETURN_IF_ERROR(CheckRunFiles(*files));
  files->inputs.erase(files->inputs.begin() + 2);  // RunStableHlo's own
  const bool sweep = o.sweep_mesh || o.sweep_dataflow;
  if (o.sweep_mesh && o.sweep_dataflow) return InvalidArgumentError("--sweep-mesh or --sweep-dataflow: one sweep at a time");
  if (sweep && o.dev.out.any())
    return InvalidArgumentError(
        "a sweep prints a table (--json for JSON); --report, --trace and --report-csv are for one run");
  if (!sweep && (o.json || !o.svg.empty()))
    return InvalidArgumentError("--json and --svg go with --sweep-mesh or --sweep-dataflow (use --report FILE for one run)");
  if (o.sweep_dataflow && (!o.dev.mesh.dataflow.empty() || o.dev.mesh.vmem_mib != -1))
    return InvalidArgumentError("--sweep-dataflow tries every dataflow and VMEM size: give neither --dataflow nor --vmem-mib");
  if (!o.stablehlo.empty() && (!o.workload.empty() || !o.sim.arch.empty() || !o.sim.model.empty() || sweep))
    return InvalidArgumentError("--stablehlo prices its own module: give it without --arch, --model, --workload or a sweep");
  if (!o.inputs.empty() && o.stablehlo.empty()) return InvalidArgumentError("--inputs goes with --stablehlo");
  if (o.stablehlo.empty() && o.workload.empty() && o.sweep_mesh && !o.dev.mesh.axes.empty())
    return InvalidArgumentError("--sweep-mesh tries every mesh: give --devices, not --mesh");
  return OkStatus();
}

// Everything but one model's run: a StableHLO module, a workload, a sweep.
// In one process (under several ranks, rank 0's: docs/cluster.md).
Status RunSimulateAlone(SimulateCmdOptions o) {
  if (!o.stablehlo.empty()) {
    StableHloRun run;
    run.program = o.stablehlo;
    run.inputs = o.inputs;
    run.dry_run = true;
    run.dev = o.dev;
    return RunStableHlo(run);
  }
  if (!o.workload.empty()) return RunWorkload(o);
  TPUMESH_ASSIGN_OR_RETURN(o.sim.request, pipeline::ParseRequestFlags(o.req));
  o.sim.mesh = o.dev.mesh;
  if (o.sweep_mesh) return RunSweep(o);
  const std::string what = o.sim.arch.empty() ? o.sim.model : o.sim.arch;
  return RunDataflowSweep(o, what, [&o](const mesh::MeshSpec& spec) {
    pipeline::SimulateOptions at = o.sim;
    at.mesh = spec;
    return pipeline::Simulate(at);
  });
}

Status RunSimulate(SimulateCmdOptions o) {
  // Under mpirun or srun every rank runs the checks; one model's run
  // spreads its dry runs over the ranks, anything else runs on rank 0 while
  // the others wait; rank 0 alone prints and writes (docs/cluster.md).
  report::RunReport r;
  RankSteps steps;
  steps.check = [&](mesh::Cluster&, RankSteps::Inputs* inputs) -> Status {
    RunFiles files;
    const Status checked = CheckSimulate(o, &files);
    *inputs = files.inputs;
    return checked;
  };
  steps.root_alone = o.sweep_mesh || o.sweep_dataflow || !o.stablehlo.empty() || !o.workload.empty();
  if (steps.root_alone) {
    steps.work = [&](mesh::Cluster&) { return RunSimulateAlone(o); };
    return RunOnRanks(steps);
  }
  steps.work = [&](mesh::Cluster& cluster) -> Status {
    const Status parsed = [&]() -> Status {
      TPUMESH_ASSIGN_OR_RETURN(o.sim.request, pipeline::ParseRequestFlags(o.req));
      return OkStatus();
    }();
    TPUMESH_RETURN_IF_ERROR(cluster.Agree(parsed));
    o.sim.mesh = o.dev.mesh;
    o.sim.mesh.cluster = &cluster;
    o.sim.request.keep_ops = !o.dev.out.trace.empty();
    o.sim.check_hbm = !o.no_hbm_limit;
    TPUMESH_ASSIGN_OR_RETURN(r, pipeline::Simulate(o.sim));
    return OkStatus();
  };
  steps.finish = [&](mesh::Cluster& cluster) -> Status {
    if (cluster.rank() != 0) return OkStatus();
    const double t = r.modelled_seconds();
    std::printf("simulated %s: %lld image(s) %s on %s, mesh %s, x %d per data index, %s steps "
                "(%s %s calls), %s, guidance %.2f, precision %s\n",
                r.info["model"].c_str(), static_cast<long long>(r.images), r.info["size"].c_str(),
                EmulatedDevices(r).c_str(), r.mesh_axes.c_str(), o.sim.request.batch_per_device, r.info["steps"].c_str(),
                r.info["unet_calls"].c_str(), r.info["family"] == "flux" ? "transformer" : "UNet",
                r.info["scheduler"].c_str(), std::stod(r.info["guidance"]),
                o.req.precision.c_str());
    std::printf("modelled: %.3f s per batch, %.2f images/s (priced in %s s, nothing computed)\n", t,
                t > 0 ? r.images / t : 0.0, r.info["simulation_wall_seconds"].substr(0, 5).c_str());
    std::printf("%s", report::ReportTable(r).c_str());
    std::fflush(stdout);
    std::vector<std::pair<std::string, std::string>> out;
    report::AddReportFiles(r, o.dev.out, &out);
    return WriteFilesAtomic(out);
  };
  steps.report = [&] { report::PrintReportFiles(o.dev.out); };
  return RunOnRanks(steps);
}

}  // namespace

void RegisterSimulate(CLI::App& app, RunFn* run) {
  auto opt = std::make_shared<SimulateCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Price a whole generation on the emulated chip without computing it (no weights needed).");
  cmd->add_option("--arch", opt->sim.arch,
                  "Built-in architecture: sd15, sd21, sdxl, tiny, flux-dev, flux-schnell or flux-tiny (FLUX.1)");
  cmd->add_option("--model", opt->sim.model, "A model file (only its configs are read)");
  cmd->add_option("--workload", opt->workload,
                  "Price your own layers instead of a model: a SCALE-Sim topology CSV (conv or GEMM form) or a "
                  "JSON list of ops (matmul, conv, attention, elementwise, collectives over a mesh axis); "
                  "docs/formats.md");
  cmd->add_option("--stablehlo", opt->stablehlo,
                  "Price a StableHLO module (the MLIR text JAX prints) without computing it: every op on the chip, "
                  "per op, layer and device (docs/stablehlo.md); `tpumesh run` computes it");
  cmd->add_option("--inputs", opt->inputs,
                  "With --stablehlo: an HDF5 file of @main's arguments (as `run --inputs`); the module is then "
                  "computed for real, so a loop whose trip count depends on the data is priced for its real trips "
                  "(without it each such loop is priced as one trip, with a warning)");
  cmd->add_option("--max-layers", opt->max_layers,
                  "With --workload: the most layers the file may expand to (a depthwise row counts its channels), "
                  "and with --report, --report-csv or --trace the most rows they list (layers x devices); a "
                  "file past it is refused before pricing")
      ->check(CLI::Range(int64_t{1}, pipeline::kMaxWorkloadLayers))
      ->capture_default_str();
  AddDeviceFlags(cmd, &opt->dev, kMeshFlags | kOutputFlags);
  cmd->add_flag("--sweep-mesh", opt->sweep_mesh,
                "One row per data x model factorisation of --devices, and beside each the same with FSDP over the "
                "data devices: latency (collectives overlapped and serial), throughput, HBM per device, whether "
                "it fits, MXU utilisation, ICI share");
  cmd->add_flag("--sweep-dataflow", opt->sweep_dataflow,
                "One row per dataflow (ws, os, is) and VMEM size (16, 32, 64, 128 MiB per TensorCore), of the "
                "model or the --workload: modelled time, MXU cycles and utilisation, HBM bytes, estimated energy "
                "and average power");
  cmd->add_flag("--no-hbm-limit", opt->no_hbm_limit,
                "Price the run even where a device's HBM would overflow (as --sweep-mesh does); the report's "
                "hbm_peak_bytes says what each device would hold");
  cmd->add_flag("--json", opt->json, "With a sweep: the table as JSON");
  cmd->add_option("--svg", opt->svg, "With a sweep: also write the table as an SVG chart");
  AddRequestFlags(cmd, &opt->req);
  cmd->add_option("-n,--negative-prompt", opt->req.request.negative_prompts,
                  "Price as with a negative prompt (its text is not read): SDXL encodes it instead of zeroing");
  cmd->callback([opt, run] { *run = [opt] { return RunSimulate(*opt); }; });
}

}  // namespace tpumesh::tools
