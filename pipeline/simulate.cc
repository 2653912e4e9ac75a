#include "pipeline/simulate.h"

#include <chrono>
#include <map>

#include "io/model_file.h"
#include "models/architectures.h"
#include "models/clip.h"
#include "models/configs.h"
#include "models/unet.h"
#include "models/vae.h"
#include "schedulers/schedulers.h"

namespace tpumesh::pipeline {
namespace {

using mesh::Array;

// Zero weights of the right shapes: nothing reads them in a dry run, and
// large arrays are mapped pages never touched.
models::ParamMap ZeroParams(const std::vector<models::ParamSpec>& manifest) {
  std::map<std::string, Array> m;
  for (const models::ParamSpec& p : manifest) m.emplace(p.name, Array::Host(mesh::DType::kF32, p.shape));
  return models::ParamMap(std::move(m));
}

struct Configs {
  std::string text_encoder, text_encoder_2, unet, vae, scheduler, name;
  int default_size = 0;
};

StatusOr<Configs> ReadConfigs(const SimulateOptions& o) {
  Configs c;
  if (!o.arch.empty() && !o.model.empty()) return InvalidArgumentError("give --arch or --model, not both");
  if (!o.arch.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(models::Architecture a, models::BuiltinArchitecture(o.arch));
    c = {a.text_encoder, a.text_encoder_2, a.unet, a.vae, a.scheduler, a.name, a.default_image_size};
    return c;
  }
  if (o.model.empty()) return InvalidArgumentError("simulate needs --arch NAME or --model FILE");
  TPUMESH_ASSIGN_OR_RETURN(auto f, ModelFile::Open(o.model));
  for (auto [ds, out] : {std::pair{"text_encoder/config.json", &c.text_encoder}, {"unet/config.json", &c.unet},
                         {"vae/config.json", &c.vae}, {"scheduler/scheduler_config.json", &c.scheduler}}) {
    auto t = f->ReadText(ds);
    if (!t.ok()) return NotFoundError(o.model + ": the model has no " + std::string(ds));
    *out = *t;
  }
  if (f->Has("text_encoder_2/config.json")) {
    TPUMESH_ASSIGN_OR_RETURN(c.text_encoder_2, f->ReadText("text_encoder_2/config.json"));
  }
  c.name = o.model;
  return c;
}

}  // namespace

StatusOr<RunReport> Simulate(const SimulateOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.devices < 1) return InvalidArgumentError("--devices must be >= 1");
  if (o.batch_per_device < 1) return InvalidArgumentError("--batch-per-device must be >= 1");
  if (o.steps < 1) return InvalidArgumentError("--steps must be >= 1, got " + std::to_string(o.steps));
  TPUMESH_ASSIGN_OR_RETURN(Configs cf, ReadConfigs(o));
  TPUMESH_ASSIGN_OR_RETURN(auto tc, models::ParseClipTextConfig(cf.text_encoder, "text_encoder/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto uc, models::ParseUNetConfig(cf.unet, "unet/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto vc, models::ParseVaeConfig(cf.vae, "vae/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto sc, SchedulerConfig::FromJson(cf.scheduler, "scheduler/scheduler_config.json"));
  std::string scheduler = o.scheduler;
  if (scheduler.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(scheduler, SchedulerNameOfClass(sc.class_name));
  }
  TPUMESH_ASSIGN_OR_RETURN(auto sched, MakeScheduler(scheduler, sc));
  TPUMESH_RETURN_IF_ERROR(sched->SetTimesteps(o.steps));
  const int calls = sched->num_steps();

  auto unet = models::UNetModel::Create(uc, ZeroParams(models::UNetParams(uc)));
  if (!unet.ok())
    return Status(unet.status().code(), "simulate " + cf.name + ": " + unet.status().message());
  TPUMESH_ASSIGN_OR_RETURN(auto text, models::ClipTextModel::Create(tc, ZeroParams(models::ClipTextParams(tc))));
  TPUMESH_ASSIGN_OR_RETURN(auto vae, models::VaeModel::Create(vc, ZeroParams(models::VaeParams(vc))));

  const int factor = vc.scale_factor();
  const int unet_factor = 1 << (static_cast<int>(uc.block_out_channels.size()) - 1);
  const int default_size = uc.sample_size * factor;
  const int h = o.height > 0 ? o.height : default_size, w = o.width > 0 ? o.width : default_size;
  for (auto [name, v] : {std::pair<const char*, int>{"--height", h}, {"--width", w}})
    if (v % (factor * unet_factor) != 0)
      return InvalidArgumentError(std::string(name) + " " + std::to_string(v) + " is not a multiple of " +
                                  std::to_string(factor * unet_factor));

  const int64_t bpd = o.batch_per_device;
  const bool cfg = o.guidance > 1.0f;
  const int64_t rows = cfg ? 2 * bpd : bpd;
  models::Ctx ctx{nullptr, o.precision};
  ctx.dry_run = true;
  const bool bf16_bytes = o.precision == models::Precision::kDefault;

  std::vector<mesh::OpRecord> text_ops, unet_ops, vae_ops;
  ctx.ops = &text_ops;
  const Array ids = Array::Host(mesh::DType::kI32, {rows, 77});
  TPUMESH_ASSIGN_OR_RETURN(Array context, text.Forward(ctx, ids));
  if (!cf.text_encoder_2.empty()) {
    // SDXL: a second encoder (OpenCLIP bigG); the UNet's context is both
    // encoders' penultimate hidden states side by side. diffusers runs every
    // layer of both (output_hidden_states), so every layer is priced, and
    // the pooled output (the EOS token's row) through text_projection, which
    // gives the UNet's text_embeds.
    TPUMESH_ASSIGN_OR_RETURN(auto tc2, models::ParseClipTextConfig(cf.text_encoder_2, "text_encoder_2/config.json"));
    TPUMESH_ASSIGN_OR_RETURN(auto text2,
                             models::ClipTextModel::Create(tc2, ZeroParams(models::ClipTextParams(tc2))));
    TPUMESH_RETURN_IF_ERROR(text2.Forward(ctx, ids).status());
    if (tc2.with_projection) {
      const Array pooled = Array::Host(mesh::DType::kF32, {rows, tc2.hidden_size});
      TPUMESH_RETURN_IF_ERROR(models::Linear(ctx, pooled, text2.params()["text_projection.weight"], nullptr).status());
    }
    context = Array::Host(mesh::DType::kF32, {rows, 77, tc.hidden_size + tc2.hidden_size});
  }
  ctx.ops = &unet_ops;
  const Array sample = Array::Host(mesh::DType::kF32, {rows, uc.in_channels, h / factor, w / factor});
  models::UNetModel::AddedCond added;
  if (uc.text_time_embedding) {
    added.text_embeds =
        Array::Host(mesh::DType::kF32, {rows, uc.projection_class_embeddings_input_dim - 6 * uc.addition_time_embed_dim});
    added.time_ids.assign(6 * rows, 0.0f);
  }
  TPUMESH_RETURN_IF_ERROR(
      unet->Forward(ctx, sample, std::vector<float>(rows, 500.0f), context, {}, &added).status());
  ctx.ops = &vae_ops;
  TPUMESH_RETURN_IF_ERROR(
      vae.Decode(ctx, Array::Host(mesh::DType::kF32, {bpd, vc.latent_channels, h / factor, w / factor})).status());
  const int64_t nx = bpd * uc.in_channels * (h / factor) * (w / factor);
  const mesh::OpRecord guidance = GuidanceRecord(nx, bf16_bytes);
  const mesh::OpRecord step = SchedulerStepRecord(scheduler, nx, bf16_bytes);

  RunReport r;
  r.mode = "simulate";
  TPUMESH_ASSIGN_OR_RETURN(r.chip, mesh::LoadChipSpec(o.chip));
  r.devices = o.devices;
  r.images = o.devices * bpd;
  mesh::DeviceCostLog log;
  log.set_keep_ops(o.keep_ops);
  auto add = [&](const mesh::OpRecord& op, double repeat) {
    const mesh::OpTiming t = mesh::PriceOp(op, r.chip);
    if (o.keep_ops) {
      for (int i = 0; i < static_cast<int>(repeat); ++i) log.Add(op, t);
    } else {
      log.Add(op, t, repeat);
    }
  };
  for (const auto& op : text_ops) add(op, 1);
  if (o.keep_ops) {
    for (int c = 0; c < calls; ++c) {
      for (const auto& op : unet_ops) add(op, 1);
      if (cfg) add(guidance, 1);
      add(step, 1);
    }
  } else {
    for (const auto& op : unet_ops) add(op, calls);
    if (cfg) add(guidance, calls);
    add(step, calls);
  }
  for (const auto& op : vae_ops) add(op, 1);
  r.logs.assign(o.devices, log);
  r.host_seconds = 0;
  r.info = {{"model", cf.name},
            {"scheduler", scheduler},
            {"steps", std::to_string(o.steps)},
            {"unet_calls", std::to_string(calls)},
            {"size", std::to_string(w) + "x" + std::to_string(h)},
            {"batch_per_device", std::to_string(bpd)},
            {"precision", o.precision == models::Precision::kDefault ? "default" : "highest"},
            {"guidance", std::to_string(o.guidance)},
            {"simulation_wall_seconds",
             std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count())}};
  return r;
}

}  // namespace tpumesh::pipeline
