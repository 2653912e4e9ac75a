#include "pipeline/simulate.h"

#include <chrono>

#include "io/model_file.h"
#include "models/architectures.h"
#include "io/model_file.h"
#include "pipeline/loader.h"

namespace tpumesh::pipeline {
namespace {

using mesh::Array;

StatusOr<ModelConfigs> ReadConfigs(const SimulateOptions& o) {
  if (!o.arch.empty() && !o.model.empty()) return InvalidArgumentError("give --arch or --model, not both");
  if (!o.arch.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(models::Architecture a, models::BuiltinArchitecture(o.arch));
    return ModelConfigs{a.name, a.model_index, a.text_encoder, a.text_encoder_2, a.unet, a.vae, a.scheduler};
  }
  if (o.model.empty()) return InvalidArgumentError("simulate needs --arch NAME or --model FILE");
  TPUMESH_ASSIGN_OR_RETURN(auto f, ModelFile::Open(o.model));
  return ReadModelConfigs(*f);
}

}  // namespace

StatusOr<RunReport> Simulate(const SimulateOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const GenerateRequest& req = o.request;
  TPUMESH_ASSIGN_OR_RETURN(ModelConfigs cf, ReadConfigs(o));
  auto built = BuildTextToImage(cf, ZeroParams, nullptr, nullptr);
  if (!built.ok()) return Status(built.status().code(), "simulate " + cf.origin + ": " + built.status().message());
  const TextToImage& flow = **built;
  TPUMESH_RETURN_IF_ERROR(flow.Validate(req, o.devices, /*dry_run=*/true));
  TPUMESH_ASSIGN_OR_RETURN(Txt2ImgPlan plan, flow.MakePlan(req));

  // One device's share, run dry: zero token ids, no keys.
  std::vector<mesh::OpRecord> ops;
  models::Ctx ctx{nullptr, req.precision};
  ctx.dry_run = true;
  ctx.ops = &ops;
  std::vector<Array> ids(flow.conditioning().token_arrays(),
                         Array::Host(mesh::DType::kI32, {plan.batch_per_device, kPromptLength}));
  DeviceInputs in;
  in.ids = ids;
  TPUMESH_RETURN_IF_ERROR(flow.RunDevice(ctx, plan, req, in).status());

  RunReport r;
  r.mode = "simulate";
  TPUMESH_ASSIGN_OR_RETURN(r.chip, mesh::LoadChipSpec(o.chip));
  r.devices = o.devices;
  r.images = o.devices * plan.batch_per_device;
  r.Finish({ops}, req.keep_ops);
  r.logs.assign(o.devices, r.logs.front());
  r.host_seconds = 0;
  r.info = {{"model", cf.origin},
            {"family", flow.family().name},
            {"scheduler", plan.scheduler},
            {"steps", std::to_string(plan.steps)},
            {"unet_calls", std::to_string(plan.timesteps.size())},
            {"size", std::to_string(plan.width) + "x" + std::to_string(plan.height)},
            {"batch_per_device", std::to_string(plan.batch_per_device)},
            {"precision", req.precision == models::Precision::kDefault ? "default" : "highest"},
            {"guidance", std::to_string(flow.guidance(req))},
            {"simulation_wall_seconds",
             std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count())}};
  return r;
}

}  // namespace tpumesh::pipeline
