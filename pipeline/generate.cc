#include "pipeline/generate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>

#include "io/atomic_file.h"
#include "io/model_file.h"
#include "io/run_files.h"
#include "mesh/collectives.h"
#include "models/parallel.h"
#include "nlohmann/json.hpp"
#include "pipeline/default_model.h"
#include "pipeline/loader.h"
#include "report/rank_report.h"

namespace tpumesh::pipeline {
namespace {

using mesh::Array;
using mesh::DistributedArray;
using mesh::DType;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string PrecisionName(models::Precision p) {
  return p == models::Precision::kHighest ? "highest" : "default";
}

}  // namespace

Generator::~Generator() = default;

StatusOr<std::unique_ptr<Generator>> Generator::Open(const GeneratorOptions& o) {
  auto g = std::unique_ptr<Generator>(new Generator());
  // The mesh first: a bad --mesh fails before any loading.
  TPUMESH_ASSIGN_OR_RETURN(g->mesh_, mesh::CreateDataModelMesh(o.mesh));
  TPUMESH_RETURN_IF_ERROR(CheckRealRunMesh(*g->mesh_));
  std::string path = o.model;
  StatusOr<std::unique_ptr<ModelFile>> opened = InternalError("no model");
  if (path.empty()) {
    // The embedded default (pipeline/default_model.h), opened in memory.
    path = "the embedded default model";
    opened = ModelFile::OpenImage(DefaultModelBytes(), path);
    g->model_name_ = kDefaultModelName;
  } else {
    opened = ModelFile::Open(path);
    g->model_name_ = std::filesystem::path(path).filename().string();
  }
  TPUMESH_ASSIGN_OR_RETURN(auto file, std::move(opened));
  // The LoRAs read and checked against the model before any weight.
  LoraSet loras;
  if (!o.loras.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(LoraTargets targets, ReadLoraTargets(*file));
    TPUMESH_ASSIGN_OR_RETURN(loras, LoraSet::Open(o.loras, targets));
    g->loras_ = loras.Label();
  }
  // Refused before loading when the weights cannot fit in the host's memory.
  // (This rank's share of it: only its devices' model ranks are loaded.)
  TPUMESH_ASSIGN_OR_RETURN(HostMemoryEstimate need, EstimateHostMemory(*file, LocalModelRanks(*g->mesh_)));
  const int64_t have = HostMemoryAvailable();
  if (have > 0 && need.total() > have) {
    auto gib = [](int64_t b) { return mesh::FormatBytes(b); };
    return ResourceExhaustedError(
        path + ": loading needs about " + gib(need.total()) + " of host memory (weights " +
        gib(need.f32_bytes) + " f32 + " + gib(need.bf16_bytes) + " bf16, packed matmul weights " +
        gib(need.packed_bytes) + "), this host has " + gib(have) + " available" +
        (need.f32_bytes > need.bf16_bytes ? "; a bf16 model file (`tpumesh convert|init --dtype bf16`) "
                                            "holds its weights in half the memory"
                                          : ""));
  }
  g->packed_estimate_ = need.packed_bytes;
  g->release_packed_weights_ = o.release_packed_weights;
  g->f32_weights_ = need.f32_bytes > need.bf16_bytes;
  if (file->Has(kTrainingMetadata)) {
    TPUMESH_ASSIGN_OR_RETURN(std::string text, file->ReadText(kTrainingMetadata));
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object() && j.contains("vocabulary") && j["vocabulary"].is_array())
      for (const auto& w : j["vocabulary"])
        if (w.is_string()) g->vocabulary_.push_back(w.get<std::string>());
  }
  // Only the shares of this rank's devices' model ranks are kept (loader.h).
  TPUMESH_ASSIGN_OR_RETURN(g->flow_,
                           LoadTextToImage(*file, LocalModelRanks(*g->mesh_), loras.empty() ? nullptr : &loras));
  return g;
}

