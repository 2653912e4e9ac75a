// Text to image over the emulated mesh: the seed notebook's flow
// (FlaxStableDiffusionPipeline with jax.pmap) on tpumesh's virtual devices.
//
//   prompts -> ids [B, 77] (and the negative prompts' ids)
//   -> parameters replicated on every device, ids sharded [n, B/n, 77]
//   -> one PRNG key per image: split(key(seed), B)   (JAX threefry)
//   -> pmap, per device and its B/n images:
//        text encoder on [uncond; cond] -> [2B/n, 77, D]
//        initial latents: normal(key_i, [1, 4, h, w]) per image, times the
//          scheduler's init_noise_sigma (or the latents given, times it)
//        each step: UNet on [x; x] (scheduler-scaled) with [uncond; cond]
//          context, guided = u + g * (c - u), scheduler step
//        VAE decode of x / scaling_factor
//   -> gathered to the host -> (x / 2 + 0.5).clamp(0, 1) -> uint8 images.
// With guidance <= 1 there is no unconditional half (as diffusers'
// do_classifier_free_guidance). Every layer call, guidance and scheduler
// step is recorded and priced on the chip (pipeline/report.h); each
// device's simulated clock advances by its ops' modelled time.
//
// Contract:
// - B = devices * batch_per_device. One prompt is used for every image;
//   otherwise there must be exactly B prompts (image i gets prompt i). The
//   negative prompts: none (the empty prompt, as diffusers), one for every
//   image, or one per prompt, paired in order.
// - Image i is the same bits wherever it is computed: its key is split(key(
//   seed), B)[i], whatever the device count, and every kernel gives each
//   image's numbers independently of the batch it sits in and of the thread
//   count. With batch_per_device = 1 and B = device count this is exactly the
//   seed's `split(key, jax.device_count())` then `normal(key_d, (1, 4, h,
//   w))`. Euler-ancestral's per-step noise for image i at step s is
//   normal(fold_in(key_i, s + 1), [1, 4, h, w]).
// - "jit": a Generator caches one Plan per set of static shapes (batch per
//   device, height, width, steps, scheduler, precision). The first call for
//   a set builds it (the scheduler's timesteps, the parameters replicated to
//   every device, the shape checks) and reports compile_seconds; later calls
//   reuse it.
// - Every check of the request runs before any compute (InvalidArgument
//   naming the flag or the file). Cancelling (the flag polled between steps)
//   returns Cancelled and nothing.
// - The Generator is not thread-safe: one Generate at a time.
#ifndef TPUMESH_PIPELINE_GENERATE_H_
#define TPUMESH_PIPELINE_GENERATE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/status.h"
#include "io/png.h"
#include "mesh/array.h"
#include "mesh/mesh.h"
#include "mesh/prng.h"
#include "models/clip.h"
#include "models/nn.h"
#include "models/unet.h"
#include "models/vae.h"
#include "pipeline/report.h"
#include "schedulers/schedulers.h"
#include "text/tokenizer.h"

namespace tpumesh::pipeline {

struct GeneratorOptions {
  // A tpumesh model file; empty: the embedded default (the `tiny`
  // architecture with `tpumesh init`'s seed-0 random weights).
  std::string model;
  int devices = 8;
  std::string chip = "v5e";  // preset or chip JSON file
  int threads_per_device = 0;  // 0: host cores / devices (at least 1)
};

struct GenerateRequest {
  std::vector<std::string> prompts;
  std::vector<std::string> negative_prompts;
  int steps = 50;
  float guidance = 7.5f;
  uint64_t seed = 0;
  mesh::PrngImpl prng = mesh::PrngImpl::kPartitionable;
  std::string scheduler;  // pndm | ddim | ... ; empty: the model's own
  // key=value overrides of the scheduler config (SchedulerConfig::Set).
  std::vector<std::pair<std::string, std::string>> scheduler_overrides;
  int height = 0;  // 0: the UNet's sample_size times the VAE factor
  int width = 0;
  int batch_per_device = 1;
  models::Precision precision = models::Precision::kDefault;
  // [B, 4, h, w] N(0, 1) latents to start from instead of drawing them.
  std::optional<mesh::Array> initial_latents;
  bool keep_step_latents = false;  // fill GenerateResult::latents_after_step
  bool keep_ops = false;           // keep every op in the report (for a trace)
};

// What a call reports as it goes, phase "text", "denoise" or "decode": done
// of total counts the work of all devices (total = devices for text and
// decode, steps x devices for denoise); text and decode also report done = 0
// when they start. Called from the devices' threads, one call at a time.
using ProgressFn = std::function<void(const std::string& phase, int done, int total)>;

struct GenerateResult {
  std::vector<Image> images;            // B images, H x W
  std::vector<std::string> prompts;     // per image
  std::vector<std::string> negative_prompts;
  mesh::Array initial_latents;          // [B, 4, h, w], before init_noise_sigma
  mesh::Array latents_after_step;       // [steps, B, 4, h, w] when kept
  std::string scheduler;
  std::vector<double> timesteps;
  int height = 0, width = 0;
  bool compiled = false;          // this call built its plan
  double compile_seconds = 0;     // building the plan (0 when cached)
  double run_seconds = 0;         // the pmap and the image conversion
  double modelled_seconds = 0;    // the slowest device's simulated clock
  RunReport report;               // every device's ops priced on the chip
};

class Generator {
 public:
  static StatusOr<std::unique_ptr<Generator>> Open(const GeneratorOptions& options);
  ~Generator();

  const std::string& model_name() const { return model_name_; }
  mesh::Mesh& mesh() { return *mesh_; }
  int devices() const { return mesh_->num_devices(); }
  // The model's default image size (UNet sample_size times the VAE factor).
  int default_size() const;

  // Checks `request` against the model and mesh without computing
  // (InvalidArgument naming the problem). Generate runs it first.
  Status Validate(const GenerateRequest& request) const;

  StatusOr<GenerateResult> Generate(const GenerateRequest& request, const ProgressFn& progress = {},
                                    const std::atomic<bool>* cancel = nullptr);

 private:
  struct Plan;
  using PlanKey = std::tuple<int, int, int, int, std::string, int>;
  Generator() = default;
  StatusOr<Plan*> GetPlan(const GenerateRequest& request, int height, int width, bool* built);

  std::string model_name_;
  std::string scheduler_json_;
  std::unique_ptr<ClipTokenizer> tokenizer_;
  std::unique_ptr<models::ClipTextModel> text_encoder_;
  std::unique_ptr<models::UNetModel> unet_;
  std::unique_ptr<models::VaeModel> vae_;
  std::unique_ptr<mesh::Mesh> mesh_;
  std::vector<mesh::DistributedArray> replicas_;  // every parameter on every device
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

// Writes result.images as DIR/image_<i>.png and DIR/grid.png (rows x cols
// from GridShape), each with a tEXt/iTXt "parameters" chunk (prompt, negative
// prompt, steps, scheduler, guidance, seed, image index, model), each
// atomically. Creates DIR. Returns the paths written.
StatusOr<std::vector<std::string>> WriteImages(const std::string& dir, const GenerateResult& result,
                                               const GenerateRequest& request, const std::string& model_name);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_GENERATE_H_
