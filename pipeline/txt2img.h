// The text-to-image flow, written once: what one device does for its images
// (the body of the seed's pmapped `_generate`). `tpumesh generate` runs it for
// real on every device of the mesh (pipeline/generate.h); `tpumesh simulate`
// runs the same code as a dry run on zero weights (models::Ctx::dry_run:
// every layer checks shapes, allocates and records its cost, computes
// nothing; pipeline/simulate.h). A model family differs only in its
// conditioning (pipeline/conditioning.h) and its row of kModelFamilies; Flux
// also in its denoiser (a FluxTransformer2DModel on packed latents, not a
// UNet: RunFlux below).
//
// Per device, for its b images (rows [uncond; cond] when guidance > 1, as
// diffusers' do_classifier_free_guidance; [cond] otherwise):
//   conditioning: the family's text encoders on the device's token rows
//   initial latents: normal(key_i, [1, C, h, w]) per image (or the given
//     latents), times the scheduler's init_noise_sigma
//   img2img / inpainting (ImageSource): the init image through the VAE
//     encoder, a posterior sample (mean + std * normal(fold_in(key_i,
//     kPosteriorFold))) times scaling_factor, noised by the scheduler's
//     add_noise to the level of step `begin` with the latents above as the
//     noise; the steps run from `begin`. Inpainting resets the kept region
//     after each step (ordinary UNet) or feeds the UNet [x, mask, masked
//     image latents] (9-channel inpainting UNet), as diffusers does
//   each step: UNet on [x; x] scaled by the scheduler, with the conditioning;
//     guided = u + g (c - u); scheduler step
//   VAE decode of x / scaling_factor
//
// Flux (FluxPipeline, text to image only): no classifier-free guidance
// (FLUX.1-dev's guidance scale is an input of its transformer, -schnell has
// none); latents [b, C, h, w] drawn as above, packed into [b, h/2 * w/2,
// 4C] tokens (2x2 patches, channel-major: c * 4 + dy * 2 + dx); each step the
// transformer on the packed latents with timestep sigma, the pooled CLIP
// text and T5's states; flow_euler's step; unpacked, then decoded from
// x / scaling_factor + shift_factor.
//
// Contract:
// - Validate is the one check of a request against the model and the mesh,
//   run before any compute; errors name the flag or the file.
// - A plan ("jit"): the scheduler config is parsed and its timesteps set once
//   per plan (static shapes: batch per device, size, steps, scheduler and its
//   overrides, precision, whether guided); RunDevice only reads it.
// - RunDevice is thread-safe (the devices of a pmap call it at once) and
//   deterministic: image i's numbers depend only on its key, its prompt and
//   the plan, never on the batch it sits in, the device or the thread count.
#ifndef TPUMESH_PIPELINE_TXT2IMG_H_
#define TPUMESH_PIPELINE_TXT2IMG_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "io/png.h"
#include "mesh/array.h"
#include "mesh/mesh.h"
#include "mesh/prng.h"
#include "models/configs.h"
#include "models/flux.h"
#include "models/nn.h"
#include "models/params.h"
#include "models/unet.h"
#include "models/vae.h"
#include "pipeline/conditioning.h"
#include "report/report.h"
#include "schedulers/schedulers.h"
#include "text/tokenizer.h"