Status Generator::Validate(const GenerateRequest& r) const {
  if (given_back_)
    return FailedPreconditionError(
        "this generator gave its models' host memory back after the call marked last_use; open the model again");
  if (released_at_ && *released_at_ != r.precision)
    return FailedPreconditionError(
        std::string("this generator packed its weights at precision ") +
        (*released_at_ == models::Precision::kDefault ? "default" : "highest") +
        " and released the loaded copies (release_packed_weights); open the model again for another precision");
  return flow_->Validate(r, data_size(), false);
}

StatusOr<const Txt2ImgPlan*> Generator::GetPlan(const GenerateRequest& r, bool* built) {
  std::string overrides;
  for (const auto& [k, v] : r.scheduler_overrides) overrides += k + "=" + v + ";";
  const auto [height, width] = flow_->ImageSize(r);
  std::string source = std::to_string(static_cast<int>(flow_->Source(r)));
  if (r.strength) source += "@" + std::to_string(*r.strength);
  PlanKey key{r.batch_per_device, height, width, r.steps, r.scheduler + "|" + overrides + "|" + source,
              static_cast<int>(r.precision), flow_->guidance(r) > 1.0f};
  *built = false;
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  TPUMESH_ASSIGN_OR_RETURN(Txt2ImgPlan plan, flow_->MakePlan(r));
  // The parameters go to the devices once, with the first plan (the
  // transfer jax does on the first call of the pmapped function): each device
  // its model rank's share.
  if (placed_.arrays.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(placed_, PlaceParams(*mesh_, flow_->components()));
  }
  TPUMESH_RETURN_IF_ERROR(CheckMemory(r, plan));
  *built = true;
  auto owned = std::make_unique<Txt2ImgPlan>(std::move(plan));
  const Txt2ImgPlan* p = owned.get();
  plans_.emplace(key, std::move(owned));
  return p;
}

Status Generator::CheckMemory(const GenerateRequest& r, const Txt2ImgPlan& plan) {
  // A dry run of the flow on this rank's first device of each model rank
  // (the devices of one model rank run the same shapes): its allocations
  // count against the device's HBM as the real run's will, so a device
  // without room fails here, naming itself, before any compute.
  int64_t activations = 0;
  for (int rank = 0; rank < model_size(); ++rank) {
    int device = -1;
    for (int d = mesh_->first_local(); d < mesh_->first_local() + mesh_->num_local() && device < 0; ++d)
      if (mesh_->AxisIndices(d)[1] == rank) device = d;
    if (device < 0) continue;  // held by other ranks only
    mesh::Device& dev = mesh_->device(device);
    const int64_t params_hbm = dev.hbm_in_use();
    dev.ResetHbmPeak();
    TPUMESH_ASSIGN_OR_RETURN(models::ModelAxis axis, models::ModelAxis::Priced(*mesh_, device));
    models::Ctx ctx{&dev, r.precision};
    ctx.dry_run = true;
    ctx.model = &axis;
    std::vector<Array> ids(flow_->conditioning().token_arrays(),
                           Array::Host(DType::kI32, {plan.batch_per_device, kPromptLength}));
    DeviceInputs in;
    in.ids = ids;
    TPUMESH_RETURN_IF_ERROR(flow_->RunDevice(ctx, plan, r, in).status());
    activations = std::max(activations, dev.hbm_peak() - params_hbm);
    dev.ResetHbmPeak();
  }
  // The host holds the weights (loaded), their packed copies (built at the
  // first call) and its devices' activations at once (each rank its own).
  int64_t packed = 0;
  for (const ComponentParams& c : flow_->components()) {
    std::set<const models::WeightPacks*> seen;  // a component's model ranks share one
    for (const models::ParamMap& p : *c.ranks)
      if (seen.insert(p.packs()).second) packed += static_cast<int64_t>(p.packs()->bytes());
  }
  const int64_t to_pack =
      std::max<int64_t>(0, (r.precision == models::Precision::kHighest ? 2 : 1) * packed_estimate_ - packed);
  const int64_t need = to_pack + static_cast<int64_t>(mesh_->num_local()) * activations;
  const int64_t have = HostMemoryAvailable();
  if (have > 0 && need > have)
    return ResourceExhaustedError(
        "this run needs about " + mesh::FormatBytes(need) + " more host memory (packed weights " +
        mesh::FormatBytes(to_pack) + ", activations " + mesh::FormatBytes(activations) + " per device x " +
        std::to_string(mesh_->num_local()) + "), this host has " + mesh::FormatBytes(have) +
        " available: fewer devices or images per device, or a smaller size" +
        (f32_weights_ ? std::string(", or a bf16 model file") : std::string()));
  return OkStatus();
}

