#include "tools/request_flags.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "base/printable.h"
#include "tools/device_flags.h"
namespace tpumesh::tools {
namespace {

// "A,B" -> {A, B}, two integers >= min.
StatusOr<std::array<int, 2>> ParsePair(const std::string& flag, const std::string& text, const char* form,
                                       int min) {
  const size_t comma = text.find(',');
  std::array<int, 2> out{};
  bool ok = comma != std::string::npos;
  for (int i = 0; ok && i < 2; ++i) {
    const std::string part = i == 0 ? text.substr(0, comma) : text.substr(comma + 1);
    char* end = nullptr;
    errno = 0;
    const long v = part.empty() ? -1 : std::strtol(part.c_str(), &end, 10);
    ok = errno == 0 && end != nullptr && *end == '\0' && v >= min && v <= 1 << 20;
    out[i] = static_cast<int>(v);
  }
  if (!ok)
    return InvalidArgumentError(flag + " '" + text + "': expected " + form + ", two integers from " +
                                std::to_string(min) + " to 1048576");
  return out;
}

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

// Guidance past a few tens already saturates every image; 1000 is far past
// any use and keeps u + G (c - u) finite.
constexpr float kMaxGuidance = 1000;
std::string GuidanceRange() { return "0 to 1000"; }

}  // namespace

void AddRequestFlags(CLI::App* cmd, RequestFlags* f) {
  pipeline::GenerateRequest& r = f->request;
  cmd->add_option("--steps", r.steps,
                  "Denoising steps, 1 to " + std::to_string(pipeline::kMaxSteps) +
                      " and at most the scheduler's num_train_timesteps")
      ->capture_default_str();
  cmd->add_option("--guidance", f->guidance,
                  "Classifier-free guidance scale, " + GuidanceRange() +
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

void AddImageInputFlags(CLI::App* cmd, ImageInputFlags* f) {
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

Status ReadImageInputs(const ImageInputFlags& f, pipeline::GenerateRequest* r) {
  for (auto [flag, files, mode, out] :
       {std::tuple{"--init-image", &f.init_images, pipeline::PngRead::kRgbOnly, &r->init_images},
        std::tuple{"--mask", &f.masks, pipeline::PngRead::kGrey, &r->masks}}) {
    for (const std::string& path : *files) {
      auto image = pipeline::ReadPngAs(path, mode);
      if (!image.ok()) {
        const Status& st = image.status();
        if (mode == pipeline::PngRead::kRgbOnly && st.message().find("only 8-bit RGB") != std::string::npos)
          return InvalidArgumentError(std::string(flag) + ": " + std::string(st.message()) +
                                      " (convert it to 8-bit RGB, e.g. PIL's image.convert(\"RGB\"))");
        return st.WithContext(flag);
      }
      out->push_back({path, std::move(image).value()});
    }
  }
  r->strength = f.strength;
  return OkStatus();
}

StatusOr<pipeline::GenerateRequest> ParseRequestFlags(const RequestFlags& f) {
  pipeline::GenerateRequest r = f.request;
  if (f.guidance && !(*f.guidance >= 0 && *f.guidance <= kMaxGuidance)) {
    return InvalidArgumentError(std::string("--guidance must be a finite number, ") + GuidanceRange() + ", got " +
                                ShortestNumber(*f.guidance));
  }
  r.guidance = f.guidance;
  TPUMESH_ASSIGN_OR_RETURN(r.precision, models::ParsePrecision(f.precision));
  for (const std::string& kv : f.scheduler_opts) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return InvalidArgumentError("--scheduler-opt '" + kv + "': expected KEY=VALUE");
    r.scheduler_overrides.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  // W,H and X,Y on the command line; diffusers' tuples are (h, w) and (top, left).
  for (auto [flag, text, out, form, min] :
       {std::tuple{"--original-size", &f.original_size, &r.sizes.original_size, "W,H", 1},
        {"--crops-coords-top-left", &f.crops_coords_top_left, &r.sizes.crops_coords_top_left, "X,Y", 0},
        {"--target-size", &f.target_size, &r.sizes.target_size, "W,H", 1}}) {
    if (text->empty()) continue;
    TPUMESH_ASSIGN_OR_RETURN(auto xy, ParsePair(flag, *text, form, min));
    *out = {xy[1], xy[0]};
  }
  return r;
}

StatusOr<uint64_t> ParseSeed(const std::string& text) {
  const Status bad = InvalidArgumentError("--seed " + Quoted(text) + ": expected a whole number from 0 to 18446744073709551615");
  if (text.empty() || text.size() > 20 || text.find_first_not_of("0123456789") != std::string::npos) return bad;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return bad;
  return static_cast<uint64_t>(v);
}

CLI::Validator SeedNumber() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        return ParseSeed(value).ok() ? "" : "expected a whole number from 0 to 18446744073709551615, got " + Quoted(value);
      },
      "0 TO 18446744073709551615");
}

void AddLoraFlag(CLI::App* cmd, std::vector<std::string>* loras) {
  cmd->add_option("--lora", *loras,
                  "FILE.safetensors[:SCALE]: a LoRA (kohya or diffusers/PEFT keys) fused into the UNet and text "
                  "encoder weights at load, W += SCALE * alpha / rank * up @ down (SCALE default 1; repeatable, "
                  "fused in order)");
}

StatusOr<std::vector<pipeline::LoraSpec>> ParseLoraFlags(const std::vector<std::string>& loras) {
  std::vector<pipeline::LoraSpec> specs;
  for (const std::string& text : loras) {
    TPUMESH_ASSIGN_OR_RETURN(pipeline::LoraSpec spec, pipeline::ParseLoraSpec(text));
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace tpumesh::tools
