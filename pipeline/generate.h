// Text to image over the emulated mesh: the seeds' flow
// (FlaxStableDiffusionPipeline / FlaxStableDiffusionXLPipeline with
// jax.pmap) on tpumesh's virtual devices, over a data=D, model=M mesh.
//
//   prompts -> ids [B, 77] per tokenizer (and the negative prompts' ids)
//   -> each device gets its model rank's share of the parameters (all of
//      them when M = 1: replicated), ids sharded over data [D, B/D, 77] and
//      the same on every device of a model group
//   -> one PRNG key per image: split(key(seed), B)   (JAX threefry)
//   -> pmap: each device runs the text-to-image flow (pipeline/txt2img.h)
//        on its B/n images
//   -> gathered to the host -> (x / 2 + 0.5).clamp(0, 1) -> uint8 images.
// Every layer call, guidance and scheduler step is recorded and priced on
// the chip (report/report.h); each device's simulated clock advances by
// its ops' modelled time.
//
// Contract:
// - With M > 1 the M devices of a model group compute the same images
//   together, each its share of every split layer, combining the shares by
//   psum / all_gather (models/parallel.h); the images are the same as with
//   M = 1 up to the order of the sums (tests/pipeline/model_parallel_test).
// - B = data_size() * batch_per_device. One prompt is used for every image;
//   otherwise there must be exactly B prompts (image i gets prompt i). The
//   negative prompts: none (diffusers' default for the family: "" for SD,
//   zeros for SDXL with force_zeros_for_empty_prompt), one for every image,
//   or one per prompt, paired in order.
// - Image i is the same bits wherever it is computed: its key is split(key(
//   seed), B)[i], whatever the device count, and every kernel gives each
//   image's numbers independently of the batch it sits in and of the thread
//   count. With batch_per_device = 1 and B = device count this is exactly the
//   seed's `split(key, jax.device_count())` then `normal(key_d, (1, 4, h,
//   w))`. Euler-ancestral's per-step noise for image i at step s is
//   normal(fold_in(key_i, s + 1), [1, 4, h, w]).
// - "jit": a Generator caches one plan (pipeline/txt2img.h) per set of static
//   shapes (batch per device, height, width, steps, scheduler and overrides,
//   precision, guided or not). The first call for a set builds it (the
//   scheduler's timesteps, the parameters replicated to every device, a dry
//   run of the flow that checks every device's HBM and the host's memory) and
//   reports compile_seconds; later calls reuse it.
// - Memory: Open refuses a model whose weights and packed weights exceed the
//   host's available memory; the plan refuses a run whose activations (every
//   device's) and packs still to build do not fit, or whose device HBM is
//   exceeded, as ResourceExhausted, before any compute. A call marked
//   GenerateRequest::last_use gives each model's host memory back once no
//   device of this rank needs it (models::ParamMap::GiveBack): the text
//   encoders after every device's text phase, the UNet after every device's
//   last step (the devices wait for each other between the phases,
//   mesh::DeviceContext::HostBarrier); the same images; later calls are
//   refused (FailedPrecondition).
// - Every check of the request runs before any compute (InvalidArgument
//   naming the flag or the file). Cancelling (the flag polled between steps)
//   returns Cancelled and nothing.
// - Ranks (GeneratorOptions::mesh.cluster, docs/cluster.md): every rank
//   opens the model and calls Generate with the same request; each runs its
//   devices. Errors before compute are settled across ranks (Cluster::Agree:
//   every rank fails, the cause reported by one). Images, latents and the
//   report (every device's records, priced on rank 0) end on rank 0 only;
//   on the other ranks images and latents are empty and the report holds
//   their own devices. The same seed gives the same bits at any rank count.
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
#include "pipeline/lora.h"
#include "pipeline/preview.h"
#include "pipeline/txt2img.h"
#include "report/report.h"

namespace tpumesh::pipeline {

struct GeneratorOptions {
  // A tpumesh model file; empty: the embedded default (pipeline/
  // default_model.h: the tiny shapes model).
  std::string model;
  // The devices and their data=D,model=M axes (mesh::CreateDataModelMesh).
  mesh::MeshSpec mesh;
  // Once the first call has packed the Linear and conv weights (at its
  // precision), give the loaded copies' host memory back, so each weight is
  // held once, packed (models::Ctx::release_packed_weights). A later call at
  // another precision is then refused (FailedPrecondition). The CLI, which
  // runs one precision per process, sets it.
  bool release_packed_weights = false;
  // LoRAs fused into the weights at load, in order (pipeline/lora.h).
  std::vector<LoraSpec> loras;
};

// What a call reports as it goes, phase "text", "denoise" or "decode": done
// of total counts the work of this rank's devices (total = devices for text
// and decode, steps x devices for denoise); every phase also reports done = 0
// when it starts. Called from the devices' threads, one call at a time.
using ProgressFn = std::function<void(const std::string& phase, int done, int total)>;
// A preview of the run (GenerateRequest::preview_every): the grid of the
// images as they stand (pipeline/preview.h: the latents through a linear
// map fitted to the model's VAE, an approximation), each image at its
// latest multiple of preview_every steps (black until its first); `done` of
// `total` steps of the device that reported. Only this rank's devices'
// images. Called from the devices' threads, one call at a time.
using PreviewFn = std::function<void(const Image& grid, int done, int total)>;

struct GenerateResult {
  std::vector<Image> images;            // B images, H x W
  int64_t nonfinite_values = 0;         // NaN/Inf in the decoded images (shown black): a broken model
  std::vector<std::string> prompts;     // per image
  std::vector<std::string> negative_prompts;
  mesh::Array initial_latents;          // [B, 4, h, w], before init_noise_sigma
  mesh::Array latents_after_step;       // [steps, B, 4, h, w] when kept
  std::string scheduler;
  std::vector<double> timesteps;  // the steps run (img2img: from the strength's first)
  int height = 0, width = 0;
  float guidance = 0;             // the scale used (the request's or the family's default)
  std::string loras;              // the fused LoRAs, "a.safetensors:0.8, ..." (LoraSet::Label); "" for none
  double strength = 0;            // img2img / inpainting: the strength used; 0 for text to image
  bool compiled = false;          // this call built its plan
  double compile_seconds = 0;     // building the plan (0 when cached)
  double run_seconds = 0;         // the pmap and the image conversion (the slowest rank's)
  double modelled_seconds = 0;    // the slowest device's simulated clock
  report::RunReport report;       // every device's ops priced on the chip
};

class Generator {
 public:
  static StatusOr<std::unique_ptr<Generator>> Open(const GeneratorOptions& options);
  ~Generator();

