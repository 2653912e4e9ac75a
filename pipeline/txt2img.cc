#include "pipeline/txt2img.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>

#include "base/printable.h"
#include "nlohmann/json.hpp"
#include "report/report.h"

namespace tpumesh::pipeline {
namespace {

using mesh::Array;
using mesh::DType;

// The per-image noise of the pipeline: normal(key, [1, C, h, w]) for each
// image's key (folded with `fold` when non-zero), row after row.
void DrawLatents(const uint32_t* keys, int64_t images, mesh::PrngImpl impl, const mesh::Shape& one, float* out,
                 uint32_t fold = 0) {
  const int64_t per = mesh::NumElements(one);
  for (int64_t i = 0; i < images; ++i) {
    mesh::PrngKey k{keys[2 * i], keys[2 * i + 1]};
    if (fold != 0) k = mesh::FoldIn(k, fold, impl);
    mesh::Normal(k, impl, one, out + i * per);
  }
}

// torch.nn.functional.interpolate(mask, size=(h, w)) (mode "nearest": source
// index floor(dst * in / out) in f32, as torch computes its scale) of masks
// [b, 1, H, W] -> [b, 1, h, w].
void DownsampleMask(const float* mask, int64_t b, const Txt2ImgPlan& plan, float* out) {
  const float sy = static_cast<float>(plan.height) / static_cast<float>(plan.latent_h);
  const float sx = static_cast<float>(plan.width) / static_cast<float>(plan.latent_w);
  for (int64_t i = 0; i < b; ++i)
    for (int y = 0; y < plan.latent_h; ++y) {
      const int64_t src_y = std::min<int64_t>(static_cast<int64_t>(std::floor(y * sy)), plan.height - 1);
      for (int x = 0; x < plan.latent_w; ++x) {
        const int64_t src_x = std::min<int64_t>(static_cast<int64_t>(std::floor(x * sx)), plan.width - 1);
        out[(i * plan.latent_h + y) * plan.latent_w + x] = mask[(i * plan.height + src_y) * plan.width + src_x];
      }
    }
}

// diffusers' get_timesteps: init_timestep = min(int(steps * strength), steps)
// in Python floats (double: 0.7 * 10 is 7, not 6.99...).
int InitTimesteps(int steps, double strength) {
  return std::min(static_cast<int>(static_cast<double>(steps) * strength), steps);
}

bool SizesSet(const SizeConditioning& s) {
  for (const auto* a : {&s.original_size, &s.crops_coords_top_left, &s.target_size})
    if ((*a)[0] != 0 || (*a)[1] != 0) return true;
  return false;
}

// Records of the pipeline's own small steps, so that real runs and
// simulations count the same work: classifier-free guidance u + g (c - u)
// over n latent values, and one scheduler step over n values.
mesh::OpRecord GuidanceRecord(int64_t n, bool bf16_bytes) {
  mesh::OpRecord r;
  r.name = "guidance";
  r.type = "elementwise";
  r.shape = "latents[" + std::to_string(n) + "]";
  r.cost.flops = 3.0 * n;  // c - u, g * d, u + s
  const double b = bf16_bytes ? 2 : 4;
  r.cost.bytes_read = 2 * b * n;
  r.cost.bytes_written = b * n;
  return r;
}

mesh::OpRecord SchedulerStepRecord(const std::string& scheduler, int64_t n, bool bf16_bytes) {
  mesh::OpRecord r;
  r.name = "scheduler_step_" + scheduler;
  r.type = "elementwise";
  r.shape = "latents[" + std::to_string(n) + "]";
  // About 8 flops per value (the step's axpy-like combinations) over the
  // sample, the model output and one history term; the latents stay f32.
  (void)bf16_bytes;
  r.cost.flops = 8.0 * n;
  r.cost.bytes_read = 3 * 4.0 * n;
  r.cost.bytes_written = 4.0 * n;
  return r;
}

// A dry run's denoising steps all record the same ops (the same shapes and
// allocations): the first step is run and each later one repeats its
// records, [begin, end) of ctx.ops.
void RepeatDryStep(const models::Ctx& ctx, size_t begin, size_t end) {
  if (!ctx.ops) return;
  ctx.ops->reserve(ctx.ops->size() + (end - begin));
  for (size_t i = begin; i < end; ++i) ctx.ops->push_back((*ctx.ops)[i]);
}

}  // namespace

StatusOr<std::unique_ptr<TextToImage>> TextToImage::Create(Parts parts) {
  if (parts.transformer != nullptr) {
    const auto& tc = parts.transformer->config();
    const int latent = parts.vae->config().latent_channels;
    if (tc.in_channels != 4 * latent || tc.out() != 4 * latent)
      return InvalidArgumentError(parts.origin + ": the VAE's latent_channels " + std::to_string(latent) +
                                  " do not match the transformer's in/out channels " +
                                  std::to_string(tc.in_channels) + "/" + std::to_string(tc.out()) +
                                  " (4 x the latent channels: 2x2 patches)");
    TPUMESH_RETURN_IF_ERROR(
        SchedulerConfig::FromJson(parts.scheduler_json, parts.origin + ": scheduler/scheduler_config.json").status());
    return std::unique_ptr<TextToImage>(new TextToImage(std::move(parts)));
  }
  const auto& uc = parts.unet->config();
  TPUMESH_RETURN_IF_ERROR(parts.conditioning->CheckUNet(uc, parts.origin));
  const int latent = parts.vae->config().latent_channels;
  // An inpainting UNet takes the latents, the mask and the masked image's
  // latents (diffusers checks the same sum).
  if (uc.out_channels != latent || (uc.in_channels != latent && uc.in_channels != 2 * latent + 1))
    return InvalidArgumentError(parts.origin + ": the VAE's latent_channels " + std::to_string(latent) +
                                " do not match the UNet's in/out channels " + std::to_string(uc.in_channels) + "/" +
                                std::to_string(uc.out_channels) + " (in: " + std::to_string(latent) +
                                ", or " + std::to_string(2 * latent + 1) + " for an inpainting UNet)");
  // Checked now, so that a bad config is reported before any compute.
  TPUMESH_RETURN_IF_ERROR(
      SchedulerConfig::FromJson(parts.scheduler_json, parts.origin + ": scheduler/scheduler_config.json").status());
  return std::unique_ptr<TextToImage>(new TextToImage(std::move(parts)));
}

std::vector<ComponentParams> TextToImage::components() const {
  std::vector<ComponentParams> c = conditioning().components();
  if (is_flux()) {
    c.push_back({"transformer", &transformer().ranks(), models::FluxTransformerParams(transformer().config())});
  } else {
    c.push_back({"unet", &unet().ranks(), models::UNetParams(unet().config())});
  }
  c.push_back({"vae", &vae().ranks(), models::VaeParams(vae().config())});
  return c;
}

int TextToImage::default_size() const {
  return is_flux() ? vae().config().sample_size : unet().config().sample_size * vae().config().scale_factor();
}

std::pair<int, int> TextToImage::ImageSize(const GenerateRequest& r) const {
  const Image* init = r.init_images.empty() ? nullptr : &r.init_images[0].image;
  return {r.height > 0 ? r.height : init ? init->height : default_size(),
          r.width > 0 ? r.width : init ? init->width : default_size()};
}

ImageSource TextToImage::Source(const GenerateRequest& r) const {
  if (r.init_images.empty()) return ImageSource::kText;
  if (r.masks.empty() || is_flux()) return ImageSource::kImage;
  return unet().config().in_channels == vae().config().latent_channels ? ImageSource::kInpaint
                                                                        : ImageSource::kInpaintUNet;
}

Status TextToImage::Validate(const GenerateRequest& r, int devices, bool dry_run) const {
  if (devices < 1) return InvalidArgumentError("--devices must be >= 1, got " + std::to_string(devices));
  if (r.batch_per_device < 1)
    return InvalidArgumentError("--batch-per-device must be >= 1, got " + std::to_string(r.batch_per_device));
  const int64_t b = static_cast<int64_t>(devices) * r.batch_per_device;
  if (!dry_run) {
    if (r.prompts.empty()) return InvalidArgumentError("no prompt given (--prompt or --prompts-file)");
    if (r.prompts.size() != 1 && static_cast<int64_t>(r.prompts.size()) != b)
      return InvalidArgumentError(std::to_string(r.prompts.size()) + " prompts for a batch of " + std::to_string(b) +
                                  " images (" + std::to_string(devices) + " devices x " +
                                  std::to_string(r.batch_per_device) +
                                  " per device): give one prompt, or one per image");
    if (!r.negative_prompts.empty() && r.negative_prompts.size() != 1 &&
        r.negative_prompts.size() != r.prompts.size())
      return InvalidArgumentError(std::to_string(r.negative_prompts.size()) + " negative prompts for " +
                                  std::to_string(r.prompts.size()) +
                                  " prompts: give none, one, or one per prompt");
  }
  // Sane limits, checked before anything is allocated: far beyond any real
  // use, well within what a host can hold for a dry run.
  if (r.batch_per_device > kMaxBatchPerDevice)
    return InvalidArgumentError("--batch-per-device " + std::to_string(r.batch_per_device) + ": at most " +
                                std::to_string(kMaxBatchPerDevice) + " images per device");
  if (r.steps < 1) return InvalidArgumentError("--steps must be >= 1, got " + std::to_string(r.steps));
  if (r.steps > kMaxSteps)
    return InvalidArgumentError("--steps " + std::to_string(r.steps) + ": at most " + std::to_string(kMaxSteps));
  if (r.guidance && !std::isfinite(*r.guidance)) return InvalidArgumentError("--guidance must be a finite number");
  if (r.height < 0 || r.width < 0) return InvalidArgumentError("--height and --width must be positive");
  const int factor = vae().config().scale_factor();
  // Flux packs 2x2 latent patches into a token.
  const int unet_factor = is_flux() ? 2 : 1 << (static_cast<int>(unet().config().block_out_channels.size()) - 1);
  TPUMESH_RETURN_IF_ERROR(ValidateImages(r, b));
  const auto [h, w] = ImageSize(r);
  for (auto [name, v] : {std::pair<const char*, int>{"--height", h}, {"--width", w}}) {
    if (v > kMaxImageSize)
      return InvalidArgumentError(std::string(name) + " " + std::to_string(v) + ": at most " +
                                  std::to_string(kMaxImageSize) + " pixels");
    if (v % (factor * unet_factor) != 0)
      return InvalidArgumentError(std::string(name) + " " + std::to_string(v) + " is not a multiple of " +
                                  std::to_string(factor * unet_factor) + " (the VAE's factor " +
                                  std::to_string(factor) + " times the " + (is_flux() ? "transformer's" : "UNet's") +
                                  " " + std::to_string(unet_factor) + ")");
  }
  if (SizesSet(r.sizes) && (is_flux() || !unet().config().text_time_embedding))
    return InvalidArgumentError(
        "--original-size, --crops-coords-top-left and --target-size condition SDXL models only; this is a " +
        std::string(family().name) + " model");
  for (auto [name, v] : {std::pair{"--original-size", r.sizes.original_size},
                         {"--crops-coords-top-left", r.sizes.crops_coords_top_left},
                         {"--target-size", r.sizes.target_size}})
    if (v[0] < 0 || v[1] < 0) return InvalidArgumentError(std::string(name) + " must not be negative");
  const int64_t latent = vae().config().latent_channels;
  if (r.initial_latents) {
    const mesh::Shape want{b, latent, h / factor, w / factor};
    if (r.initial_latents->dtype() != DType::kF32 || r.initial_latents->shape() != want)
      return InvalidArgumentError("--latents: 'latents' is " + r.initial_latents->ToString() + ", need f32" +
                                  mesh::ShapeToString(want));
  }
  if (r.posterior_noise) {
    const mesh::Shape want{b, 2, latent, h / factor, w / factor};
    if (r.posterior_noise->dtype() != DType::kF32 || r.posterior_noise->shape() != want)
      return InvalidArgumentError("the posterior noise is " + r.posterior_noise->ToString() + ", need f32" +
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
    // A flow-matching model's output is a velocity, a diffusion model's a
    // noise (or v): neither runs under the other's schedulers.
    if (is_flux() != (r.scheduler == kFlowScheduler))
      return InvalidArgumentError("--scheduler " + r.scheduler + ": " +
                                  (is_flux() ? "a Flux model runs with " + std::string(kFlowScheduler) + " only"
                                             : std::string(kFlowScheduler) + " is for Flux (flow-matching) models"));
  }
  return OkStatus();
}

Status TextToImage::ValidateImages(const GenerateRequest& r, int64_t b) const {
  if (is_flux()) {
    if (!r.init_images.empty() || !r.masks.empty() || r.strength || r.posterior_noise)
      return UnimplementedError("img2img and inpainting (--init-image, --mask, --strength) are not implemented for Flux");
    return OkStatus();
  }
  const bool inpainting_unet = unet().config().in_channels != vae().config().latent_channels;
  if (r.init_images.empty()) {
    if (!r.masks.empty()) return InvalidArgumentError("--mask needs --init-image (the image to repaint)");
    if (r.strength) return InvalidArgumentError("--strength needs --init-image (img2img or inpainting)");
    if (r.posterior_noise) return InvalidArgumentError("posterior noise given without an init image");
    if (inpainting_unet)
      return InvalidArgumentError("this is an inpainting model (its UNet takes " +
                                  std::to_string(unet().config().in_channels) +
                                  " channels: latents, mask, masked image): give --init-image and --mask");
    return OkStatus();
  }
  if (inpainting_unet && r.masks.empty())
    return InvalidArgumentError("this is an inpainting model (its UNet takes " +
                                std::to_string(unet().config().in_channels) +
                                " channels): --init-image needs a --mask");
  const std::string strength = r.strength ? ShortestNumber(*r.strength) : "";
  if (r.strength && !(*r.strength > 0.0 && *r.strength <= 1.0))
    return InvalidArgumentError(std::string("--strength ") + strength + ": must be in (0, 1]");
  if (r.strength && InitTimesteps(r.steps, *r.strength) < 1)
    return InvalidArgumentError(std::string("--strength ") + strength + " with --steps " + std::to_string(r.steps) +
                                " runs no step (int(steps x strength) = 0): raise --strength or --steps");
  for (auto [flag, list] : {std::pair<const char*, const std::vector<SourceImage>*>{"--init-image", &r.init_images},
                            {"--mask", &r.masks}}) {
    if (list->empty() || list->size() == 1 || static_cast<int64_t>(list->size()) == b) continue;
    return InvalidArgumentError(std::to_string(list->size()) + " " + flag + " files for a batch of " +
                                std::to_string(b) + " images: give one, or one per image");
  }
  const Image& first = r.init_images[0].image;
  for (const SourceImage& s : r.init_images)
    if (s.image.height != first.height || s.image.width != first.width)
      return InvalidArgumentError("--init-image " + s.name + " is " + std::to_string(s.image.width) + "x" +
                                  std::to_string(s.image.height) + ", " + r.init_images[0].name + " is " +
                                  std::to_string(first.width) + "x" + std::to_string(first.height) +
                                  ": the init images must have one size");
  for (const SourceImage& s : r.masks)
    if (s.image.height != first.height || s.image.width != first.width)
      return InvalidArgumentError("--mask " + s.name + " is " + std::to_string(s.image.width) + "x" +
                                  std::to_string(s.image.height) + ", the init image " + r.init_images[0].name +
                                  " is " + std::to_string(first.width) + "x" + std::to_string(first.height) +
                                  ": a mask must match its image");
  if ((r.height > 0 && r.height != first.height) || (r.width > 0 && r.width != first.width))
    return InvalidArgumentError("--init-image " + r.init_images[0].name + " is " + std::to_string(first.width) +
                                "x" + std::to_string(first.height) + ", the run asks for " +
                                std::to_string(r.width > 0 ? r.width : first.width) + "x" +
                                std::to_string(r.height > 0 ? r.height : first.height) +
                                " (--width x --height): resize the image, or leave the size to it");
  return OkStatus();
}

StatusOr<Txt2ImgPlan> TextToImage::MakePlan(const GenerateRequest& r) const {
  Txt2ImgPlan plan;
  TPUMESH_ASSIGN_OR_RETURN(plan.scheduler_config,
                           SchedulerConfig::FromJson(parts_.scheduler_json, "scheduler/scheduler_config.json"));
  plan.scheduler = r.scheduler;
  if (is_flux()) {
    // FluxPipeline's image_seq_len: the packed latent tokens.
    const auto [h, w] = ImageSize(r);
    const int f = 2 * vae().config().scale_factor();
    plan.scheduler_config.image_seq_len = int64_t{h / f} * (w / f);
  }
  if (plan.scheduler.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(plan.scheduler, SchedulerNameOfClass(plan.scheduler_config.class_name));
  }
  for (const auto& [k, v] : r.scheduler_overrides) TPUMESH_RETURN_IF_ERROR(plan.scheduler_config.Set(k, v));
  TPUMESH_ASSIGN_OR_RETURN(auto sched, MakeScheduler(plan.scheduler, plan.scheduler_config));
  TPUMESH_RETURN_IF_ERROR(sched->SetTimesteps(r.steps));
  plan.timesteps = sched->timesteps();
  plan.init_noise_sigma = sched->init_noise_sigma();
  plan.source = Source(r);
  if (plan.source != ImageSource::kText) {
    // diffusers' get_timesteps: t_start = steps - init_timestep.
    plan.strength = r.strength.value_or(plan.source == ImageSource::kImage ? family().default_img2img_strength
                                                                           : family().default_inpaint_strength);
    const int init_timestep = InitTimesteps(r.steps, plan.strength);
    if (init_timestep < 1) return InvalidArgumentError("no step to run");  // Validate says which flags
    plan.begin = (r.steps - init_timestep) * sched->order();
    plan.from_noise = plan.source != ImageSource::kImage && plan.strength == 1.0;
    TPUMESH_RETURN_IF_ERROR(sched->SetBeginIndex(plan.begin));
  }
  plan.steps = r.steps;
  plan.batch_per_device = r.batch_per_device;
  std::tie(plan.height, plan.width) = ImageSize(r);
  plan.latent_h = plan.height / vae().config().scale_factor();
  plan.latent_w = plan.width / vae().config().scale_factor();
  plan.channels = vae().config().latent_channels;
  plan.guided = !is_flux() && guidance(r) > 1.0f;
  plan.precision = r.precision;
  return plan;
}

std::array<float, 6> TextToImage::TimeIds(const GenerateRequest& r, const Txt2ImgPlan& plan) const {
  // diffusers' _get_add_time_ids: original_size + crops_coords_top_left +
  // target_size, sizes defaulting to (height, width).
  auto size = [&](const std::array<int, 2>& s) {
    return s[0] == 0 && s[1] == 0 ? std::array<int, 2>{plan.height, plan.width} : s;
  };
  const auto o = size(r.sizes.original_size), t = size(r.sizes.target_size);
  const auto& c = r.sizes.crops_coords_top_left;
  return {static_cast<float>(o[0]), static_cast<float>(o[1]), static_cast<float>(c[0]),
          static_cast<float>(c[1]), static_cast<float>(t[0]), static_cast<float>(t[1])};
}

StatusOr<DeviceOutputs> TextToImage::RunDevice(const models::Ctx& ctx, const Txt2ImgPlan& plan,
                                               const GenerateRequest& r, const DeviceInputs& in,
                                               const DeviceProgressFn& progress,
                                               const std::atomic<bool>* cancel) const {
  if (is_flux()) return RunFlux(ctx, plan, r, in, progress, cancel);
  auto report = [&](const char* phase, int done, int total) {
    if (progress) progress(phase, done, total);
  };
  const int64_t bpd = plan.batch_per_device;
  const int64_t c = plan.channels;
  const bool guided = plan.guided;
  const int64_t rows = guided ? 2 * bpd : bpd;
  const bool bf16_bytes = plan.precision == models::Precision::kDefault;
  const float g = guidance(r);
  const mesh::Shape one{1, c, plan.latent_h, plan.latent_w};

  if (in.device_id == 0) report("text", 0, 1);
  ConditioningOptions co;
  co.guided = guided;
  co.negatives_given = !r.negative_prompts.empty();
  co.time_ids = TimeIds(r, plan);
  TPUMESH_ASSIGN_OR_RETURN(UNetConditioning cond, conditioning().Encode(ctx, in.ids, co));
  report("text", 1, 1);
  if (in.on_phase_done) in.on_phase_done("text");

  DeviceOutputs out;
  TPUMESH_ASSIGN_OR_RETURN(out.initial_latents, ctx.Alloc({bpd, c, plan.latent_h, plan.latent_w}, "latents"));
  TPUMESH_ASSIGN_OR_RETURN(Array x, ctx.Alloc(out.initial_latents.shape(), "latents"));
  const size_t nx = static_cast<size_t>(x.num_elements());
  if (!ctx.dry_run) {
    float* init = out.initial_latents.mutable_data<float>();
    if (in.latents != nullptr) {
      std::memcpy(init, in.latents, nx * sizeof(float));
    } else {
      DrawLatents(in.keys, bpd, r.prng, one, init);
    }
  }

  TPUMESH_ASSIGN_OR_RETURN(auto sched, MakeScheduler(plan.scheduler, plan.scheduler_config));
  TPUMESH_RETURN_IF_ERROR(sched->SetTimesteps(plan.steps));
  const ImageSource source = plan.source;
  const bool inpaint_unet = source == ImageSource::kInpaintUNet;
  // The init image's latents (img2img, inpainting) and, for an inpainting
  // UNet, the mask and the masked image's latents at the latents' size.
  Array image_latents, mask_latents, masked_latents;
  if (source != ImageSource::kText) {
    if (in.device_id == 0) report("encode", 0, 1);
    TPUMESH_RETURN_IF_ERROR(sched->SetBeginIndex(plan.begin));
    const bool need_image = !(inpaint_unet && plan.from_noise);  // as diffusers' prepare_latents
    if (need_image) {
      TPUMESH_ASSIGN_OR_RETURN(image_latents, EncodeImages(ctx, plan, in, r.prng, /*masked=*/false));
    }
    if (source != ImageSource::kImage) {
      TPUMESH_ASSIGN_OR_RETURN(mask_latents, ctx.Alloc({bpd, 1, plan.latent_h, plan.latent_w}, "mask"));
      if (!ctx.dry_run) DownsampleMask(in.mask, bpd, plan, mask_latents.mutable_data<float>());
    }
    if (inpaint_unet) {
      TPUMESH_ASSIGN_OR_RETURN(masked_latents, EncodeImages(ctx, plan, in, r.prng, /*masked=*/true));
    }
    report("encode", 1, 1);
  }
  if (!ctx.dry_run) {
    const float* init = out.initial_latents.data<float>();
    float* xs = x.mutable_data<float>();
    if (source == ImageSource::kText || plan.from_noise) {
      for (size_t i = 0; i < nx; ++i) xs[i] = init[i] * plan.init_noise_sigma;
    } else {
      TPUMESH_RETURN_IF_ERROR(sched->AddNoise(image_latents.data<float>(), init, plan.begin, xs, nx));
    }
  }
  const int steps = static_cast<int>(plan.timesteps.size());
  const int run_steps = steps - plan.begin;
  const bool keep = r.keep_step_latents && !ctx.dry_run;
  out.history = Array::Host(DType::kF32, {keep ? run_steps : 0, bpd, c, plan.latent_h, plan.latent_w});
  const int64_t unet_c = unet().config().in_channels;
  TPUMESH_ASSIGN_OR_RETURN(Array model_in, ctx.Alloc({rows, unet_c, plan.latent_h, plan.latent_w}, "unet input"));
  TPUMESH_ASSIGN_OR_RETURN(Array scaled, ctx.Alloc({rows, c, plan.latent_h, plan.latent_w}, "unet input"));
  std::vector<float> guided_out(nx), proper(source == ImageSource::kInpaint ? nx : 0);
  NoiseFn noise = [&](int step, float* dst, size_t) {
    if (!ctx.dry_run) DrawLatents(in.keys, bpd, r.prng, one, dst, static_cast<uint32_t>(step + 1));
  };
  if (in.device_id == 0) report("denoise", 0, run_steps);
  size_t step_ops_begin = 0, step_ops_end = 0;
  const int64_t hw = int64_t{plan.latent_h} * plan.latent_w;
  for (int s = plan.begin; s < steps; ++s) {
    if (cancel && cancel->load()) return CancelledError("cancelled at step " + std::to_string(s - plan.begin));
    if (ctx.dry_run && s > plan.begin) {
      RepeatDryStep(ctx, step_ops_begin, step_ops_end);
      report("denoise", 1, run_steps);
      continue;
    }
    if (ctx.ops) step_ops_begin = ctx.ops->size();
    if (!ctx.dry_run) {
      float* xin = scaled.mutable_data<float>();
      std::memcpy(xin, x.data<float>(), nx * sizeof(float));
      if (guided) std::memcpy(xin + nx, x.data<float>(), nx * sizeof(float));
      sched->ScaleModelInput(xin, (guided ? 2 : 1) * nx, s);
      if (inpaint_unet) {
        // [scaled latents, mask, masked image latents] along the channels,
        // each row's (the guided half repeats the images').
        float* dst = model_in.mutable_data<float>();
        for (int64_t row = 0; row < rows; ++row) {
          const int64_t img = row % bpd;
          float* d = dst + row * unet_c * hw;
          std::memcpy(d, xin + row * c * hw, c * hw * sizeof(float));
          std::memcpy(d + c * hw, mask_latents.data<float>() + img * hw, hw * sizeof(float));
          std::memcpy(d + (c + 1) * hw, masked_latents.data<float>() + img * c * hw, c * hw * sizeof(float));
        }
      }
    }
    const std::vector<float> t(rows, static_cast<float>(plan.timesteps[s]));
    TPUMESH_ASSIGN_OR_RETURN(Array eps, unet().Forward(ctx, inpaint_unet ? model_in : scaled, t, cond.context, {},
                                                       cond.added ? &*cond.added : nullptr));
    const float* u = eps.data<float>();
    if (guided) {
      if (!ctx.dry_run) {
        const float* cnd = u + nx;
        // u + g (c - u), op by op as torch (no FMA: -ffp-contract=off).
        for (size_t i = 0; i < nx; ++i) {
          const float diff = cnd[i] - u[i];
          const float scaled_diff = g * diff;
          guided_out[i] = u[i] + scaled_diff;
        }
      }
      if (ctx.ops) ctx.ops->push_back(GuidanceRecord(static_cast<int64_t>(nx), bf16_bytes));
    } else if (!ctx.dry_run) {
      std::memcpy(guided_out.data(), u, nx * sizeof(float));
    }
    const int done = s - plan.begin + 1;
    if (in.on_latents && in.every > 0 && done % in.every == 0 && done < run_steps && !ctx.dry_run) {
      // The step's estimate of the clean latents, x0 = (x - b eps) / a with
      // x = a x0 + b eps the scheduler's add_noise at this step (an epsilon
      // model's; other predictions show the noisy latents after the step).
      if (plan.scheduler_config.prediction_type == "epsilon") {
        const float one = 1.0f, zero = 0.0f;
        float a = 0, b = 0;
        TPUMESH_RETURN_IF_ERROR(sched->AddNoise(&one, &zero, s, &a, 1));
        TPUMESH_RETURN_IF_ERROR(sched->AddNoise(&zero, &one, s, &b, 1));
        std::vector<float> x0(nx);
        for (size_t i = 0; i < nx; ++i) x0[i] = (x.data<float>()[i] - b * guided_out[i]) / a;
        in.on_latents(done, run_steps, x0.data());
      }
    }
    if (!ctx.dry_run) TPUMESH_RETURN_IF_ERROR(sched->Step(guided_out.data(), s, x.mutable_data<float>(), nx, noise));
    if (ctx.ops) ctx.ops->push_back(SchedulerStepRecord(plan.scheduler, static_cast<int64_t>(nx), bf16_bytes));
    if (source == ImageSource::kInpaint && !ctx.dry_run) {
      // diffusers: the kept region (mask 0) is the image's latents noised to
      // the next step's level (clean after the last step):
      // (1 - m) * proper + m * x.
      const float* il = image_latents.data<float>();
      if (s + 1 < steps) {
        TPUMESH_RETURN_IF_ERROR(sched->AddNoise(il, out.initial_latents.data<float>(), s + 1, proper.data(), nx));
        il = proper.data();
      }
      float* xs = x.mutable_data<float>();
      for (int64_t img = 0; img < bpd; ++img)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t p = 0; p < hw; ++p) {
            const size_t i = static_cast<size_t>((img * c + ch) * hw + p);
            const float m = mask_latents.data<float>()[img * hw + p];
            const float keep_part = (1.0f - m) * il[i];
            const float new_part = m * xs[i];
            xs[i] = keep_part + new_part;
          }
    }
    if (keep)
      std::memcpy(out.history.mutable_data<float>() + (s - plan.begin) * nx, x.data<float>(), nx * sizeof(float));
    if (in.on_latents && in.every > 0 && done % in.every == 0 && done < run_steps && !ctx.dry_run &&
        plan.scheduler_config.prediction_type != "epsilon")
      in.on_latents(done, run_steps, x.data<float>());
    if (ctx.ops) step_ops_end = ctx.ops->size();
    report("denoise", 1, run_steps);
  }
  if (in.on_phase_done) in.on_phase_done("denoise");
  if (in.device_id == 0) report("decode", 0, 1);
  TPUMESH_ASSIGN_OR_RETURN(out.decoded, DecodeLatents(ctx, x));
  report("decode", 1, 1);
  return out;
}

StatusOr<Array> TextToImage::DecodeLatents(const models::Ctx& ctx, Array& x) const {
  // x / scaling_factor + shift_factor (0 but for Flux's VAE), op by op.
  const float scaling = vae().config().scaling_factor, shift = vae().config().shift_factor;
  const size_t nx = static_cast<size_t>(x.num_elements());
  if (!ctx.dry_run)
    for (size_t i = 0; i < nx; ++i) {
      const float v = x.data<float>()[i] / scaling;
      x.mutable_data<float>()[i] = shift == 0.0f ? v : v + shift;
    }
  // One image at a time, as diffusers' enable_vae_slicing: the bits of the
  // batched decode (each image's norms, convs and attention are its own)
  // with one image's activations live (~0.7 GB at 512x512), not bpd's.
  const int64_t bpd = x.dim(0);
  mesh::Shape one = x.shape();
  one[0] = 1;
  const size_t nx1 = nx / static_cast<size_t>(bpd);
  Array decoded;
  for (int64_t i = 0; i < bpd; ++i) {
    TPUMESH_ASSIGN_OR_RETURN(Array xi, ctx.Alloc(one, "latents"));
    if (!ctx.dry_run) std::memcpy(xi.mutable_data<float>(), x.data<float>() + i * nx1, nx1 * sizeof(float));
    TPUMESH_ASSIGN_OR_RETURN(Array di, vae().Decode(ctx, xi));
    if (i == 0) {
      mesh::Shape all = di.shape();
      all[0] = bpd;
      TPUMESH_ASSIGN_OR_RETURN(decoded, ctx.Alloc(all, "decoded"));
    }
    if (!ctx.dry_run)
      std::memcpy(decoded.mutable_data<float>() + i * di.num_elements(), di.data<float>(), di.size_bytes());
  }
  return decoded;
}

StatusOr<DeviceOutputs> TextToImage::RunFlux(const models::Ctx& ctx, const Txt2ImgPlan& plan,
                                             const GenerateRequest& r, const DeviceInputs& in,
                                             const DeviceProgressFn& progress,
                                             const std::atomic<bool>* cancel) const {
  auto report = [&](const char* phase, int done, int total) {
    if (progress) progress(phase, done, total);
  };
  const int64_t bpd = plan.batch_per_device, c = plan.channels, h = plan.latent_h, w = plan.latent_w;
  const int64_t gh = h / 2, gw = w / 2, tokens = gh * gw, pc = 4 * c;
  const bool bf16_bytes = plan.precision == models::Precision::kDefault;
  const mesh::Shape one{1, c, h, w};

  if (in.device_id == 0) report("text", 0, 1);
  ConditioningOptions co;
  co.guided = false;
  TPUMESH_ASSIGN_OR_RETURN(UNetConditioning cond, conditioning().Encode(ctx, in.ids, co));
  report("text", 1, 1);

  DeviceOutputs out;
  TPUMESH_ASSIGN_OR_RETURN(out.initial_latents, ctx.Alloc({bpd, c, h, w}, "latents"));
  TPUMESH_ASSIGN_OR_RETURN(Array x, ctx.Alloc({bpd, tokens, pc}, "latents"));
  const size_t nx = static_cast<size_t>(x.num_elements());
  // _pack_latents / _unpack_latents: [b, C, h, w] <-> [b, (h/2)(w/2), 4C],
  // token (r, q) holding channel c's 2x2 patch at c * 4 + dy * 2 + dx. Layout
  // changes (as NchwToNlc): not recorded.
  auto pack = [&](const float* src, float* dst, float scale) {
    for (int64_t i = 0; i < bpd; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t xx = 0; xx < w; ++xx)
            dst[(i * tokens + (y / 2) * gw + xx / 2) * pc + ch * 4 + (y % 2) * 2 + xx % 2] =
                src[((i * c + ch) * h + y) * w + xx] * scale;
  };
  auto unpack = [&](const float* src, float* dst) {
    for (int64_t i = 0; i < bpd; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t xx = 0; xx < w; ++xx)
            dst[((i * c + ch) * h + y) * w + xx] =
                src[(i * tokens + (y / 2) * gw + xx / 2) * pc + ch * 4 + (y % 2) * 2 + xx % 2];
  };
  if (!ctx.dry_run) {
    float* init = out.initial_latents.mutable_data<float>();
    if (in.latents != nullptr) {
      std::memcpy(init, in.latents, nx * sizeof(float));
    } else {
      DrawLatents(in.keys, bpd, r.prng, one, init);
    }
    pack(init, x.mutable_data<float>(), plan.init_noise_sigma);
  }
  TPUMESH_ASSIGN_OR_RETURN(auto sched, MakeScheduler(plan.scheduler, plan.scheduler_config));
  TPUMESH_RETURN_IF_ERROR(sched->SetTimesteps(plan.steps));
  const int steps = static_cast<int>(plan.timesteps.size());
  const bool keep = r.keep_step_latents && !ctx.dry_run;
  out.history = Array::Host(DType::kF32, {keep ? steps : 0, bpd, c, h, w});
  std::vector<float> unpacked(ctx.dry_run ? 0 : nx);
  models::FluxTransformerModel::Inputs ti;
  ti.hidden = &x;
  ti.h = gh;
  ti.w = gw;
  ti.context = &cond.context;
  ti.pooled = &cond.pooled;
  if (transformer().config().guidance_embeds) ti.guidance.assign(bpd, guidance(r));
  if (in.device_id == 0) report("denoise", 0, steps);
  size_t step_ops_begin = 0, step_ops_end = 0;
  for (int s = 0; s < steps; ++s) {
    if (cancel && cancel->load()) return CancelledError("cancelled at step " + std::to_string(s));
    if (ctx.dry_run && s > 0) {
      RepeatDryStep(ctx, step_ops_begin, step_ops_end);
      report("denoise", 1, steps);
      continue;
    }
    if (ctx.ops) step_ops_begin = ctx.ops->size();
    // FluxPipeline: timestep = t / 1000 in f32 (the transformer scales it back).
    ti.timesteps.assign(bpd, static_cast<float>(plan.timesteps[s]) / 1000.0f);
    TPUMESH_ASSIGN_OR_RETURN(Array v, transformer().Forward(ctx, ti));
    if (!ctx.dry_run) TPUMESH_RETURN_IF_ERROR(sched->Step(v.data<float>(), s, x.mutable_data<float>(), nx));
    if (ctx.ops) ctx.ops->push_back(SchedulerStepRecord(plan.scheduler, static_cast<int64_t>(nx), bf16_bytes));
    const int done = s + 1;
    const bool preview = in.on_latents && in.every > 0 && done % in.every == 0 && done < steps;
    if (!ctx.dry_run && (keep || preview)) {
      unpack(x.data<float>(), unpacked.data());
      if (keep) std::memcpy(out.history.mutable_data<float>() + s * nx, unpacked.data(), nx * sizeof(float));
      if (preview) in.on_latents(done, steps, unpacked.data());
    }
    if (ctx.ops) step_ops_end = ctx.ops->size();
    report("denoise", 1, steps);
  }
  if (in.device_id == 0) report("decode", 0, 1);
  TPUMESH_ASSIGN_OR_RETURN(Array latents, ctx.Alloc({bpd, c, h, w}, "latents"));
  if (!ctx.dry_run) unpack(x.data<float>(), latents.mutable_data<float>());
  TPUMESH_ASSIGN_OR_RETURN(out.decoded, DecodeLatents(ctx, latents));
  report("decode", 1, 1);
  return out;
}

StatusOr<Array> TextToImage::EncodeImages(const models::Ctx& ctx, const Txt2ImgPlan& plan, const DeviceInputs& in,
                                          mesh::PrngImpl prng, bool masked) const {
  // diffusers' _encode_vae_image / retrieve_latents: the posterior's sample
  // mean + std * noise, std = exp(0.5 * clamp(logvar, -30, 20)), times
  // scaling_factor; each op in f32. One image at a time (the encoder's
  // activations of one image live, as the decode).
  const int64_t bpd = plan.batch_per_device, c = plan.channels;
  const int64_t hw = int64_t{plan.latent_h} * plan.latent_w, n1 = c * hw;
  const int64_t pixels = int64_t{plan.height} * plan.width;
  const float scaling = vae().config().scaling_factor;
  const mesh::Shape one{1, c, plan.latent_h, plan.latent_w};
  TPUMESH_ASSIGN_OR_RETURN(Array latents, ctx.Alloc({bpd, c, plan.latent_h, plan.latent_w},
                                                    masked ? "masked image latents" : "image latents"));
  std::vector<float> eps(ctx.dry_run ? 0 : n1);
  for (int64_t i = 0; i < bpd; ++i) {
    TPUMESH_ASSIGN_OR_RETURN(Array img, ctx.Alloc({1, 3, plan.height, plan.width}, "image"));
    if (!ctx.dry_run) {
      float* d = img.mutable_data<float>();
      const float* src = in.image + i * 3 * pixels;
      for (int64_t p = 0; p < 3 * pixels; ++p) d[p] = src[p];
      // init_image * (mask < 0.5): the repainted region is zero.
      if (masked)
        for (int64_t ch = 0; ch < 3; ++ch)
          for (int64_t p = 0; p < pixels; ++p) d[ch * pixels + p] *= in.mask[i * pixels + p] < 0.5f ? 1.0f : 0.0f;
    }
    TPUMESH_ASSIGN_OR_RETURN(Array moments, vae().EncodeMoments(ctx, img));
    if (ctx.dry_run) continue;
    if (in.posterior_noise != nullptr) {
      std::memcpy(eps.data(), in.posterior_noise + (i * 2 + (masked ? 1 : 0)) * n1, n1 * sizeof(float));
    } else {
      DrawLatents(in.keys + 2 * i, 1, prng, one, eps.data(), kPosteriorFold[masked ? 1 : 0]);
    }
    const float* mean = moments.data<float>();
    const float* logvar = mean + n1;
    float* out = latents.mutable_data<float>() + i * n1;
    for (int64_t k = 0; k < n1; ++k) {
      const float lv = std::clamp(logvar[k], -30.0f, 20.0f);
      const float half = 0.5f * lv;
      const float std_dev = std::exp(half);
      const float noise_part = std_dev * eps[k];
      const float sample = mean[k] + noise_part;
      out[k] = scaling * sample;
    }
  }
  return latents;
}

Status CheckRealRunMesh(const mesh::Mesh& mesh) {
  if (mesh.axes().size() != 2)
    return InvalidArgumentError("--mesh " + mesh::MeshAxesToString(mesh.axes()) +
                                ": the fsdp axis is priced by simulate only; a real run splits over data and model");
  return OkStatus();
}

std::vector<report::RunReport::ShardedLayer> ShardingPlan(const std::vector<ComponentParams>& components, int model_ranks) {
  std::vector<report::RunReport::ShardedLayer> plan;
  const int m = model_ranks;
  if (m <= 1) return plan;
  const std::string suffix = ".weight";
  for (const ComponentParams& c : components) {
    for (const models::ParamSpec& p : c.manifest) {
      const models::ParamSplit& s = p.split;
      if (!s.SplitsOver(m) || p.name.size() < suffix.size() ||
          p.name.compare(p.name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const auto [u0, u1] = models::ShardUnits(s.units, m, 0);
      std::string what = s.dim == 1 ? "input features (partial sums added by psum)"
                         : s.even   ? "output channels (all_gathered)"
                         : p.shape.size() == 1 ? "channels (statistics local to each group)"
                                               : "output features (stay split)";
      const std::string parts = s.parts == 2  ? " in each of 2 halves"
                                : s.parts > 2 ? " in each of " + std::to_string(s.parts) + " parts"
                                              : "";
      what += " by " + std::to_string(s.units) + " " + s.unit + parts + "; rank 0 holds " + std::to_string(u1 - u0);
      plan.push_back({c.name + "/" + p.name.substr(0, p.name.size() - suffix.size()), what,
                      s.dim == 1 ? "psum" : s.even ? "all_gather" : "none"});
    }
  }
  return plan;
}

std::vector<int> DataShardDevices(const mesh::Mesh& mesh) {
  std::vector<int> devices;
  for (int i = 0; i < mesh.axes()[0].size; ++i) {
    const int at[] = {i, 0};
    devices.push_back(mesh.DeviceAt(at));
  }
  return devices;
}

mesh::DistributedArray DataShards(const mesh::Mesh& mesh, const mesh::DistributedArray& out) {
  mesh::DistributedArray d;
  for (const int device : DataShardDevices(mesh)) d.shards.push_back(out.shards[device]);
  return d;
}

StatusOr<mesh::Array> GatherDataShards(mesh::Mesh& mesh, const mesh::DistributedArray& out) {
  const std::vector<int> devices = DataShardDevices(mesh);
  TPUMESH_ASSIGN_OR_RETURN(mesh::DistributedArray all, mesh.GatherToRank(out, 0, devices));
  if (mesh.cluster().rank() != 0) return mesh::Array();
  return Unstack(DataShards(mesh, all));
}

StatusOr<mesh::Array> Unstack(const mesh::DistributedArray& d) {
  TPUMESH_ASSIGN_OR_RETURN(mesh::Array stacked, d.Gather());
  mesh::Shape s = stacked.shape();
  s[1] *= s[0];
  s.erase(s.begin());
  return stacked.Reshape(s);
}

StatusOr<PlacedParams> PlaceParams(mesh::Mesh& mesh, const std::vector<ComponentParams>& components) {
  PlacedParams placed;
  placed.bytes.assign(mesh.num_devices(), 0);
  for (int d = 0; d < mesh.num_devices(); ++d) {
    const std::vector<int> at = mesh.AxisIndices(d);
    const int rank = at.size() > 1 ? at[1] : 0;
    for (const ComponentParams& c : components) {
      if (rank >= static_cast<int>(c.ranks->size()))
        return FailedPreconditionError(c.name + ": parameters split " + std::to_string(c.ranks->size()) +
                                       " ways placed on a model axis of " + std::to_string(rank + 1) + " or more");
      for (const auto& [name, a] : (*c.ranks)[rank].all()) {
        // Another rank's device: its bytes are counted (the report's
        // param_bytes), its HBM is that rank's to charge.
        if (!mesh.is_local(d)) {
          placed.bytes[d] += a.size_bytes();
          continue;
        }
        auto view = a.ShareTo(mesh.device(d), "parameter");
        if (!view.ok()) return view.status().WithContext("placing parameter " + c.name + "/" + name);
        placed.bytes[d] += view->size_bytes();
        placed.arrays.push_back(std::move(view).value());
      }
    }
  }
  return placed;
}

StatusOr<std::vector<models::ParamMap>> ZeroParams(const std::string&, const std::vector<models::ParamSpec>& manifest,
                                                   int model_ranks, bool bf16_weights) {
  std::vector<models::ParamMap> ranks;
  // Ranks whose shares of a parameter have the same shape share one array of
  // zeros (read only): a model axis of 1024 holds a few arrays per
  // parameter, not 1024.
  std::map<std::pair<std::string, mesh::Shape>, Array> made;
  for (int r = 0; r < model_ranks; ++r) {
    std::map<std::string, Array> m;
    for (const models::ParamSpec& p : models::ShardManifest(manifest, model_ranks, r)) {
      auto [it, fresh] = made.try_emplace({p.name, p.shape});
      if (fresh)
        it->second = Array::LazyZeros(
            bf16_weights && models::MayHoldBf16(p.name, p.shape) ? DType::kBF16 : DType::kF32, p.shape);
      m.emplace(p.name, it->second);
    }
    ranks.emplace_back(std::move(m));
    ranks.back().SetShard(manifest, model_ranks, r);
    if (r > 0) ranks.back().SharePacks(ranks.front());
  }
  return ranks;
}

StatusOr<std::unique_ptr<TextToImage>> BuildTextToImage(const ModelConfigs& cf, const ParamSource& params,
                                                        std::unique_ptr<ClipTokenizer> tokenizer,
                                                        std::unique_ptr<ClipTokenizer> tokenizer_2,
                                                        int model_ranks) {
  const std::string& o = cf.origin;
  if (model_ranks < 1) return InvalidArgumentError("the model axis must have size >= 1");
  // The family: model_index.json's pipeline class, else the encoder count.
  const int encoders = cf.text_encoder_2.empty() ? 1 : 2;
  const ModelFamily* family = nullptr;
  std::string pipeline_class;
  bool force_zeros = false;
  if (!cf.model_index.empty()) {
    const auto j = nlohmann::json::parse(cf.model_index, nullptr, false);
    if (!j.is_object()) return InvalidArgumentError(o + ": model_index.json is not a JSON object");
    if (j.contains("_class_name") && j["_class_name"].is_string()) pipeline_class = j["_class_name"];
    // The Flax pipelines (the seeds') share the PyTorch ones' folder layout.
    if (pipeline_class.rfind("Flax", 0) == 0) pipeline_class.erase(0, 4);
    // An img2img or inpainting pipeline's folder holds the same components.
    for (const std::string variant : {"Img2ImgPipeline", "InpaintPipeline"})
      if (pipeline_class.size() > variant.size() &&
          pipeline_class.compare(pipeline_class.size() - variant.size(), variant.size(), variant) == 0)
        pipeline_class.replace(pipeline_class.size() - variant.size(), variant.size(), "Pipeline");
    if (j.contains("force_zeros_for_empty_prompt")) {
      if (!j["force_zeros_for_empty_prompt"].is_boolean())
        return InvalidArgumentError(o + ": model_index.json: force_zeros_for_empty_prompt must be true or false");
      force_zeros = j["force_zeros_for_empty_prompt"];
    } else {
      force_zeros = true;  // StableDiffusionXLPipeline's default
    }
  }
  // Without a model_index.json: a transformer config is Flux; else the
  // first family with as many text encoders.
  if (pipeline_class.empty() && !cf.transformer.empty()) pipeline_class = "FluxPipeline";
  for (const ModelFamily& f : kModelFamilies)
    if (pipeline_class.empty() ? f.text_encoders == encoders : pipeline_class == f.pipeline_class) {
      family = &f;
      break;
    }
  if (family == nullptr) {
    std::string known;
    for (const ModelFamily& f : kModelFamilies) known += (known.empty() ? "" : ", ") + std::string(f.pipeline_class);
    return UnimplementedError(o + ": model_index.json names pipeline " + pipeline_class + " (tpumesh runs " +
                              known + ")");
  }
  if (family->text_encoders != encoders)
    return InvalidArgumentError(o + ": a " + family->pipeline_class + " needs " +
                                std::to_string(family->text_encoders) + " text encoder(s), the model has " +
                                std::to_string(encoders) +
                                (encoders == 1 ? " (no text_encoder_2/config.json)" : ""));

  TPUMESH_ASSIGN_OR_RETURN(auto tc, models::ParseClipTextConfig(cf.text_encoder, o + ": text_encoder/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto tp, params("text_encoder", models::ClipTextParams(tc), model_ranks));
  TPUMESH_ASSIGN_OR_RETURN(auto te, models::ClipTextModel::Create(tc, std::move(tp)));
  auto te_ptr = std::make_unique<models::ClipTextModel>(std::move(te));

  TextToImage::Parts parts;
  parts.family = family;
  parts.origin = o;
  parts.scheduler_json = cf.scheduler;
  TPUMESH_ASSIGN_OR_RETURN(auto vc, models::ParseVaeConfig(cf.vae, o + ": vae/config.json"));
  // Every family ends with its VAE, loaded last (after the denoiser).
  auto with_vae = [&](TextToImage::Parts p) -> StatusOr<std::unique_ptr<TextToImage>> {
    TPUMESH_ASSIGN_OR_RETURN(auto vp, params("vae", models::VaeParams(vc), model_ranks));
    TPUMESH_ASSIGN_OR_RETURN(auto vae, models::VaeModel::Create(vc, std::move(vp)));
    p.vae = std::make_unique<models::VaeModel>(std::move(vae));
    return TextToImage::Create(std::move(p));
  };
  if (std::string(family->name) == "flux") {
    TPUMESH_ASSIGN_OR_RETURN(auto t5c, models::ParseT5EncoderConfig(cf.text_encoder_2, o + ": text_encoder_2/config.json"));
    TPUMESH_ASSIGN_OR_RETURN(auto fc, models::ParseFluxTransformerConfig(cf.transformer, o + ": transformer/config.json"));
    if (fc.joint_attention_dim != t5c.d_model || fc.pooled_projection_dim != tc.hidden_size)
      return InvalidArgumentError(o + ": the transformer's joint_attention_dim " +
                                  std::to_string(fc.joint_attention_dim) + " and pooled_projection_dim " +
                                  std::to_string(fc.pooled_projection_dim) + " do not match T5's d_model " +
                                  std::to_string(t5c.d_model) + " and CLIP's hidden_size " +
                                  std::to_string(tc.hidden_size));
    TPUMESH_ASSIGN_OR_RETURN(auto t5p, params("text_encoder_2", models::T5EncoderParams(t5c), model_ranks));
    TPUMESH_ASSIGN_OR_RETURN(auto t5, models::T5EncoderModel::Create(t5c, std::move(t5p)));
    // FluxPipeline's max_sequence_length: 512 by default; FLUX.1-schnell
    // (no guidance embedding) is run with 256, its model card's limit.
    parts.conditioning = MakeFluxConditioning(std::move(tokenizer), std::move(te_ptr),
                                              std::make_unique<models::T5EncoderModel>(std::move(t5)),
                                              fc.guidance_embeds ? 512 : 256);
    TPUMESH_ASSIGN_OR_RETURN(auto fp, params("transformer", models::FluxTransformerParams(fc), model_ranks));
    TPUMESH_ASSIGN_OR_RETURN(auto tr, models::FluxTransformerModel::Create(fc, std::move(fp)));
    parts.transformer = std::make_unique<models::FluxTransformerModel>(std::move(tr));
    return with_vae(std::move(parts));
  }
  if (encoders == 1) {
    parts.conditioning = MakeSdConditioning(std::move(tokenizer), std::move(te_ptr));
  } else {
    TPUMESH_ASSIGN_OR_RETURN(auto tc2,
                             models::ParseClipTextConfig(cf.text_encoder_2, o + ": text_encoder_2/config.json"));
    TPUMESH_ASSIGN_OR_RETURN(auto tp2, params("text_encoder_2", models::ClipTextParams(tc2), model_ranks));
    TPUMESH_ASSIGN_OR_RETURN(auto te2, models::ClipTextModel::Create(tc2, std::move(tp2)));
    parts.conditioning =
        MakeSdxlConditioning(std::move(tokenizer), std::move(te_ptr), std::move(tokenizer_2),
                             std::make_unique<models::ClipTextModel>(std::move(te2)), force_zeros);
  }
  TPUMESH_ASSIGN_OR_RETURN(auto uc, models::ParseUNetConfig(cf.unet, o + ": unet/config.json"));
  TPUMESH_ASSIGN_OR_RETURN(auto up, params("unet", models::UNetParams(uc), model_ranks));
  TPUMESH_ASSIGN_OR_RETURN(auto unet, models::UNetModel::Create(uc, std::move(up)));
  parts.unet = std::make_unique<models::UNetModel>(std::move(unet));
  return with_vae(std::move(parts));
}

}  // namespace tpumesh::pipeline
