#include "pipeline/generate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "io/model_file.h"
#include "mesh/collectives.h"
#include "pipeline/init_model.h"
#include "pipeline/loader.h"

namespace tpumesh::pipeline {
namespace {

using mesh::Array;
using mesh::DistributedArray;
using mesh::DType;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// [B] rows of a [B, ...] array on the host, restacked from the pmap's
// [n, B/n, ...] output.
StatusOr<Array> Unstack(const DistributedArray& d) {
  TPUMESH_ASSIGN_OR_RETURN(Array stacked, d.Gather());
  mesh::Shape s = stacked.shape();
  s[1] *= s[0];
  s.erase(s.begin());
  return stacked.Reshape(s);
}

// The per-image noise of the pipeline: normal(key, [1, C, h, w]) for each
// image's key, row after row.
void DrawLatents(const uint32_t* keys, int64_t images, mesh::PrngImpl impl, const mesh::Shape& one, float* out,
                 uint32_t fold = 0) {
  const int64_t per = mesh::NumElements(one);
  for (int64_t i = 0; i < images; ++i) {
    mesh::PrngKey k{keys[2 * i], keys[2 * i + 1]};
    if (fold != 0) k = mesh::FoldIn(k, fold, impl);
    mesh::Normal(k, impl, one, out + i * per);
  }
}

std::string PrecisionName(models::Precision p) {
  return p == models::Precision::kHighest ? "highest" : "default";
}

}  // namespace

// What a set of static shapes compiles to: the scheduler's timesteps (a
// scheduler is rebuilt per device and run from this config) and the sizes.
struct Generator::Plan {
  SchedulerConfig scheduler_config;
  std::string scheduler;
  std::vector<double> timesteps;
  float init_noise_sigma = 1.0f;
  int height = 0, width = 0, latent_h = 0, latent_w = 0;
};

Generator::~Generator() = default;

StatusOr<std::unique_ptr<Generator>> Generator::Open(const GeneratorOptions& o) {
  if (o.devices < 1) return InvalidArgumentError("--devices must be >= 1, got " + std::to_string(o.devices));
  auto g = std::unique_ptr<Generator>(new Generator());
  std::string path = o.model;
  std::string temp;
  if (path.empty()) {
    // The embedded default: `tpumesh init --arch tiny --seed 0`, built in a
    // temporary file that lives only while loading.
    const char* tmpdir = std::getenv("TMPDIR");
    temp = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/tpumesh-default-" + std::to_string(getpid()) + ".h5";
    InitOptions init;
    init.arch = "tiny";
    init.output = temp;
    auto st = InitModel(init);
    if (!st.ok()) return st.status().WithContext("building the embedded default model");
    path = temp;
    g->model_name_ = "tiny (embedded default, seed-0 random weights)";
  } else {
    g->model_name_ = std::filesystem::path(path).filename().string();
  }
  struct RemoveTemp {
    std::string p;
    ~RemoveTemp() {
      if (!p.empty()) std::remove(p.c_str());
    }
  } remove_temp{temp};

  TPUMESH_ASSIGN_OR_RETURN(auto file, ModelFile::Open(path));
  {
    TPUMESH_ASSIGN_OR_RETURN(ClipTokenizer tok, LoadTokenizer(*file));
    g->tokenizer_ = std::make_unique<ClipTokenizer>(std::move(tok));
  }
  {
    TPUMESH_ASSIGN_OR_RETURN(models::ClipTextModel m, LoadTextEncoder(*file));
    g->text_encoder_ = std::make_unique<models::ClipTextModel>(std::move(m));
  }
  {
    TPUMESH_ASSIGN_OR_RETURN(models::UNetModel m, LoadUNet(*file));
    if (m.config().text_time_embedding)
      return UnimplementedError(path + ": an SDXL pipeline (second text encoder, size conditioning): "
                                "`tpumesh simulate` prices it; generate runs SD 1.x and 2.x");
    g->unet_ = std::make_unique<models::UNetModel>(std::move(m));
  }
  {
    TPUMESH_ASSIGN_OR_RETURN(models::VaeModel m, LoadVae(*file));
    g->vae_ = std::make_unique<models::VaeModel>(std::move(m));
  }
  if (!file->Has("scheduler/scheduler_config.json"))
    return NotFoundError(path + ": the model has no scheduler (no scheduler/scheduler_config.json)");
  TPUMESH_ASSIGN_OR_RETURN(g->scheduler_json_, file->ReadText("scheduler/scheduler_config.json"));
  // Checked now, so that a bad config is reported before any compute.
  {
    TPUMESH_ASSIGN_OR_RETURN(auto cfg, SchedulerConfig::FromJson(g->scheduler_json_,
                                                                 path + ": scheduler/scheduler_config.json"));
    (void)cfg;
  }
  const auto& uc = g->unet_->config();
  if (g->text_encoder_->config().hidden_size != uc.cross_attention_dim.front())
    return InvalidArgumentError(path + ": the text encoder's hidden_size " +
                                std::to_string(g->text_encoder_->config().hidden_size) +
                                " differs from the UNet's cross_attention_dim " +
                                std::to_string(uc.cross_attention_dim.front()));
  if (g->vae_->config().latent_channels != uc.in_channels || uc.out_channels != uc.in_channels)
    return InvalidArgumentError(path + ": the VAE's latent_channels " +
                                std::to_string(g->vae_->config().latent_channels) +
                                " do not match the UNet's in/out channels " + std::to_string(uc.in_channels));

  TPUMESH_ASSIGN_OR_RETURN(mesh::ChipSpec chip, mesh::LoadChipSpec(o.chip));
  TPUMESH_ASSIGN_OR_RETURN(std::vector<int> dims, mesh::Topology::DimsForDevices(chip, o.devices));
  mesh::MeshOptions mo;
  mo.threads_per_device = o.threads_per_device;
  TPUMESH_ASSIGN_OR_RETURN(g->mesh_, mesh::Mesh::Create(chip, dims, {{"data", o.devices}}, mo));
  return g;
}

int Generator::default_size() const { return unet_->config().sample_size * vae_->config().scale_factor(); }

Status Generator::Validate(const GenerateRequest& r) const {
  const int n = devices();
  if (r.batch_per_device < 1)
    return InvalidArgumentError("--batch-per-device must be >= 1, got " + std::to_string(r.batch_per_device));
  const int64_t b = static_cast<int64_t>(n) * r.batch_per_device;
  if (r.prompts.empty()) return InvalidArgumentError("no prompt given (--prompt or --prompts-file)");
  if (r.prompts.size() != 1 && static_cast<int64_t>(r.prompts.size()) != b)
    return InvalidArgumentError(std::to_string(r.prompts.size()) + " prompts for a batch of " + std::to_string(b) +
                                " images (" + std::to_string(n) + " devices x " +
                                std::to_string(r.batch_per_device) +
                                " per device): give one prompt, or one per image");
  if (!r.negative_prompts.empty() && r.negative_prompts.size() != 1 &&
      r.negative_prompts.size() != r.prompts.size())
    return InvalidArgumentError(std::to_string(r.negative_prompts.size()) + " negative prompts for " +
                                std::to_string(r.prompts.size()) +
                                " prompts: give none, one, or one per prompt");
  if (r.steps < 1) return InvalidArgumentError("--steps must be >= 1, got " + std::to_string(r.steps));
  if (!std::isfinite(r.guidance)) return InvalidArgumentError("--guidance must be a finite number");
  const int factor = vae_->config().scale_factor();
  const int unet_factor = 1 << (static_cast<int>(unet_->config().block_out_channels.size()) - 1);
  const int h = r.height > 0 ? r.height : default_size();
  const int w = r.width > 0 ? r.width : default_size();
  if (r.height < 0 || r.width < 0) return InvalidArgumentError("--height and --width must be positive");
  for (auto [name, v] : {std::pair<const char*, int>{"--height", h}, {"--width", w}}) {
    if (v % (factor * unet_factor) != 0)
      return InvalidArgumentError(std::string(name) + " " + std::to_string(v) + " is not a multiple of " +
                                  std::to_string(factor * unet_factor) + " (the VAE's factor " +
                                  std::to_string(factor) + " times the UNet's " + std::to_string(unet_factor) +
                                  ")");
  }
  if (r.initial_latents) {
    const mesh::Shape want{b, unet_->config().in_channels, h / factor, w / factor};
    if (r.initial_latents->dtype() != DType::kF32 || r.initial_latents->shape() != want)
      return InvalidArgumentError("--latents: 'latents' is " + r.initial_latents->ToString() + ", need f32" +
                                  mesh::ShapeToString(want));
  }
  if (!r.scheduler.empty()) {
    bool known = false;
    for (const std::string& s : SchedulerNames()) known |= s == r.scheduler;
    if (!known) {
      std::string names;
      for (const std::string& s : SchedulerNames()) names += (names.empty() ? "" : ", ") + s;
      return InvalidArgumentError("unknown scheduler '" + r.scheduler + "' (" + names + ")");
    }
  }
  return OkStatus();
}

StatusOr<Generator::Plan*> Generator::GetPlan(const GenerateRequest& r, int height, int width, bool* built) {
  std::string scheduler = r.scheduler;
  SchedulerConfig cfg;
  {
    TPUMESH_ASSIGN_OR_RETURN(cfg, SchedulerConfig::FromJson(scheduler_json_, "scheduler/scheduler_config.json"));
  }
  if (scheduler.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(scheduler, SchedulerNameOfClass(cfg.class_name));
  }
  std::string overrides;
  for (const auto& [k, v] : r.scheduler_overrides) {
    TPUMESH_RETURN_IF_ERROR(cfg.Set(k, v));
    overrides += k + "=" + v + ";";
  }
  PlanKey key{r.batch_per_device, height, width, r.steps, scheduler + "|" + overrides,
              static_cast<int>(r.precision)};
  *built = false;
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();

  auto plan = std::make_unique<Plan>();
  TPUMESH_ASSIGN_OR_RETURN(auto sched, MakeScheduler(scheduler, cfg));
  TPUMESH_RETURN_IF_ERROR(sched->SetTimesteps(r.steps));
  plan->scheduler_config = cfg;
  plan->scheduler = scheduler;
  plan->timesteps = sched->timesteps();
  plan->init_noise_sigma = sched->init_noise_sigma();
  plan->height = height;
  plan->width = width;
  plan->latent_h = height / vae_->config().scale_factor();
  plan->latent_w = width / vae_->config().scale_factor();
  // The parameters go to the devices once, with the first plan (the
  // transfer jax does on the first call of the pmapped function).
  if (replicas_.empty()) {
    for (const models::ParamMap* params : {&text_encoder_->params(), &unet_->params(), &vae_->params()}) {
      for (const auto& [name, a] : params->all()) {
        auto rep = mesh_->Replicate(a);
        if (!rep.ok()) {
          replicas_.clear();
          return rep.status().WithContext("replicating parameter " + name);
        }
        replicas_.push_back(std::move(rep).value());
      }
    }
  }
  *built = true;
  Plan* p = plan.get();
  plans_.emplace(key, std::move(plan));
  return p;
}

StatusOr<GenerateResult> Generator::Generate(const GenerateRequest& r, const ProgressFn& progress,
                                             const std::atomic<bool>* cancel) {
  TPUMESH_RETURN_IF_ERROR(Validate(r));
  const int n = devices();
  const int64_t bpd = r.batch_per_device;
  const int64_t b = n * bpd;
  const int height = r.height > 0 ? r.height : default_size();
  const int width = r.width > 0 ? r.width : default_size();

  GenerateResult res;
  res.height = height;
  res.width = width;
  for (int64_t i = 0; i < b; ++i) {
    res.prompts.push_back(r.prompts.size() == 1 ? r.prompts[0] : r.prompts[i]);
    const size_t neg = r.prompts.size() == 1 ? 0 : static_cast<size_t>(i);
    res.negative_prompts.push_back(r.negative_prompts.empty()       ? std::string()
                                   : r.negative_prompts.size() == 1 ? r.negative_prompts[0]
                                                                    : r.negative_prompts[neg]);
  }
  // Tokenize on the host, like the pipeline's prepare_inputs.
  Array cond = Array::Host(DType::kI32, {b, 77});
  Array uncond = Array::Host(DType::kI32, {b, 77});
  for (int64_t i = 0; i < b; ++i) {
    auto c = tokenizer_->EncodePadded(res.prompts[i], 77);
    if (!c.ok()) return c.status().WithContext("prompt " + std::to_string(i));
    std::copy(c->begin(), c->end(), cond.mutable_data<int32_t>() + i * 77);
    auto u = tokenizer_->EncodePadded(res.negative_prompts[i], 77);
    if (!u.ok()) return u.status().WithContext("negative prompt " + std::to_string(i));
    std::copy(u->begin(), u->end(), uncond.mutable_data<int32_t>() + i * 77);
  }

  const auto t_compile = Clock::now();
  bool built = false;
  TPUMESH_ASSIGN_OR_RETURN(Plan * plan, GetPlan(r, height, width, &built));
  res.compiled = built;
  res.compile_seconds = built ? Since(t_compile) : 0;
  res.scheduler = plan->scheduler;
  res.timesteps = plan->timesteps;

  // One key per image: split(key(seed), B).
  TPUMESH_ASSIGN_OR_RETURN(std::vector<mesh::PrngKey> keys, mesh::SplitChecked(mesh::KeyFromSeed(r.seed),
                                                                               static_cast<int>(b), r.prng));
  Array key_data = Array::Host(DType::kU32, {b, 2});
  for (int64_t i = 0; i < b; ++i) {
    key_data.mutable_data<uint32_t>()[2 * i] = keys[i][0];
    key_data.mutable_data<uint32_t>()[2 * i + 1] = keys[i][1];
  }
  const int64_t c = unet_->config().in_channels;
  const mesh::Shape one{1, c, plan->latent_h, plan->latent_w};
  const int64_t per_image = mesh::NumElements(one);
  Array given = r.initial_latents ? *r.initial_latents : Array::Host(DType::kF32, {b, 0});

  std::vector<DistributedArray> args;
  for (const Array* a : {&cond, &uncond, &key_data, &given}) {
    TPUMESH_ASSIGN_OR_RETURN(DistributedArray d, mesh_->Shard(*a));
    args.push_back(std::move(d));
  }
  const int steps = static_cast<int>(plan->timesteps.size());
  const bool keep = r.keep_step_latents;
  const float g = r.guidance;
  const float scaling = vae_->config().scaling_factor;
  const bool draw = !r.initial_latents.has_value();
  const mesh::PrngImpl impl = r.prng;

  // Progress counts the work of every device: the devices share the host's
  // cores, so one device's count alone runs ahead of the rest.
  std::mutex progress_mu;
  std::map<std::string, int> progress_done;
  auto report = [&](const std::string& phase, int delta, int per_device) {
    if (!progress) return;
    std::lock_guard<std::mutex> lock(progress_mu);
    progress(phase, progress_done[phase] += delta, per_device * n);
  };

  const bool cfg = r.guidance > 1.0f;  // diffusers' do_classifier_free_guidance
  const int64_t rows = cfg ? 2 * bpd : bpd;
  std::vector<std::vector<mesh::OpRecord>> records(n);
  mesh_->ResetClocks();
  const auto t_run = Clock::now();
  auto body = [&](mesh::DeviceContext& dctx, std::span<const Array> a) -> StatusOr<std::vector<Array>> {
    models::Ctx ctx{&dctx.device(), r.precision};
    ctx.ops = &records[dctx.device_id()];
    const bool bf16_bytes = r.precision == models::Precision::kDefault;
    // Text: [uncond; cond] in one batch, as the pipeline concatenates them.
    Array ids = Array::Host(DType::kI32, {rows, 77});
    if (cfg) std::memcpy(ids.mutable_data<int32_t>(), a[1].data<int32_t>(), bpd * 77 * sizeof(int32_t));
    std::memcpy(ids.mutable_data<int32_t>() + (rows - bpd) * 77, a[0].data<int32_t>(), bpd * 77 * sizeof(int32_t));
    if (dctx.device_id() == 0) report("text", 0, 1);
    TPUMESH_ASSIGN_OR_RETURN(Array context, text_encoder_->Forward(ctx, ids));
    report("text", 1, 1);

    TPUMESH_ASSIGN_OR_RETURN(Array init, ctx.Alloc({bpd, c, plan->latent_h, plan->latent_w}, "latents"));
    if (draw) {
      DrawLatents(a[2].data<uint32_t>(), bpd, impl, one, init.mutable_data<float>());
    } else {
      std::memcpy(init.mutable_data<float>(), a[3].data<float>(), init.size_bytes());
    }
    TPUMESH_ASSIGN_OR_RETURN(Array x, ctx.Alloc(init.shape(), "latents"));
    const size_t nx = static_cast<size_t>(x.num_elements());
    for (size_t i = 0; i < nx; ++i) x.mutable_data<float>()[i] = init.data<float>()[i] * plan->init_noise_sigma;

    TPUMESH_ASSIGN_OR_RETURN(auto sched, MakeScheduler(plan->scheduler, plan->scheduler_config));
    TPUMESH_RETURN_IF_ERROR(sched->SetTimesteps(r.steps));
    Array history = Array::Host(DType::kF32, {keep ? steps : 0, bpd, c, plan->latent_h, plan->latent_w});
    TPUMESH_ASSIGN_OR_RETURN(Array model_in, ctx.Alloc({rows, c, plan->latent_h, plan->latent_w}, "unet input"));
    std::vector<float> guided(nx);
    const uint32_t* dev_keys = a[2].data<uint32_t>();
    NoiseFn noise = [&](int step, float* out, size_t count) {
      (void)count;
      DrawLatents(dev_keys, bpd, impl, one, out, static_cast<uint32_t>(step + 1));
    };
    for (int s = 0; s < steps; ++s) {
      if (cancel && cancel->load()) return CancelledError("cancelled at step " + std::to_string(s));
      float* in = model_in.mutable_data<float>();
      std::memcpy(in, x.data<float>(), nx * sizeof(float));
      if (cfg) std::memcpy(in + nx, x.data<float>(), nx * sizeof(float));
      sched->ScaleModelInput(in, (cfg ? 2 : 1) * nx, s);
      const std::vector<float> t(rows, static_cast<float>(plan->timesteps[s]));
      TPUMESH_ASSIGN_OR_RETURN(Array eps, unet_->Forward(ctx, model_in, t, context));
      const float* u = eps.data<float>();
      if (cfg) {
        const float* cnd = u + nx;
        for (size_t i = 0; i < nx; ++i) {
          const float diff = cnd[i] - u[i];
          const float scaled = g * diff;
          guided[i] = u[i] + scaled;
        }
        ctx.ops->push_back(GuidanceRecord(static_cast<int64_t>(nx), bf16_bytes));
      } else {
        std::memcpy(guided.data(), u, nx * sizeof(float));
      }
      TPUMESH_RETURN_IF_ERROR(sched->Step(guided.data(), s, x.mutable_data<float>(), nx, noise));
      ctx.ops->push_back(SchedulerStepRecord(plan->scheduler, static_cast<int64_t>(nx), bf16_bytes));
      if (keep) std::memcpy(history.mutable_data<float>() + s * nx, x.data<float>(), nx * sizeof(float));
      report("denoise", 1, steps);
    }
    if (dctx.device_id() == 0) report("decode", 0, 1);
    for (size_t i = 0; i < nx; ++i) x.mutable_data<float>()[i] = x.data<float>()[i] / scaling;
    TPUMESH_ASSIGN_OR_RETURN(Array decoded, vae_->Decode(ctx, x));
    report("decode", 1, 1);
    return std::vector<Array>{decoded, init, history};
  };
  TPUMESH_ASSIGN_OR_RETURN(auto outs, mesh_->Pmap(body, args));
  TPUMESH_ASSIGN_OR_RETURN(Array decoded, Unstack(outs[0]));
  TPUMESH_ASSIGN_OR_RETURN(res.initial_latents, Unstack(outs[1]));
  if (keep) {
    // [n, steps, bpd, ...] -> [steps, B, ...]
    TPUMESH_ASSIGN_OR_RETURN(Array h, outs[2].Gather());
    res.latents_after_step = Array::Host(DType::kF32, {steps, b, c, plan->latent_h, plan->latent_w});
    const int64_t block = bpd * per_image;
    for (int d = 0; d < n; ++d)
      for (int s = 0; s < steps; ++s)
        std::memcpy(res.latents_after_step.mutable_data<float>() + (s * b + d * bpd) * per_image,
                    h.data<float>() + (static_cast<int64_t>(d) * steps + s) * block, block * sizeof(float));
  }
  const int64_t img = 3 * static_cast<int64_t>(height) * width;
  for (int64_t i = 0; i < b; ++i) res.images.push_back(ToUint8Image(decoded.data<float>() + i * img, height, width));
  res.run_seconds = Since(t_run);
  res.report.mode = "generate";
  res.report.chip = mesh_->chip();
  res.report.devices = n;
  res.report.images = b;
  res.report.host_seconds = res.run_seconds;
  res.report.Finish(records, r.keep_ops);
  for (int d = 0; d < n; ++d) mesh_->device(d).AdvanceClock(res.report.logs[d].seconds());
  res.modelled_seconds = mesh_->MaxClockSeconds();
  return res;
}

StatusOr<std::vector<std::string>> WriteImages(const std::string& dir, const GenerateResult& res,
                                               const GenerateRequest& r, const std::string& model_name) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgumentError("cannot create output directory " + dir + ": " + ec.message());
  const int b = static_cast<int>(res.images.size());
  const int digits = std::max(2, static_cast<int>(std::to_string(std::max(b - 1, 0)).size()));
  std::vector<std::string> written;
  auto params = [&](int i) {
    std::ostringstream s;
    s << res.prompts[i] << "\nNegative prompt: " << res.negative_prompts[i] << "\nSteps: " << r.steps
      << ", Scheduler: " << res.scheduler << ", Guidance: " << r.guidance << ", Seed: " << r.seed
      << ", Image: " << i << " of " << b << ", Size: " << res.width << "x" << res.height
      << ", Precision: " << PrecisionName(r.precision) << ", Model: " << model_name;
    return s.str();
  };
  for (int i = 0; i < b; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "image_%0*d.png", digits, i);
    const std::string path = (std::filesystem::path(dir) / name).string();
    TPUMESH_RETURN_IF_ERROR(WritePngAtomic(path, res.images[i], {{"parameters", params(i)}}));
    written.push_back(path);
  }
  const auto [rows, cols] = GridShape(b);
  TPUMESH_ASSIGN_OR_RETURN(Image grid, MakeImageGrid(res.images, rows, cols));
  std::ostringstream s;
  s << "grid " << rows << "x" << cols << " of " << b << " images\n" << params(0);
  const std::string path = (std::filesystem::path(dir) / "grid.png").string();
  TPUMESH_RETURN_IF_ERROR(WritePngAtomic(path, grid, {{"parameters", s.str()}}));
  written.push_back(path);
  return written;
}

}  // namespace tpumesh::pipeline