  const std::string& model_name() const { return model_name_; }
  // The fused LoRAs (LoraSet::Label), "" for none.
  const std::string& loras() const { return loras_; }
  // The words the model was trained on, from its training metadata
  // (kTrainingMetadata's "vocabulary"); empty when the file has none.
  const std::vector<std::string>& vocabulary() const { return vocabulary_; }
  mesh::Mesh& mesh() { return *mesh_; }
  int devices() const { return mesh_->num_devices(); }
  // The sizes of the data and model axes: images run data_size() x
  // batch_per_device at a time, each model split model_size() ways.
  int data_size() const { return mesh_->axes()[0].size; }
  int model_size() const { return mesh_->axes()[1].size; }
  const TextToImage& flow() const { return *flow_; }
  // The model's default image size (UNet sample_size times the VAE factor).
  int default_size() const { return flow_->default_size(); }

  // Checks `request` against the model and mesh without computing
  // (InvalidArgument naming the problem). Generate runs it first.
  Status Validate(const GenerateRequest& request) const;

  StatusOr<GenerateResult> Generate(const GenerateRequest& request, const ProgressFn& progress = {},
                                    const std::atomic<bool>* cancel = nullptr, const PreviewFn& preview = {});

 private:
  // batch per device, height, width, steps, scheduler|overrides, precision, guided
  using PlanKey = std::tuple<int, int, int, int, std::string, int, bool>;
  Generator() = default;
  StatusOr<const Txt2ImgPlan*> GetPlan(const GenerateRequest& request, bool* built);
  // Plan time, before any compute: a dry run of the flow checks the devices'
  // HBM, and the host's memory for the packs still to build and every
  // device's activations (ResourceExhausted, one line).
  Status CheckMemory(const GenerateRequest& request, const Txt2ImgPlan& plan);
  // GenerateRequest::last_use: gives back the host memory of the models no
  // device needs after `phase` (DeviceInputs::on_phase_done).
  void GiveBackAfter(const std::string& phase);

  std::string model_name_;
  std::string loras_;  // LoraSet::Label of the fused LoRAs
  std::vector<std::string> vocabulary_;
  std::unique_ptr<TextToImage> flow_;
  int64_t packed_estimate_ = 0;  // bf16 bytes of every packed weight (loader.h)
  bool f32_weights_ = false;     // the file holds its weights mostly in f32
  bool release_packed_weights_ = false;
  // The precision of the first call, once release_packed_weights_ has
  // released the loaded weights at it.
  std::optional<models::Precision> released_at_;
  bool given_back_ = false;  // a last_use call ran: models may have been given back
  std::unique_ptr<mesh::Mesh> mesh_;
  // Each device's parameters (its model rank's share): the HBM accounting
  // of the weights (shared read-only storage, counted on each device as jax
  // puts a copy in each HBM). The layers read the same bytes through the
  // models' rank ParamMaps, so nothing reads these arrays directly.
  PlacedParams placed_;
  std::map<PlanKey, std::unique_ptr<Txt2ImgPlan>> plans_;
  std::optional<LatentPreview> preview_;  // fitted at the first call that asks for previews
};

// (path, bytes) of files written together (io/atomic_file.h WriteFilesAtomic).
using OutputFiles = std::vector<std::pair<std::string, std::string>>;
// result.images as DIR/image_<i>.png and DIR/grid.png (rows x cols from
// GridShape), each with a tEXt/iTXt "parameters" chunk (prompt, negative
// prompt, steps, scheduler, guidance, seed, image index, model, and the
// LoRAs when there are any), encoded.
StatusOr<OutputFiles> EncodeImages(const std::string& dir, const GenerateResult& result,
                                   const GenerateRequest& request, const std::string& model_name);
// EncodeImages, written all or none into DIR (created if missing). Returns
// the paths written.
StatusOr<std::vector<std::string>> WriteImages(const std::string& dir, const GenerateResult& result,
                                               const GenerateRequest& request, const std::string& model_name);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_GENERATE_H_