void Generator::GiveBackAfter(const std::string& phase) {
  for (const ComponentParams& c : flow_->components()) {
    const bool done = phase == "text" ? c.name.rfind("text_encoder", 0) == 0 : phase == "denoise" && c.name == "unet";
    if (!done) continue;
    for (const models::ParamMap& p : *c.ranks) p.GiveBack();
  }
  mesh::TrimHostHeap();  // the packs under 2 MiB were heap blocks
}

StatusOr<GenerateResult> Generator::Generate(const GenerateRequest& r, const ProgressFn& progress,
                                             const std::atomic<bool>* cancel, const PreviewFn& preview) {
  const int n = devices();
  const int data = data_size();
  const int64_t bpd = r.batch_per_device;
  const int64_t b = data * bpd;

  GenerateResult res;
  std::vector<Array> ids;
  const Txt2ImgPlan* plan = nullptr;
  // Everything before compute, settled across ranks (mesh::Cluster::Agree):
  // an error on any rank (a device without HBM, a host without memory)
  // ends every rank here, reported once.
  const Status prepared = [&]() -> Status {
    TPUMESH_RETURN_IF_ERROR(Validate(r));
    for (int64_t i = 0; i < b; ++i) {
      res.prompts.push_back(r.prompts.size() == 1 ? r.prompts[0] : r.prompts[i]);
      const size_t neg = r.prompts.size() == 1 ? 0 : static_cast<size_t>(i);
      res.negative_prompts.push_back(r.negative_prompts.empty()       ? std::string()
                                     : r.negative_prompts.size() == 1 ? r.negative_prompts[0]
                                                                      : r.negative_prompts[neg]);
    }
    // Tokenize on the host, like the pipeline's prepare_inputs.
    TPUMESH_ASSIGN_OR_RETURN(ids, flow_->conditioning().Tokenize(res.prompts, res.negative_prompts));

    const auto t_compile = Clock::now();
    bool built = false;
    TPUMESH_ASSIGN_OR_RETURN(plan, GetPlan(r, &built));
    res.compiled = built;
    res.compile_seconds = built ? Since(t_compile) : 0;
    return OkStatus();
  }();
  TPUMESH_RETURN_IF_ERROR(mesh_->cluster().Agree(prepared));
  res.scheduler = plan->scheduler;
  res.loras = loras_;
  res.timesteps.assign(plan->timesteps.begin() + plan->begin, plan->timesteps.end());
  res.strength = plan->source == ImageSource::kText ? 0.0 : plan->strength;
  res.height = plan->height;
  res.width = plan->width;
  res.guidance = flow_->guidance(r);

  // One key per image: split(key(seed), B).
  TPUMESH_ASSIGN_OR_RETURN(std::vector<mesh::PrngKey> keys, mesh::SplitChecked(mesh::KeyFromSeed(r.seed),
                                                                               static_cast<int>(b), r.prng));
  Array key_data = Array::Host(DType::kU32, {b, 2});
  for (int64_t i = 0; i < b; ++i) {
    key_data.mutable_data<uint32_t>()[2 * i] = keys[i][0];
    key_data.mutable_data<uint32_t>()[2 * i + 1] = keys[i][1];
  }
  const int64_t per_image = int64_t{plan->channels} * plan->latent_h * plan->latent_w;
  Array given = r.initial_latents ? *r.initial_latents : Array::Host(DType::kF32, {b, 0});
  // img2img and inpainting: each image's init image and mask as the
  // pipelines' processors make them (image / 255 * 2 - 1; the mask's grey
  // level / 255 binarized at 0.5), and any given posterior noise.
  const bool images = !r.init_images.empty();
  Array init = Array::Host(DType::kF32, {b, images ? 3 * int64_t{res.height} * res.width : 0});
  Array masks = Array::Host(DType::kF32, {b, r.masks.empty() ? 0 : int64_t{res.height} * res.width});
  Array posterior = r.posterior_noise ? *r.posterior_noise : Array::Host(DType::kF32, {b, 0});
  const int64_t pixels = int64_t{res.height} * res.width;
  for (int64_t i = 0; i < b && images; ++i) {
    const Image& im = r.init_images[r.init_images.size() == 1 ? 0 : i].image;
    float* d = init.mutable_data<float>() + i * 3 * pixels;
    for (int64_t p = 0; p < pixels; ++p)
      for (int ch = 0; ch < 3; ++ch) {
        const float v = static_cast<float>(im.rgb[p * 3 + ch]) / 255.0f;
        d[ch * pixels + p] = 2.0f * v - 1.0f;
      }
    if (r.masks.empty()) continue;
    const Image& m = r.masks[r.masks.size() == 1 ? 0 : i].image;
    float* md = masks.mutable_data<float>() + i * pixels;
    for (int64_t p = 0; p < pixels; ++p) md[p] = static_cast<float>(m.rgb[p * 3]) / 255.0f < 0.5f ? 0.0f : 1.0f;
  }

  // Sharded over the data axis (the same on every device of a model group):
  // the keys, the latents, the images, the token arrays.
  const std::string data_axis[] = {"data"};
  std::vector<DistributedArray> args;
  for (const Array* a : {&key_data, &given, &init, &masks, &posterior}) {
    TPUMESH_ASSIGN_OR_RETURN(DistributedArray d, mesh_->Shard(*a, data_axis));
    args.push_back(std::move(d));
  }
  for (const Array& a : ids) {
    TPUMESH_ASSIGN_OR_RETURN(DistributedArray d, mesh_->Shard(a, data_axis));
    args.push_back(std::move(d));
  }
  const int steps = static_cast<int>(plan->timesteps.size()) - plan->begin;  // the steps run
  const bool keep = r.keep_step_latents;

  // Progress counts the work of every device of this rank: the devices
  // share the host's cores, so one device's count alone runs ahead of the
  // rest.
  std::mutex progress_mu;
  std::map<std::string, int> progress_done;
  DeviceProgressFn report = [&](const std::string& phase, int done, int per_device) {
    if (!progress) return;
    std::lock_guard<std::mutex> lock(progress_mu);
    progress(phase, progress_done[phase] += done, per_device * mesh_->num_local());
  };

  // Previews: each data index's model rank 0 device renders its images
  // into the grid of the batch.
  const bool previews = preview && r.preview_every > 0;
  if (previews && !preview_) {
    TPUMESH_ASSIGN_OR_RETURN(LatentPreview fitted, FitLatentPreview(flow_->vae()));
    preview_ = std::move(fitted);
  }
  std::mutex preview_mu;
  std::vector<Image> preview_images;
  if (previews) {
    Image black{res.height, res.width, std::vector<uint8_t>(3 * static_cast<size_t>(res.height) * res.width, 0)};
    preview_images.assign(b, black);
  }
  auto on_latents = [&](int device, int done, int total, const float* x) {
    const std::vector<int> at = mesh_->AxisIndices(device);
    if (at.size() > 1 && at[1] != 0) return;  // the group's other ranks hold the same latents
    const int scale = res.height / plan->latent_h;
    std::lock_guard<std::mutex> lock(preview_mu);
    for (int64_t i = 0; i < bpd; ++i)
      preview_images[at[0] * bpd + i] = preview_->Render(x + i * per_image, plan->latent_h, plan->latent_w, scale);
    const auto [rows, cols] = GridShape(static_cast<int>(b));
    auto grid = MakeImageGrid(preview_images, rows, cols);
    if (grid.ok()) preview(*grid, done, total);
  };

  std::vector<std::vector<mesh::OpRecord>> records(n);
  mesh_->ResetClocks();
  const auto t_run = Clock::now();
  auto body = [&](mesh::DeviceContext& dctx, std::span<const Array> a) -> StatusOr<std::vector<Array>> {
    TPUMESH_ASSIGN_OR_RETURN(models::ModelAxis axis, models::ModelAxis::ForDevice(dctx));
    models::Ctx ctx{&dctx.device(), r.precision};
    ctx.release_packed_weights = release_packed_weights_;
    ctx.ops = &records[dctx.device_id()];
    ctx.model = &axis;
    DeviceInputs in;
    in.keys = a[0].data<uint32_t>();
    in.latents = r.initial_latents ? a[1].data<float>() : nullptr;
    in.image = images ? a[2].data<float>() : nullptr;
    in.mask = r.masks.empty() ? nullptr : a[3].data<float>();
    in.posterior_noise = r.posterior_noise ? a[4].data<float>() : nullptr;
    in.ids = a.subspan(5);
    if (previews) {
      in.every = r.preview_every;
      in.on_latents = [&, device = dctx.device_id()](int done, int total, const float* x) {
        on_latents(device, done, total, x);
      };
    }
    in.device_id = dctx.device_id();
    if (r.last_use) {
      // Once every device of this rank is past the phase, one of them gives
      // back the models no device needs any more; the others go on.
      in.on_phase_done = [&](const std::string& phase) {
        if (dctx.HostBarrier()) GiveBackAfter(phase);
      };
    }
    TPUMESH_ASSIGN_OR_RETURN(DeviceOutputs out, flow_->RunDevice(ctx, *plan, r, in, report, cancel));
    return std::vector<Array>{out.decoded, out.initial_latents, out.history};
  };
  if (release_packed_weights_) released_at_ = r.precision;  // from here on, packs may have replaced the weights
  if (r.last_use) given_back_ = true;  // from here on, models may be gone
  TPUMESH_ASSIGN_OR_RETURN(auto outs, mesh_->Pmap(body, args));
  // The images of data index i, from its model group's rank 0 device,
  // brought to rank 0 (the only rank that holds results).
  const bool root = mesh_->cluster().rank() == 0;
  TPUMESH_ASSIGN_OR_RETURN(Array decoded, GatherDataShards(*mesh_, outs[0]));
  TPUMESH_ASSIGN_OR_RETURN(res.initial_latents, GatherDataShards(*mesh_, outs[1]));
  if (keep) {
    // [data, steps, bpd, ...] -> [steps, B, ...]
    TPUMESH_ASSIGN_OR_RETURN(DistributedArray all, mesh_->GatherToRank(outs[2], 0, DataShardDevices(*mesh_)));
    if (root) {
      TPUMESH_ASSIGN_OR_RETURN(Array h, DataShards(*mesh_, all).Gather());
      res.latents_after_step = Array::Host(DType::kF32, {steps, b, plan->channels, plan->latent_h, plan->latent_w});
      const int64_t block = bpd * per_image;
      for (int d = 0; d < data; ++d)
        for (int s = 0; s < steps; ++s)
          std::memcpy(res.latents_after_step.mutable_data<float>() + (s * b + d * bpd) * per_image,
                      h.data<float>() + (static_cast<int64_t>(d) * steps + s) * block, block * sizeof(float));
    }
  }
  if (root) {
    const int64_t img = 3 * static_cast<int64_t>(res.height) * res.width;
    for (int64_t i = 0; i < b; ++i)
      res.images.push_back(ToUint8Image(decoded.data<float>() + i * img, res.height, res.width));
    for (int64_t i = 0; i < decoded.num_elements(); ++i)
      res.nonfinite_values += !std::isfinite(decoded.data<float>()[i]);
  }
  res.report.mode = "generate";
  res.report.chip = mesh_->chip();
  res.report.devices = n;
  res.report.images = b;
  res.report.mesh_axes = mesh::MeshAxesToString(mesh_->axes());
  res.report.overlap = mesh_->overlap_collectives();
  res.report.param_bytes = placed_.bytes;
  res.report.sharding = ShardingPlan(flow_->components(), flow_->model_ranks());
  std::vector<int64_t> hbm_peak(n, 0);
  for (int d = mesh_->first_local(); d < mesh_->first_local() + mesh_->num_local(); ++d)
    hbm_peak[d] = mesh_->device(d).hbm_peak();
  // Every rank's records and host time to rank 0, which prices them all.
  TPUMESH_RETURN_IF_ERROR(
      report::FinishAcrossRanks(*mesh_, records, hbm_peak, Since(t_run), r.keep_ops, &res.report));
  res.run_seconds = root ? res.report.host_seconds : Since(t_run);
  for (int d = mesh_->first_local(); d < mesh_->first_local() + mesh_->num_local(); ++d) {
    // The log holds every op and collective of the device: its clock.
    mesh_->device(d).SetClock(res.report.logs[d].seconds());
  }
  res.modelled_seconds = res.report.modelled_seconds();
  return res;
}