namespace tpumesh::pipeline {

// The model families, one row each: the diffusers pipeline class a
// model_index.json names, how many text encoders it has, and the defaults of
// that pipeline's __call__.
struct ModelFamily {
  const char* name;            // "sd", "sdxl"
  // model_index.json's _class_name (its Img2Img and Inpaint variants, e.g.
  // StableDiffusionInpaintPipeline, name the same family)
  const char* pipeline_class;
  int text_encoders;
  float default_guidance;
  double default_img2img_strength;  // the Img2Img pipeline's strength
  double default_inpaint_strength;  // the Inpaint pipeline's
};
// Flux's guidance (3.5, FluxPipeline's default) feeds FLUX.1-dev's guidance
// embedding, never classifier-free guidance; img2img and inpainting are not
// implemented for it (its strengths are unused).
inline constexpr ModelFamily kModelFamilies[] = {
    {"sd", "StableDiffusionPipeline", 1, 7.5f, 0.8, 1.0},
    {"sdxl", "StableDiffusionXLPipeline", 2, 5.0f, 0.3, 0.9999},
    {"flux", "FluxPipeline", 2, 3.5f, 0.6, 1.0},
};

// An input image of img2img or inpainting, with its file name (for errors
// and the PNG parameters).
struct SourceImage {
  std::string name;
  Image image;  // 8-bit RGB; a mask's grey level is in every channel
};

struct GenerateRequest {
  std::vector<std::string> prompts;
  std::vector<std::string> negative_prompts;  // empty: none given
  int steps = 50;
  std::optional<float> guidance;  // unset: the family's default
  uint64_t seed = 0;
  mesh::PrngImpl prng = mesh::PrngImpl::kPartitionable;
  std::string scheduler;  // pndm | ddim | ... ; empty: the model's own
  // key=value overrides of the scheduler config (SchedulerConfig::Set).
  std::vector<std::pair<std::string, std::string>> scheduler_overrides;
  int height = 0;  // 0: the UNet's sample_size times the VAE factor
  int width = 0;
  int batch_per_device = 1;
  models::Precision precision = models::Precision::kDefault;
  SizeConditioning sizes;  // SDXL only (refused for other families when set)
  // [B, C, h, w] N(0, 1) latents to start from instead of drawing them
  // (img2img and inpainting: the noise added to the image's latents).
  std::optional<mesh::Array> initial_latents;
  // img2img and inpainting (diffusers' StableDiffusion[XL]Img2ImgPipeline
  // and StableDiffusion[XL]InpaintPipeline): no init image (text to image),
  // one for every image, or one per image; masks likewise (white, grey level
  // >= 128 after conversion to grey as PIL's "L", is repainted), each of
  // its init image's size. The images set the output size.
  std::vector<SourceImage> init_images;
  std::vector<SourceImage> masks;
  std::optional<double> strength;  // in (0, 1]; unset: the family's default
  // [B, 2, C, h, w] N(0, 1) noise of the VAE posterior samples ([:, 0] the
  // init image's, [:, 1] the masked image's) instead of drawing it.
  std::optional<mesh::Array> posterior_noise;
  bool keep_step_latents = false;  // fill GenerateResult::latents_after_step
  int preview_every = 0;           // > 0: a preview every N steps run (Generate's PreviewFn)
  bool keep_ops = false;           // keep every op in the report (for a trace)
  // The generator's last call (Generator::Generate): each model's host
  // memory goes back as soon as no device of this rank needs it (the text
  // encoders once every device has encoded its prompts, the UNet after
  // every device's last step), so the decode runs beside the VAE's weights
  // alone. The devices then run phase by phase (every device's text, then
  // every device's steps, then every decode): the same bits. The modelled
  // HBM still holds every parameter. A later call is refused.
  bool last_use = false;
};

// The fold_in data of the VAE posterior samples' noise of image i: the init
// image's and the masked image's (fold_in(key_i, s + 1) is Euler-ancestral's
// step noise; these lie beyond any step count).
inline constexpr uint32_t kPosteriorFold[2] = {0x80000001u, 0x80000002u};

// The scheduler of flow-matching (Flux) models, and theirs only.
inline constexpr char kFlowScheduler[] = "flow_euler";

// What a set of static shapes compiles to.
// Limits TextToImage::Validate applies before anything is allocated.
inline constexpr int kMaxBatchPerDevice = 1024;
inline constexpr int kMaxSteps = 10000;
inline constexpr int kMaxImageSize = 16384;  // pixels, each side

// What a run starts from.
enum class ImageSource {
  kText,          // noise (text to image)
  kImage,         // img2img: the init image's latents, noised to the first step's level
  kInpaint,       // inpainting with an ordinary UNet: after each step the kept
                  // region is reset to the image's latents noised to the next level
  kInpaintUNet,   // inpainting UNet (in_channels 2 C + 1): mask and masked
                  // image latents are extra UNet inputs
};

struct Txt2ImgPlan {
  SchedulerConfig scheduler_config;
  std::string scheduler;
  std::vector<double> timesteps;  // the scheduler's; the run takes them from `begin`
  ImageSource source = ImageSource::kText;
  double strength = 1.0;
  // The first step run: diffusers' get_timesteps, t_start * order with
  // t_start = steps - min(int(steps * strength), steps); 0 for text.
  int begin = 0;
  // Inpainting at strength 1 starts from noise (diffusers' is_strength_max).
  bool from_noise = true;
  float init_noise_sigma = 1.0f;
  int steps = 0;
  int64_t batch_per_device = 0;
  int height = 0, width = 0, latent_h = 0, latent_w = 0, channels = 0;
  bool guided = true;
  models::Precision precision = models::Precision::kDefault;
};

// One device's share of a run.
struct DeviceInputs {
  std::span<const mesh::Array> ids;  // its rows of each Tokenize array, [b, token_length(i)]
  const uint32_t* keys = nullptr;    // [b, 2] PRNG keys (unused in a dry run)
  const float* latents = nullptr;    // given initial latents [b, C, h, w], or null: drawn
  const float* image = nullptr;      // init images [b, 3, H, W] in [-1, 1] (img2img, inpainting)
  const float* mask = nullptr;       // masks [b, 1, H, W], 0 kept, 1 repainted (inpainting)
  const float* posterior_noise = nullptr;  // given [b, 2, C, h, w], or null: drawn
  // Called at every `every`-th step run (done of total; not the last) with
  // latents [b, C, h, w]: the step's estimate of the clean latents for an
  // epsilon-prediction model, else the latents after the step. For previews;
  // may be empty.
  std::function<void(int done, int total, const float* latents)> on_latents;
  int every = 0;
  int device_id = 0;
  // Called when the device has made its last use of the text encoders
  // (phase "text") and of the UNet ("denoise"); may be empty.
  std::function<void(const std::string& phase)> on_phase_done;
};
struct DeviceOutputs {
  mesh::Array decoded;          // [b, 3, H, W], the VAE's output
  mesh::Array initial_latents;  // [b, C, h, w], before init_noise_sigma
  mesh::Array history;          // [steps run, b, C, h, w] when kept, else empty
};
// Progress: phase "text", "denoise" or "decode", `done` units of the device's
// `total` (each phase reports 0 done on device 0 when it starts).
using DeviceProgressFn = std::function<void(const std::string& phase, int done, int total)>;

class TextToImage {
 public:
  struct Parts {
    const ModelFamily* family = nullptr;
    std::unique_ptr<Conditioning> conditioning;
    std::unique_ptr<models::UNetModel> unet;                // SD, SDXL
    std::unique_ptr<models::FluxTransformerModel> transformer;  // Flux (no UNet)
    std::unique_ptr<models::VaeModel> vae;
    std::string scheduler_json;
    std::string origin;  // the model's name in errors
  };
  // Checks that the parts fit together (encoders vs the UNet, the VAE's
  // latent channels, the scheduler config).
  static StatusOr<std::unique_ptr<TextToImage>> Create(Parts parts);

