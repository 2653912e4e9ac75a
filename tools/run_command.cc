// `tpumesh run PROGRAM.mlir --outputs OUT.h5 [--inputs IN.h5] [--seed N]
//  [--mxu-precision] [device flags]`, and simulate --stablehlo's flow.
#include "tools/run_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "base/printable.h"
#include "hlo/ops.h"
#include "hlo/program.h"
#include "hlo/run.h"
#include "io/atomic_file.h"
#include "io/h5io.h"
#include "io/run_files.h"
#include "report/report_files.h"
#include "tools/commands.h"
#include "tools/ranks.h"
#include "tools/request_flags.h"

namespace tpumesh::tools {

// The op table (hlo/ops.h) as docs/stablehlo.md shows it.
void PrintOpTable() {
  std::cout << "| op | report type | how it is priced |\n|---|---|---|\n";
  for (const hlo::OpEntry& e : hlo::OpTable())
    std::cout << "| `" << e.name << "` | " << e.category << " | " << e.priced << " |\n";
}

namespace {

// What the run takes of the command's options.
hlo::RunOptions ModuleRunOptions(const StableHloRun& o) {
  hlo::RunOptions r;
  r.program = o.program;
  r.mesh = o.dev.mesh;
  r.dry_run = o.dry_run;
  r.mxu_precision = o.mxu_precision;
  r.xla_generation = o.xla_generation;
  r.keep_ops = !o.dev.out.trace.empty();
  r.compute = !o.inputs.empty();  // simulate --inputs computes (run_command.h)
  r.max_ops = o.max_ops;
  r.warn = [](const std::string& what) { std::fprintf(stderr, "tpumesh: warning: %s\n", what.c_str()); };
  return r;
}

}  // namespace

Status RunStableHlo(const StableHloRun& o) {
  if (o.list_ops) {
    PrintOpTable();
    return OkStatus();
  }
  if (o.program.empty()) return InvalidArgumentError("run: give the PROGRAM.mlir to run (or --list-ops)");
  if (!o.dry_run && o.outputs.empty()) return InvalidArgumentError("run: --outputs FILE.h5 is required");
  RunFiles files;
  files.outputs = o.dev.out.flags();
  if (!o.dry_run) files.outputs.insert(files.outputs.begin(), {"--outputs", o.outputs});
  files.inputs = {{"PROGRAM", o.program}, {"--inputs", o.inputs}, ChipInput(o.dev.mesh.chip)};
  TPUMESH_RETURN_IF_ERROR(CheckRunFiles(files));
  TPUMESH_ASSIGN_OR_RETURN(hlo::Module m, hlo::ReadModuleFile(o.program));
  // Progress on stderr: on a terminal one line redrawn 4 times a second,
  // in a log a line every 10 s.
  const bool tty = isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  bool shown = false;
  std::function<void(int64_t)> on_op;
  if (!o.quiet && !o.dry_run) {
    on_op = [&](int64_t executed) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last < (tty ? std::chrono::milliseconds(250) : std::chrono::milliseconds(10000))) return;
      last = now;
      shown = true;
      std::fprintf(stderr, "%srun: %lld ops on device 0, %.1f s%s", tty ? "\r\033[K" : "",
                   static_cast<long long>(executed), std::chrono::duration<double>(now - start).count(),
                   tty ? "" : "\n");
    };
  }
  auto inputs = [&o](const hlo::Layout& layout) -> StatusOr<std::vector<hlo::Tensor>> {
    if (o.inputs.empty()) return hlo::RandomInputs(layout, o.seed);
    return hlo::ReadInputs(o.inputs, layout);
  };
  auto ran = hlo::RunModule(m, ModuleRunOptions(o), inputs, on_op);
  if (shown && tty) std::fprintf(stderr, "\r\033[K");
  TPUMESH_ASSIGN_OR_RETURN(hlo::RunResult result, std::move(ran));
  const hlo::Layout& layout = result.layout;
  const hlo::ProgramRun& run = result.run;
  report::RunReport& r = result.report;
  std::vector<std::pair<std::string, std::string>> out_files;
  if (!o.dry_run) {
    TPUMESH_ASSIGN_OR_RETURN(auto writer, pipeline::H5Writer::Create(o.outputs));
    for (const auto& [name, raw] : hlo::OutputDatasets(run.outputs)) TPUMESH_RETURN_IF_ERROR(writer->WriteRaw(name, raw));
    TPUMESH_ASSIGN_OR_RETURN(std::string bytes, writer->Finish());
    out_files.emplace_back(o.outputs, std::move(bytes));
  }
  report::AddReportFiles(r, o.dev.out, &out_files);
  TPUMESH_RETURN_IF_ERROR(WriteFilesAtomic(out_files));
  const mesh::OpTypeTotals all = report::AllDevicesTotals(r);
  double priced = 0;  // ops executed on device 0 (a record stands for its repeats)
  if (!run.records.empty())
    for (const mesh::OpRecord& rec : run.records[0]) priced += rec.repeat;
  char buf[400];
  std::snprintf(buf, sizeof buf, "%s %s: %s, %.0f ops priced on device 0, %.4g FLOPs per device; modelled on %s: %.6f s%s\n",
                o.dry_run ? "priced" : "ran", Printable(o.program).c_str(), layout.Describe().c_str(),
                priced, r.logs.empty() ? 0.0 : r.logs[0].total().flops,
                r.chip.name.c_str(), r.modelled_seconds(), o.dry_run ? "" : "");
  std::cout << buf;
  (void)all;
  if (!o.dry_run) {
    std::snprintf(buf, sizeof buf, "wrote %s: %zu output(s); host %.3f s\n", Printable(o.outputs).c_str(),
                  run.outputs.size(), run.host_seconds);
    std::cout << buf;
  }
  std::cout << report::ReportTable(r);
  std::cout.flush();
  report::PrintReportFiles(o.dev.out);
  return OkStatus();
}

