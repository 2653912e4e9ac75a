#include "pipeline/eval.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "io/h5io.h"
#include "mesh/collectives.h"
#include "mesh/mesh.h"
#include "models/parallel.h"
#include "pipeline/loader.h"
#include "report/rank_report.h"

namespace tpumesh::pipeline {
namespace {

using mesh::Array;
using mesh::DistributedArray;

// Shards `inputs` (all [B, ...]) over the data axis, runs body per device
// with its model axis, and returns the output of each data index's model
// rank 0 device, restacked to [B, ...], on rank 0 (an empty Array on the
// others).
StatusOr<Array> ShardedRun(mesh::Mesh& m, const std::vector<Array>& inputs,
                           const std::function<StatusOr<Array>(const models::Ctx&, std::span<const Array>)>& body,
                           models::Precision precision, double* seconds,
                           std::vector<std::vector<mesh::OpRecord>>* records) {
  records->assign(m.num_devices(), {});
  const std::string data_axis[] = {"data"};
  std::vector<DistributedArray> sharded;
  for (const Array& x : inputs) {
    TPUMESH_ASSIGN_OR_RETURN(DistributedArray d, m.Shard(x, data_axis));
    sharded.push_back(std::move(d));
  }
  const auto t0 = std::chrono::steady_clock::now();
  TPUMESH_ASSIGN_OR_RETURN(
      auto outs, m.Pmap(
                     [&](mesh::DeviceContext& ctx, std::span<const Array> args) -> StatusOr<std::vector<Array>> {
                       TPUMESH_ASSIGN_OR_RETURN(models::ModelAxis axis, models::ModelAxis::ForDevice(ctx));
                       models::Ctx mctx{&ctx.device(), precision};
                       mctx.ops = &(*records)[ctx.device_id()];
                       mctx.model = &axis;
                       TPUMESH_ASSIGN_OR_RETURN(Array y, body(mctx, args));
                       return std::vector<Array>{y};
                     },
                     sharded));
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Each data index's output, brought to rank 0 (empty on the others).
  return GatherDataShards(m, outs[0]);
}

StatusOr<Array> Need(const std::string& file, const std::string& name) { return H5ReadArray(file, name); }

// An input's shape against what the component takes, before it runs: one
// entry of `dims` per axis, > 0 that size exactly, < 0 a multiple of its
// magnitude (-1: any size >= 1). `form` is the expected shape as the
// message shows it ("[B, 4, h, w], h and w multiples of 8").
Status CheckInputShape(const std::string& file, const std::string& name, const Array& x,
                       const std::vector<int64_t>& dims, const std::string& form) {
  bool ok = x.rank() == static_cast<int>(dims.size());
  for (int i = 0; ok && i < x.rank(); ++i)
    ok = x.dim(i) >= 1 && (dims[i] > 0 ? x.dim(i) == dims[i] : x.dim(i) % -dims[i] == 0);
  if (ok) return OkStatus();
  return InvalidArgumentError(file + ": '" + name + "' has shape " + mesh::ShapeToString(x.shape()) + ", expected " +
                              form);
}

}  // namespace

StatusOr<EvalStats> RunEval(const EvalOptions& o) {
  EvalStats stats;
  // One process, or the ranks of o.mesh.cluster: a step that may fail is
  // settled across them, so that an error every rank meets is printed once.
  auto agree = [&](const Status& mine) { return o.mesh.cluster != nullptr ? o.mesh.cluster->Agree(mine) : mine; };
  StatusOr<std::unique_ptr<ModelFile>> opened = ModelFile::Open(o.model);
  if (o.component == "tokenizer") {
    // Host work only: every rank computes it, rank 0 keeps the file.
    const Status done = [&]() -> Status {
      TPUMESH_RETURN_IF_ERROR(opened.status());
      TPUMESH_ASSIGN_OR_RETURN(ClipTokenizer tok, LoadTokenizer(**opened));
      TPUMESH_ASSIGN_OR_RETURN(std::vector<std::string> prompts, H5ReadStrings(o.input, "prompts"));
      Array ids = Array::Host(mesh::DType::kI32, {static_cast<int64_t>(prompts.size()), 77});
      for (size_t i = 0; i < prompts.size(); ++i) {
        auto row = tok.EncodePadded(prompts[i], 77);
        if (!row.ok()) return row.status().WithContext(o.input + ": prompts[" + std::to_string(i) + "]");
        std::copy(row->begin(), row->end(), ids.mutable_data<int32_t>() + i * 77);
      }
      TPUMESH_ASSIGN_OR_RETURN(auto w, H5Writer::Create(o.output));
      TPUMESH_RETURN_IF_ERROR(w->Write("input_ids", ids));
      TPUMESH_ASSIGN_OR_RETURN(std::string bytes, w->Finish());
      if (o.mesh.cluster == nullptr || o.mesh.cluster->rank() == 0) stats.files.emplace_back(o.output, std::move(bytes));
      stats.batch = static_cast<int64_t>(prompts.size());
      return OkStatus();
    }();
    TPUMESH_RETURN_IF_ERROR(agree(done));
    return stats;
  }

  // Everything before compute runs inside `ready`, settled across ranks
  // (mesh::Cluster::Agree) before the pmap: an error on any rank ends every
  // rank there, reported once. `run` is the pmap it prepared.
  std::unique_ptr<H5Writer> writer;
  std::unique_ptr<mesh::Mesh> m;
  int model_ranks = 1;
  std::string out_name;
  Array result;
  std::vector<std::vector<mesh::OpRecord>> records;
  std::vector<ComponentParams> components;  // what the devices hold
  PlacedParams placed;
  // The loaded component (one of them), alive until the run is priced.
  std::optional<models::ClipTextModel> text_encoder;
  std::optional<models::UNetModel> unet;
  std::optional<models::VaeModel> vae;
  std::function<Status()> run;
  const auto t_load = std::chrono::steady_clock::now();
  const Status ready = [&]() -> Status {
    TPUMESH_RETURN_IF_ERROR(opened.status());
    const ModelFile& file = **opened;
    // Created first so an unwritable output fails before any compute; the
    // file appears only on Commit.
    TPUMESH_ASSIGN_OR_RETURN(writer, H5Writer::Create(o.output));
    mesh::MeshSpec spec = o.mesh;
    // One device unless a flag gives the count (--topology alone gives its own).
    if (spec.devices == 0 && spec.axes.empty() && spec.topology.empty()) spec.devices = 1;
    TPUMESH_ASSIGN_OR_RETURN(m, mesh::CreateDataModelMesh(spec));
    TPUMESH_RETURN_IF_ERROR(CheckRealRunMesh(*m));
    const int data = m->axes()[0].size;
    model_ranks = m->axes()[1].size;
    // The LoRAs, checked against the whole model before any weight is read.
    LoraSet loras;
    if (!o.loras.empty()) {
      TPUMESH_ASSIGN_OR_RETURN(LoraTargets targets, ReadLoraTargets(file));
      TPUMESH_ASSIGN_OR_RETURN(loras, LoraSet::Open(o.loras, targets));
    }
    const LoraSet* fused = loras.empty() ? nullptr : &loras;

    auto check_batch = [&](const Array& x, const std::string& name) -> Status {
      if (x.rank() < 1 || x.dim(0) % data != 0)
        return InvalidArgumentError(o.input + ": '" + name + "' has batch " + (x.rank() ? std::to_string(x.dim(0)) : "none") +
                                    ", not divisible by the mesh's data axis (" + std::to_string(data) + ")");
      stats.batch = x.dim(0);
      return OkStatus();
    };
    auto place = [&](const char* name, const auto& model, std::vector<models::ParamSpec> manifest) -> Status {
      components = {{name, &model.ranks(), std::move(manifest)}};
      TPUMESH_ASSIGN_OR_RETURN(placed, PlaceParams(*m, components));
      return OkStatus();
    };
    if (o.component == "text_encoder") {
      TPUMESH_ASSIGN_OR_RETURN(text_encoder, LoadTextEncoder(file, LocalModelRanks(*m), fused));
      const models::ClipTextModel& model = *text_encoder;
      TPUMESH_RETURN_IF_ERROR(place("text_encoder", model, models::ClipTextParams(model.config())));
      TPUMESH_ASSIGN_OR_RETURN(Array ids, Need(o.input, "input_ids"));
      if (ids.dtype() != mesh::DType::kI32) return InvalidArgumentError(o.input + ": 'input_ids' must be integers");
      const int max_len = model.config().max_position_embeddings;
      // L: at most the text encoder's max_position_embeddings.
      const std::string form = "[B, L], L from 1 to " + std::to_string(max_len);
      TPUMESH_RETURN_IF_ERROR(CheckInputShape(o.input, "input_ids", ids, {-1, -1}, form));
      if (ids.dim(1) > max_len) return CheckInputShape(o.input, "input_ids", ids, {}, form);
      TPUMESH_RETURN_IF_ERROR(check_batch(ids, "input_ids"));
      run = [&, ids]() -> Status {
        TPUMESH_ASSIGN_OR_RETURN(result, ShardedRun(*m, {ids}, [&](const models::Ctx& c, std::span<const Array> a) {
          return text_encoder->Forward(c, a[0]);
        }, o.precision, &stats.host_seconds, &records));
        return OkStatus();
      };
      out_name = "last_hidden_state";
    } else if (o.component == "unet") {
      TPUMESH_ASSIGN_OR_RETURN(unet, LoadUNet(file, LocalModelRanks(*m), fused));
      const models::UNetModel& model = *unet;
      TPUMESH_RETURN_IF_ERROR(place("unet", model, models::UNetParams(model.config())));
      TPUMESH_ASSIGN_OR_RETURN(Array sample, Need(o.input, "sample"));
      TPUMESH_ASSIGN_OR_RETURN(Array ehs, Need(o.input, "encoder_hidden_states"));
      TPUMESH_ASSIGN_OR_RETURN(Array t, Need(o.input, "timestep"));
      TPUMESH_RETURN_IF_ERROR(check_batch(sample, "sample"));
      if (sample.dtype() != mesh::DType::kF32 || ehs.dtype() != mesh::DType::kF32)
        return InvalidArgumentError(o.input + ": 'sample' and 'encoder_hidden_states' must be floats");
      const models::UNetConfig& uc = model.config();
      const int64_t f = int64_t{1} << (uc.block_out_channels.size() - 1);
      const std::string in = std::to_string(uc.in_channels), fs = std::to_string(f);
      TPUMESH_RETURN_IF_ERROR(CheckInputShape(o.input, "sample", sample, {-1, uc.in_channels, -f, -f},
                                              "[B, " + in + ", h, w], h and w multiples of " + fs));
      const int64_t b = sample.dim(0);
      const std::string cad = std::to_string(uc.cross_attention_dim[0]);
      TPUMESH_RETURN_IF_ERROR(CheckInputShape(o.input, "encoder_hidden_states", ehs, {b, -1, uc.cross_attention_dim[0]},
                                              "[" + std::to_string(b) + ", L, " + cad + "] (the batch of 'sample')"));
      if (t.rank() > 1 || (t.num_elements() != 1 && t.num_elements() != b))
        return InvalidArgumentError(o.input + ": 'timestep' has shape " + mesh::ShapeToString(t.shape()) +
                                    ", expected a scalar, [1] or [" + std::to_string(b) + "]");
      Array ts = Array::Host(mesh::DType::kF32, {b});
      for (int64_t i = 0; i < b; ++i) {
        const int64_t j = t.num_elements() == 1 ? 0 : i;
        ts.mutable_data<float>()[i] = t.dtype() == mesh::DType::kF32 ? t.data<float>()[j]
                                                                      : static_cast<float>(t.data<int32_t>()[j]);
      }
      run = [&, sample, ts, ehs]() -> Status {
        TPUMESH_ASSIGN_OR_RETURN(result, ShardedRun(*m, {sample, ts, ehs}, [&](const models::Ctx& c, std::span<const Array> a) {
          const std::vector<float> tv = a[1].ToVector<float>();
          return unet->Forward(c, a[0], tv, a[2]);
        }, o.precision, &stats.host_seconds, &records));
        return OkStatus();
      };
      out_name = "out_sample";
    } else if (o.component == "vae_decoder" || o.component == "vae_encoder") {
      TPUMESH_ASSIGN_OR_RETURN(vae, LoadVae(file, LocalModelRanks(*m)));
      const models::VaeModel& model = *vae;
      TPUMESH_RETURN_IF_ERROR(place("vae", model, models::VaeParams(model.config())));
      const bool decode = o.component == "vae_decoder";
      TPUMESH_ASSIGN_OR_RETURN(Array x, Need(o.input, decode ? "latents" : "sample"));
      if (x.dtype() != mesh::DType::kF32) return InvalidArgumentError(o.input + ": input must be floats");
      const models::VaeConfig& vc = model.config();
      const int64_t f = vc.scale_factor();
      TPUMESH_RETURN_IF_ERROR(
          decode ? CheckInputShape(o.input, "latents", x, {-1, vc.latent_channels, -1, -1},
                                   "[B, " + std::to_string(vc.latent_channels) + ", h, w]")
                 : CheckInputShape(o.input, "sample", x, {-1, vc.in_channels, -f, -f},
                                   "[B, " + std::to_string(vc.in_channels) + ", H, W], H and W multiples of " +
                                       std::to_string(f)));
      TPUMESH_RETURN_IF_ERROR(check_batch(x, decode ? "latents" : "sample"));
      run = [&, x, decode]() -> Status {
        TPUMESH_ASSIGN_OR_RETURN(result, ShardedRun(*m, {x}, [&](const models::Ctx& c, std::span<const Array> a) {
          return decode ? vae->Decode(c, a[0]) : vae->EncodeMean(c, a[0]);
        }, o.precision, &stats.host_seconds, &records));
        return OkStatus();
      };
      out_name = decode ? "sample" : "latent_mean";
    } else {
      return InvalidArgumentError("unknown component '" + o.component +
                                  "' (tokenizer, text_encoder, unet, vae_decoder, vae_encoder)");
    }
    return OkStatus();
  }();
  TPUMESH_RETURN_IF_ERROR(agree(ready));
  TPUMESH_RETURN_IF_ERROR(run());
  stats.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  stats.report.mode = "eval";
  stats.report.chip = m->chip();
  stats.report.devices = m->num_devices();
  stats.report.mesh_axes = mesh::MeshAxesToString(m->axes());
  stats.report.overlap = m->overlap_collectives();
  stats.report.param_bytes = placed.bytes;
  stats.report.sharding = ShardingPlan(components, model_ranks);
  stats.report.images = stats.batch;
  stats.report.info = {{"component", o.component}, {"model", o.model}};
  std::vector<int64_t> hbm_peak(m->num_devices(), 0);
  for (int d = m->first_local(); d < m->first_local() + m->num_local(); ++d) hbm_peak[d] = m->device(d).hbm_peak();
  // Every rank's records and host time to rank 0, which prices them all.
  TPUMESH_RETURN_IF_ERROR(report::FinishAcrossRanks(*m, records, hbm_peak, stats.host_seconds, o.keep_ops, &stats.report));
  stats.host_seconds = stats.report.host_seconds;
  for (int d = m->first_local(); d < m->first_local() + m->num_local(); ++d)
    m->device(d).SetClock(stats.report.logs[d].seconds());
  stats.modelled_seconds = stats.report.modelled_seconds();
  if (m->cluster().rank() != 0) return stats;  // rank 0 writes
  TPUMESH_RETURN_IF_ERROR(writer->Write(out_name, result));
  TPUMESH_ASSIGN_OR_RETURN(std::string bytes, writer->Finish());
  stats.files.emplace_back(o.output, std::move(bytes));
  return stats;
}

}  // namespace tpumesh::pipeline