  const ModelFamily& family() const { return *parts_.family; }
  const Conditioning& conditioning() const { return *parts_.conditioning; }
  bool is_flux() const { return parts_.transformer != nullptr; }
  const models::UNetModel& unet() const { return *parts_.unet; }  // !is_flux()
  const models::FluxTransformerModel& transformer() const { return *parts_.transformer; }  // is_flux()
  const models::VaeModel& vae() const { return *parts_.vae; }
  // Every component: the encoders, the UNet, the VAE (each with its
  // parameters per model rank and its manifest).
  std::vector<ComponentParams> components() const;
  int model_ranks() const {
    return static_cast<int>(is_flux() ? transformer().ranks().size() : unet().ranks().size());
  }
  // The model's default image size (UNet sample_size times the VAE factor;
  // Flux: the VAE's sample_size).
  int default_size() const;
  // The output size {height, width}: the request's, else its init image's,
  // else default_size().
  std::pair<int, int> ImageSize(const GenerateRequest& r) const;
  // The image source a request asks for (img2img, inpainting) with this UNet.
  ImageSource Source(const GenerateRequest& r) const;
  float guidance(const GenerateRequest& r) const { return r.guidance.value_or(family().default_guidance); }

  // `devices` x batch_per_device images; a dry run needs no prompts.
  Status Validate(const GenerateRequest& r, int devices, bool dry_run) const;
  StatusOr<Txt2ImgPlan> MakePlan(const GenerateRequest& r) const;
  // SDXL's add_time_ids for an image of the plan's size.
  std::array<float, 6> TimeIds(const GenerateRequest& r, const Txt2ImgPlan& plan) const;
  StatusOr<DeviceOutputs> RunDevice(const models::Ctx& ctx, const Txt2ImgPlan& plan, const GenerateRequest& r,
                                    const DeviceInputs& in, const DeviceProgressFn& progress = {},
                                    const std::atomic<bool>* cancel = nullptr) const;