// `run` under mpirun or srun (docs/cluster.md): the interpreter (hlo/)
// places every device in one process, so rank 0 runs the module alone on
// its own mesh while the other ranks wait; every rank runs the checks and
// reads the inputs first, and rank 0 alone prints and writes. In one
// process, and for the op table, RunStableHlo checks for itself.
Status RunStableHloOnRanks(const StableHloRun& o) {
  RankSteps steps;
  steps.check = [&o](mesh::Cluster& cluster, RankSteps::Inputs* inputs) -> Status {
    if (cluster.size() == 1 || o.list_ops) return OkStatus();
    if (o.program.empty()) return InvalidArgumentError("run: give the PROGRAM.mlir to run (or --list-ops)");
    if (o.outputs.empty()) return InvalidArgumentError("run: --outputs FILE.h5 is required");
    RunFiles files;
    files.outputs = o.dev.out.flags();
    files.outputs.insert(files.outputs.begin(), {"--outputs", o.outputs});
    files.inputs = {{"PROGRAM", o.program}, {"--inputs", o.inputs}, ChipInput(o.dev.mesh.chip)};
    *inputs = files.inputs;
    return CheckRunFiles(files);
  };
  steps.root_alone = true;
  steps.work = [&o](mesh::Cluster&) { return RunStableHlo(o); };
  return RunOnRanks(steps);
}

void RegisterRun(CLI::App& app, RunFn* run) {
  auto opt = std::make_shared<StableHloRun>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run a StableHLO module (the MLIR text JAX prints: jax.jit(f).lower(...).as_text()) on the emulated mesh: "
      "every op computed on the host, priced as the chip would run it (docs/stablehlo.md).");
  cmd->add_option("PROGRAM", opt->program, "The module's .mlir text (pretty or generic form)");
  cmd->add_option("--inputs", opt->inputs,
                  "HDF5 file with datasets input_0 ... in @main's argument order (bf16: uint16 + dtype=\"bfloat16\"); "
                  "a pmap module's arrays carry the leading device axis. Absent: random inputs from --seed");
  cmd->add_option("--outputs", opt->outputs, "HDF5 file to write output_0 ... to (atomically); required");
  cmd->add_flag("--list-ops", opt->list_ops, "Print the supported ops and how each is priced, and stop");
  cmd->add_flag("-q,--quiet", opt->quiet, "No progress on stderr");
  cmd->add_option("--seed", opt->seed, "Seed of the random inputs when --inputs is absent, 0 to 18446744073709551615")
      ->check(SeedNumber())
      ->capture_default_str();
  cmd->add_option("--max-ops", opt->max_ops,
                  "The most ops executed (loops included) before the run stops with one line naming the op: an "
                  "endless loop ends there")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_flag("--mxu-precision", opt->mxu_precision,
                "Compute f32 dot_general and convolution as a TPU's MXU does for their precision_config (DEFAULT: "
                "bf16 operands, one pass) instead of in f32 as XLA on a CPU");
  cmd->add_option("--xla-generation", opt->xla_generation,
                  "Whose XLA to reproduce bit for bit where generations differ (chlo.erf_inv, log): 0.4 (jax 0.4.x), "
                  "current, or auto (current when the module has sdy ops or names results \"result[...]\")")
      ->check(CLI::IsMember({"auto", "0.4", "current"}))
      ->capture_default_str();
  AddDeviceFlags(cmd, &opt->dev);
  cmd->callback([opt, run] { *run = [opt] { return RunStableHloOnRanks(*opt); }; });
}

}  // namespace tpumesh::tools
