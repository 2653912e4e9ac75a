#include "hlo/run.h"

#include <utility>

#include "base/printable.h"
#include "hlo/interpreter.h"

namespace tpumesh::hlo {

report::RunReport ReportOf(const ProgramRun& run, const Layout& layout, const mesh::Mesh& mesh, const RunOptions& o,
                           XlaGeneration generation) {
  report::RunReport r;
  r.mode = o.dry_run ? "simulate" : "run";
  r.chip = mesh.chip();
  r.devices = mesh.num_devices();
  r.mesh_axes = mesh::MeshAxesToString(mesh.axes());
  r.overlap = mesh.overlap_collectives();
  r.host_seconds = run.host_seconds;
  if (!o.dry_run) r.hbm_peak_bytes = run.hbm_peak_bytes;
  r.Finish(run.records, run.record_of_device, o.keep_ops);
  r.info = {{"program", o.program}, {"layout", layout.Describe()},
            {"matmul_arithmetic", o.mxu_precision ? "the MXU's (precision_config)" : "f32 (as XLA on a CPU)"},
            {"xla_math", generation == XlaGeneration::kCurrent ? "current jax" : "jax 0.4"}};
  return r;
}

StatusOr<RunResult> RunModule(const Module& m, const RunOptions& o, const InputsFn& inputs,
                              std::function<void(int64_t)> on_op, const std::atomic<bool>* cancel) {
  const bool price_only = o.dry_run && !o.compute;
  TPUMESH_RETURN_IF_ERROR(Verify(m, price_only ? VerifyFor::kPrice : VerifyFor::kRun));
  RunResult result;
  TPUMESH_ASSIGN_OR_RETURN(result.layout, LayoutOf(m));
  const Layout& layout = result.layout;
  TPUMESH_ASSIGN_OR_RETURN(auto mesh, mesh::CreateMesh(DefaultMeshSpec(layout, o.mesh)));
  if (mesh->num_devices() != layout.devices)
    return InvalidArgumentError(Printable(o.program) + " runs on " + std::to_string(layout.devices) + " device(s) (" +
                                layout.Describe() + "); the device flags give " + std::to_string(mesh->num_devices()));
  std::vector<Tensor> args;
  if (!price_only) {
    TPUMESH_ASSIGN_OR_RETURN(args, inputs(layout));
  } else {
    args.resize(layout.inputs.size());
  }
  Options opt;
  opt.generation = DetectGeneration(m);
  if (o.xla_generation == "0.4") opt.generation = XlaGeneration::kJax04;
  else if (o.xla_generation == "current") opt.generation = XlaGeneration::kCurrent;
  opt.dry_run = price_only;
  opt.max_executed_ops = price_only ? kMaxDryRunOps : o.max_ops;
  opt.warn = o.warn;
  opt.mxu_precision = o.mxu_precision;
  std::vector<mesh::OpRecord> unused;
  opt.ops = &unused;  // set per device by RunProgram
  opt.on_op = std::move(on_op);
  opt.cancel = cancel;
  TPUMESH_ASSIGN_OR_RETURN(result.run, RunProgram(m, layout, *mesh, std::move(args), opt));
  result.report = ReportOf(result.run, layout, *mesh, o, opt.generation);
  return result;
}

Status CompleteResultShardings(Module& m, const Layout& layout, const std::string& name) {
  if (layout.kind != Layout::Kind::kGlobal || layout.devices == 1 || layout.axes.empty()) return OkStatus();
  Func* main = nullptr;
  for (Func& f : m.funcs)
    if (f.name == "main") main = &f;
  if (main == nullptr) return OkStatus();
  bool open = false;
  for (size_t i = 0; i < main->result_types.size(); ++i)
    open = open || i >= main->result_attrs.size() ||
           (!main->result_attrs[i].Find("sdy.sharding") && !main->result_attrs[i].Find("mhlo.sharding"));
  if (!open) return OkStatus();
  RunOptions o;
  o.program = name;
  o.dry_run = true;
  auto r = RunModule(m, o, {});
  if (!r.ok()) return OkStatus();  // left whole; the execution says what fails
  const auto& inferred = r->run.inferred_result_shardings;
  main->result_attrs.resize(main->result_types.size());
  for (size_t i = 0; i < inferred.size() && i < main->result_attrs.size(); ++i) {
    if (inferred[i].kind != Attr::Kind::kDict) continue;
    Attr& attrs = main->result_attrs[i];
    attrs.kind = Attr::Kind::kDict;
    attrs.dict.emplace_back("sdy.sharding", inferred[i]);
  }
  return OkStatus();
}

}  // namespace tpumesh::hlo