 private:
  explicit TextToImage(Parts parts) : parts_(std::move(parts)) {}
  // RunDevice of a Flux model (the flow above).
  StatusOr<DeviceOutputs> RunFlux(const models::Ctx& ctx, const Txt2ImgPlan& plan, const GenerateRequest& r,
                                  const DeviceInputs& in, const DeviceProgressFn& progress,
                                  const std::atomic<bool>* cancel) const;
  // The VAE decode of latents [b, C, h, w] (scaled in place to x /
  // scaling_factor + shift_factor first), one image at a time.
  StatusOr<mesh::Array> DecodeLatents(const models::Ctx& ctx, mesh::Array& x) const;
  // Validate's checks of the init images, masks and strength (b images).
  Status ValidateImages(const GenerateRequest& r, int64_t b) const;
  // The posterior samples' latents [b, C, h, w] of the device's init images
  // (masked: of the images with the repainted region zeroed).
  StatusOr<mesh::Array> EncodeImages(const models::Ctx& ctx, const Txt2ImgPlan& plan, const DeviceInputs& in,
                                     mesh::PrngImpl prng, bool masked) const;
  Parts parts_;
};

// Every split layer of every component (module "unet/down_blocks.0.resnets.0.conv2")
// and how it is split over `model_ranks`, with rank 0's share, for
// report::RunReport::sharding; empty when the model is not split.
std::vector<report::RunReport::ShardedLayer> ShardingPlan(const std::vector<ComponentParams>& components, int model_ranks);

// A real run's mesh (generate, eval): data x model. The fsdp axis is
// priced by simulate only; InvalidArgument naming --mesh otherwise.
Status CheckRealRunMesh(const mesh::Mesh& mesh);

// Places every component's parameters on the devices of a data x model mesh
// (mesh::CreateDataModelMesh): device d gets read-only views of its model
// rank's share, charged to its HBM (as jax places params at the first call).
// Over several ranks only this rank's devices get views; `bytes` counts
// every device's.
// ResourceExhausted names the device and the parameter that did not fit.
struct PlacedParams {
  std::vector<mesh::Array> arrays;    // alive for as long as the devices use them
  std::vector<int64_t> bytes;         // per device: HBM its parameters hold
};
StatusOr<PlacedParams> PlaceParams(mesh::Mesh& mesh, const std::vector<ComponentParams>& components);
// A pmap output over a data x model mesh reduced to one shard per data
// index, from the model group's rank 0 (every rank of a group returns the
// same): shard i is data index i's.
mesh::DistributedArray DataShards(const mesh::Mesh& mesh, const mesh::DistributedArray& out);
// [B] rows of a [B, ...] array on the host, restacked from the shards'
// [n, B/n, ...].
StatusOr<mesh::Array> Unstack(const mesh::DistributedArray& d);
// The devices DataShards reads: data index i's model rank 0 device.
std::vector<int> DataShardDevices(const mesh::Mesh& mesh);
// Unstack(DataShards(out)) over every rank of the mesh's cluster: the data
// shards are brought to rank 0 (mesh::Mesh::GatherToRank), which gets the
// [B, ...] array; the other ranks get an empty Array. Collective: every
// rank calls it at the same point.
StatusOr<mesh::Array> GatherDataShards(mesh::Mesh& mesh, const mesh::DistributedArray& out);

// The texts that define a model: each component's config, from a model file
// or a built-in architecture.
struct ModelConfigs {
  std::string origin;         // the file or architecture, for errors
  std::string model_index;    // may be empty
  std::string text_encoder;
  std::string text_encoder_2;  // empty: none
  std::string unet, vae, scheduler;
  std::string transformer;  // Flux: transformer/config.json (and no unet)
};
// A component's parameters for its manifest, one map per model rank (a
// rank's share, models/params.h): read from a file, or zeros.
using ParamSource = std::function<StatusOr<std::vector<models::ParamMap>>(
    const std::string& component, const std::vector<models::ParamSpec>& manifest, int model_ranks)>;
// Zero weights of each rank's shapes (a dry run reads none of them); with
// bf16_weights, the Linear and conv weights in bf16 as a bf16 model file
// holds them (models::MayHoldBf16), so that HBM is counted as for it.
StatusOr<std::vector<models::ParamMap>> ZeroParams(const std::string& component,
                                                   const std::vector<models::ParamSpec>& manifest, int model_ranks,
                                                   bool bf16_weights = false);
// The family from model_index.json's _class_name (or, without one, from the
// number of text encoders, or a transformer config: Flux), the configs
// parsed, the parameters taken from
// `params` split over `model_ranks`. Tokenizers may be null (a dry run).
StatusOr<std::unique_ptr<TextToImage>> BuildTextToImage(const ModelConfigs& configs, const ParamSource& params,
                                                        std::unique_ptr<ClipTokenizer> tokenizer,
                                                        std::unique_ptr<ClipTokenizer> tokenizer_2,
                                                        int model_ranks = 1);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_TXT2IMG_H_
