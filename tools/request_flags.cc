#include "tools/request_flags.h"

#include <cerrno>
#include <cstdlib>

#include "base/printable.h"
#include "tools/device_flags.h"

namespace tpumesh::tools {
namespace {

// A size from 1 to `max`: below 1 a parse error here (0 would read as "the
// model's"); past `max` refused against the model, which names the limit.
CLI::Validator AtLeastOne(int max) {
  const std::string range = "1 to " + std::to_string(max);
  return CLI::Validator(
      [range](std::string& value) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long v = std::strtol(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || errno != 0 || v < 1) return "Value " + value + " not in range " + range;
        return "";
      },
      "");
}

}  // namespace

void AddRequestFlags(CLI::App* cmd, pipeline::RequestFlags* f) {
  pipeline::GenerateRequest& r = f->request;
  cmd->add_option("--steps", r.steps,
                  "Denoising steps, 1 to " + std::to_string(pipeline::kMaxSteps) +
                      " and at most the scheduler's num_train_timesteps")
      ->capture_default_str();
  cmd->add_option("--guidance", f->guidance,
                  "Classifier-free guidance scale, " + pipeline::GuidanceRange() +
                      "; <= 1: none (default: the model family's, 7.5 SD, 5.0 SDXL)")
      ->check(RealNumber());
  std::string names;
  for (const std::string& n : pipeline::SchedulerNames()) names += (names.empty() ? "" : " | ") + n;
  cmd->add_option("--scheduler", r.scheduler, names + " (default: the model's scheduler config)");
  cmd->add_option("--scheduler-opt", f->scheduler_opts,
                  "KEY=VALUE override of the scheduler config, e.g. prediction_type=v_prediction (repeatable)");
  // Past the lower bound (a parse error here), the sizes' upper bounds and
  // multiples are checked against the model (TextToImage::Validate).
  const std::string side = "1 to " + std::to_string(pipeline::kMaxImageSize) +
                           ", a multiple of the model's factor (64 for SD, 32 for SDXL)";
  cmd->add_option("--height", r.height,
                  "Image height in pixels, " + side + " (default: the model's, e.g. 512 SD 1.5, 1024 SDXL)")
      ->check(AtLeastOne(pipeline::kMaxImageSize));
  cmd->add_option("--width", r.width, "Image width in pixels, " + side + " (default: the model's)")
      ->check(AtLeastOne(pipeline::kMaxImageSize));
  cmd->add_option("--batch-per-device", r.batch_per_device,
                  "Images per device, 1 to " + std::to_string(pipeline::kMaxBatchPerDevice))
      ->capture_default_str();
  cmd->add_option("--precision", f->precision, "default (bf16 operands, f32 accumulation) or highest (f32)")
      ->capture_default_str();
  cmd->add_option("--original-size", f->original_size,
                  "SDXL: the original_size conditioning W,H in pixels (default: the image size)");
  cmd->add_option("--crops-coords-top-left", f->crops_coords_top_left,
                  "SDXL: the crop conditioning X,Y in pixels (left, top; default 0,0)");
  cmd->add_option("--target-size", f->target_size,
                  "SDXL: the target_size conditioning W,H in pixels (default: the image size)");
}

void AddImageInputFlags(CLI::App* cmd, pipeline::ImageInputFlags* f) {
  cmd->add_option("--init-image", f->init_images,
                  "img2img: start from this 8-bit RGB PNG (its size is the output size); once for every image, or "
                  "repeated, one per image");
  cmd->add_option("--mask", f->masks,
                  "Inpainting (with --init-image): a PNG of the image's size, white (grey >= 128) repainted, black "
                  "kept; an inpainting model's UNet takes it as input, other models blend after each step; once or "
                  "one per image");
  cmd->add_option("--strength", f->strength,
                  "How far the init image is noised, in (0, 1]: int(steps x strength) steps run (default: the "
                  "pipeline's, img2img 0.8 SD / 0.3 SDXL, inpainting 1.0 SD / 0.9999 SDXL)")
      ->check(RealNumber());
}

CLI::Validator SeedNumber() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        return pipeline::ParseSeed(value).ok() ? "" : "expected a whole number from 0 to 18446744073709551615, got " + Quoted(value);
      },
      "0 TO 18446744073709551615");
}

void AddLoraFlag(CLI::App* cmd, std::vector<std::string>* loras) {
  cmd->add_option("--lora", *loras,
                  "FILE.safetensors[:SCALE]: a LoRA (kohya or diffusers/PEFT keys) fused into the UNet and text "
                  "encoder weights at load, W += SCALE * alpha / rank * up @ down (SCALE default 1; repeatable, "
                  "fused in order)");
}

}  // namespace tpumesh::tools