StatusOr<OutputFiles> EncodeImages(const std::string& dir, const GenerateResult& res, const GenerateRequest& r,
                                   const std::string& model_name) {
  const int b = static_cast<int>(res.images.size());
  OutputFiles files;
  auto params = [&](int i) {
    std::ostringstream s;
    s << res.prompts[i] << "\nNegative prompt: " << res.negative_prompts[i] << "\nSteps: " << r.steps
      << ", Scheduler: " << res.scheduler << ", Guidance: " << res.guidance << ", Seed: " << r.seed
      << ", Image: " << i << " of " << b << ", Size: " << res.width << "x" << res.height
      << ", Precision: " << PrecisionName(r.precision) << ", Model: " << model_name;
    if (!res.loras.empty()) s << ", LoRA: " << res.loras;
    if (!r.init_images.empty()) {
      s << ", Init image: " << r.init_images[r.init_images.size() == 1 ? 0 : i].name
        << ", Strength: " << res.strength;
      if (!r.masks.empty()) s << ", Mask: " << r.masks[r.masks.size() == 1 ? 0 : i].name;
    }
    return s.str();
  };
  for (int i = 0; i < b; ++i) {
    const std::string name = ImageFileName(i, b);  // io/run_files.h
    TPUMESH_ASSIGN_OR_RETURN(std::string png, EncodePng(res.images[i], {{"parameters", params(i)}}));
    files.emplace_back((std::filesystem::path(dir) / name).string(), std::move(png));
  }
  const auto [rows, cols] = GridShape(b);
  TPUMESH_ASSIGN_OR_RETURN(Image grid, MakeImageGrid(res.images, rows, cols));
  std::ostringstream s;
  s << "grid " << rows << "x" << cols << " of " << b << " images\n" << params(0);
  TPUMESH_ASSIGN_OR_RETURN(std::string png, EncodePng(grid, {{"parameters", s.str()}}));
  files.emplace_back((std::filesystem::path(dir) / "grid.png").string(), std::move(png));
  return files;
}

StatusOr<std::vector<std::string>> WriteImages(const std::string& dir, const GenerateResult& res,
                                               const GenerateRequest& r, const std::string& model_name) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgumentError("cannot create output directory " + dir + ": " + ec.message());
  TPUMESH_ASSIGN_OR_RETURN(OutputFiles files, EncodeImages(dir, res, r, model_name));
  TPUMESH_RETURN_IF_ERROR(WriteFilesAtomic(files));
  std::vector<std::string> written;
  for (const auto& f : files) written.push_back(f.first);
  return written;
}

}  // namespace tpumesh::pipeline
