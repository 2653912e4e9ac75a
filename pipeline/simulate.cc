#include "pipeline/simulate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "base/printable.h"
#include "io/model_file.h"
#include "io/workload.h"
#include "models/architectures.h"
#include "models/parallel.h"
#include "pipeline/loader.h"
#include "report/rank_report.h"

namespace tpumesh::pipeline {
namespace {

using mesh::Array;

StatusOr<ModelConfigs> ReadConfigs(const SimulateOptions& o) {
  if (!o.arch.empty() && !o.model.empty()) return InvalidArgumentError("give --arch or --model, not both");
  if (!o.arch.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(models::Architecture a, models::BuiltinArchitecture(o.arch));
    return ModelConfigs{a.name, a.model_index, a.text_encoder, a.text_encoder_2, a.unet, a.vae, a.scheduler,
                        a.transformer};
  }
  if (o.model.empty()) return InvalidArgumentError("simulate needs --arch NAME or --model FILE");
  TPUMESH_ASSIGN_OR_RETURN(auto f, ModelFile::Open(o.model));
  return ReadModelConfigs(*f);
}

// `mine` settled across the ranks of spec.cluster (mesh::Cluster::Agree),
// or as is in one process.
Status AgreeOver(const mesh::MeshSpec& spec, const Status& mine) {
  return spec.cluster != nullptr ? spec.cluster->Agree(mine) : mine;
}

StatusOr<report::RunReport> SimulateOn(const SimulateOptions& o, const ModelConfigs& cf) {
  const auto t0 = std::chrono::steady_clock::now();
  const GenerateRequest& req = o.request;
  std::unique_ptr<mesh::Mesh> mesh;
  int data = 0, model = 0, fsdp = 1;
  std::unique_ptr<TextToImage> built;
  Txt2ImgPlan plan;
  // The setup, settled across ranks (it fails alike on every rank).
  const Status setup = [&]() -> Status {
    TPUMESH_ASSIGN_OR_RETURN(mesh, mesh::CreateDataModelMesh(o.mesh));
    // data x fsdp images at a time; the model axis is the last
    // (mesh::CreateDataModelMesh).
    fsdp = mesh->axes().size() == 3 ? mesh->axes()[1].size : 1;
    data = mesh->axes()[0].size * fsdp;
    model = mesh->axes().back().size;
    // At precision default the weights are counted in bf16, as the seeds'
    // bf16 pipeline and a bf16 model file hold them; f32 at highest.
    const bool bf16 = req.precision == models::Precision::kDefault;
    auto zeros = [bf16](const std::string& c, const std::vector<models::ParamSpec>& m, int ranks) {
      return ZeroParams(c, m, ranks, bf16);
    };
    auto b = BuildTextToImage(cf, zeros, nullptr, nullptr, model);
    if (!b.ok()) return Status(b.status().code(), "simulate " + cf.origin + ": " + b.status().message());
    built = std::move(b).value();
    TPUMESH_RETURN_IF_ERROR(built->Validate(req, data, /*dry_run=*/true));
    TPUMESH_ASSIGN_OR_RETURN(plan, built->MakePlan(req));
    return OkStatus();
  }();
  TPUMESH_RETURN_IF_ERROR(AgreeOver(o.mesh, setup));
  const TextToImage& flow = *built;

  // Each model rank's share, run dry on its first device: zero token ids, no
  // keys. The device counts its parameters and activations against its HBM
  // (without limit for a sweep). Ranks that hold parameters of the same
  // names and shapes run the same ops (rank 0 apart, which may hold what is
  // added once), so one dry run serves each such class: a model axis of
  // 1024 on SD 1.5 is a handful of runs, not 1024.
  std::vector<std::vector<mesh::OpRecord>> class_ops;
  std::vector<int64_t> class_peak, class_params;
  std::vector<int> class_device;  // the device each class's dry run ran on
  std::vector<int> class_of_rank(model);
  std::map<std::string, int> class_of_signature;
  // Over several ranks (o.mesh.cluster) each class runs on the rank hosting
  // its device, and a failure on any rank ends every rank here (Agree).
  const Status dry = [&]() -> Status {
    for (int rank = 0; rank < model; ++rank) {
      std::string signature = rank == 0 ? "rank 0" : "";
      for (const ComponentParams& c : flow.components())
        for (const auto& [name, a] : (*c.ranks)[rank].all()) {
          signature += "\n" + c.name + "/" + name;
          for (const int64_t d : a.shape()) signature += " " + std::to_string(d);
        }
      auto [known, fresh] = class_of_signature.emplace(signature, static_cast<int>(class_ops.size()));
      class_of_rank[rank] = known->second;
      if (!fresh) continue;
      class_ops.emplace_back();
      std::vector<int> at(mesh->axes().size(), 0);
      at.back() = rank;
      const int device = mesh->DeviceAt(at);
      class_device.push_back(device);
      class_params.push_back(0);
      class_peak.push_back(0);
      if (!mesh->is_local(device)) continue;  // another rank's
      mesh::Device& dev = mesh->device(device);
      if (!o.check_hbm) dev.set_hbm_capacity(std::numeric_limits<int64_t>::max() / 4);
      std::vector<Array> held;
      for (const ComponentParams& c : flow.components())
        for (const auto& [name, a] : (*c.ranks)[rank].all()) {
          // FSDP: a device holds its shard of each Linear and conv weight
          // (models::ModelAxis::GatherWeight).
          auto r = fsdp > 1 && models::OnlyPacked(name, a.shape())
                       ? Array::Allocate(dev, a.dtype(), {(a.num_elements() + fsdp - 1) / fsdp}, "parameter shard",
                                         true)
                       : a.ShareTo(dev, "parameter");
          if (!r.ok()) return r.status().WithContext("placing parameter " + c.name + "/" + name);
          held.push_back(std::move(r).value());
        }
      class_params.back() = dev.hbm_in_use();
      dev.ResetHbmPeak();
      TPUMESH_ASSIGN_OR_RETURN(models::ModelAxis axis, models::ModelAxis::Priced(*mesh, device));
      std::optional<models::ModelAxis> fsdp_axis;
      if (fsdp > 1) {
        TPUMESH_ASSIGN_OR_RETURN(fsdp_axis, models::ModelAxis::Priced(*mesh, device, "fsdp"));
      }
      models::Ctx ctx{&dev, req.precision};
      ctx.dry_run = true;
      ctx.ops = &class_ops.back();
      ctx.model = &axis;
      ctx.fsdp = fsdp_axis ? &*fsdp_axis : nullptr;
      std::vector<Array> ids;
      for (int i = 0; i < flow.conditioning().token_arrays(); ++i)
        ids.push_back(Array::Host(mesh::DType::kI32, {plan.batch_per_device, flow.conditioning().token_length(i)}));
      DeviceInputs in;
      in.ids = ids;
      TPUMESH_RETURN_IF_ERROR(flow.RunDevice(ctx, plan, req, in).status());
      class_peak.back() = dev.hbm_peak();
    }
    return OkStatus();
  }();
  mesh::Cluster& cluster = mesh->cluster();
  if (dry.code() == StatusCode::kResourceExhausted && o.check_hbm)
    TPUMESH_RETURN_IF_ERROR(cluster.Agree(
        Status(dry.code(), std::string(dry.message()) + " (simulate --no-hbm-limit prices the run anyway)")));
  TPUMESH_RETURN_IF_ERROR(cluster.Agree(dry));
  std::vector<double> wall_per_rank = {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  if (cluster.size() > 1) {
    // Every rank's classes (and wall time, tag -1) to every rank, so that
    // each holds the whole report, as one process would.
    std::vector<report::TaggedRecords> mine;
    const std::vector<mesh::OpRecord> none;
    mine.push_back({-1, 0, 0, &none});
    std::memcpy(&mine.back().value, &wall_per_rank[0], sizeof(double));
    for (size_t c = 0; c < class_ops.size(); ++c)
      if (mesh->is_local(class_device[c]))
        mine.push_back({static_cast<int64_t>(c), class_peak[c], class_params[c], &class_ops[c]});
    mesh::Bytes blob;
    report::EncodeRecords(mine, &blob);
    TPUMESH_ASSIGN_OR_RETURN(std::vector<mesh::Bytes> all, cluster.AllGatherBytes(blob));
    wall_per_rank.assign(cluster.size(), 0);
    for (int k = 0; k < cluster.size(); ++k) {
      const std::string from = "rank " + std::to_string(k);
      TPUMESH_ASSIGN_OR_RETURN(std::vector<report::DecodedRecords> lists, report::DecodeRecords(all[k], from));
      for (report::DecodedRecords& l : lists) {
        if (l.tag == -1) {
          std::memcpy(&wall_per_rank[k], &l.value, sizeof(double));
          continue;
        }
        if (l.tag < 0 || l.tag >= static_cast<int64_t>(class_ops.size()) || mesh->rank_of(class_device[l.tag]) != k)
          return InternalError("simulate: a dry run from " + from + " that is not one of its");
        class_ops[l.tag] = std::move(l.records);
        class_peak[l.tag] = l.value;
        class_params[l.tag] = l.extra;
      }
    }
  }

  report::RunReport r;
  r.mode = "simulate";
  r.chip = mesh->chip();
  r.devices = mesh->num_devices();
  r.images = static_cast<int64_t>(data) * plan.batch_per_device;
  r.mesh_axes = mesh::MeshAxesToString(mesh->axes());
  r.overlap = mesh->overlap_collectives();
  // Every device ran its rank's class's ops: one log per class.
  std::vector<int> class_of(r.devices);
  for (int d = 0; d < r.devices; ++d) {
    class_of[d] = class_of_rank[mesh->AxisIndices(d).back()];
    r.hbm_peak_bytes.push_back(class_peak[class_of[d]]);
    r.param_bytes.push_back(class_params[class_of[d]]);
  }
  r.sharding = ShardingPlan(flow.components(), flow.model_ranks());
  r.Finish(class_ops, class_of, req.keep_ops);
  r.host_seconds = 0;
  r.host_seconds_per_rank = wall_per_rank;
  r.info = {{"model", cf.origin},
            {"family", flow.family().name},
            {"scheduler", plan.scheduler},
            {"steps", std::to_string(plan.steps)},
            {"unet_calls", std::to_string(plan.timesteps.size())},
            {"size", std::to_string(plan.width) + "x" + std::to_string(plan.height)},
            {"batch_per_device", std::to_string(plan.batch_per_device)},
            {"precision", req.precision == models::Precision::kDefault ? "default" : "highest"},
            // FLUX.1-schnell has no guidance input (FluxPipeline ignores the scale).
            {"guidance", std::to_string(flow.is_flux() && !flow.transformer().config().guidance_embeds
                                            ? 0.0f
                                            : flow.guidance(req))},
            {"simulation_wall_seconds",
             std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count())}};
  return r;
}

// Every figure of every distinct log a finite number. The workload's bounds
// (io/workload.h) and the chip file's ranges keep them so; this says which
// layer did not, rather than writing inf or null into a report.
Status CheckFinite(const report::RunReport& r, const std::vector<int>& class_of, const std::string& origin) {
  std::vector<bool> seen;
  for (size_t d = 0; d < r.logs.size(); ++d) {
    const size_t c = static_cast<size_t>(class_of[d]);
    if (c < seen.size() && seen[c]) continue;
    if (c >= seen.size()) seen.resize(c + 1);
    seen[c] = true;
    for (const mesh::LayerTotals& l : r.logs[d].layers()) {
      const mesh::OpTypeTotals& t = l.totals;
      for (const double v : {t.flops, t.bytes, t.transcendentals, t.modelled_seconds, t.mxu_cycles, t.mxu_capacity_macs,
                             t.vmem_access_bytes, t.ici_bytes, t.energy.total()}) {
        if (!std::isfinite(v))
          return InvalidArgumentError(Printable(origin) + ": layer " + Quoted(l.module) +
                                      ": a figure of the cost model is not a finite number (" + std::to_string(v) +
                                      ")");
      }
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<report::RunReport> Simulate(const SimulateOptions& o) {
  StatusOr<ModelConfigs> cf = ReadConfigs(o);
  TPUMESH_RETURN_IF_ERROR(AgreeOver(o.mesh, cf.status()));
  return SimulateOn(o, *cf);
}

StatusOr<report::RunReport> SimulateWorkload(const WorkloadOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const kernels::Precision precision =
      o.precision == models::Precision::kDefault ? kernels::Precision::kDefault : kernels::Precision::kHighest;
  TPUMESH_ASSIGN_OR_RETURN(std::vector<WorkloadLayer> layers, LoadWorkload(o.path, precision, o.max_layers));
  TPUMESH_ASSIGN_OR_RETURN(auto mesh, mesh::CreateMesh(o.mesh));
  report::RunReport r;
  r.mode = "simulate";
  r.chip = mesh->chip();
  r.devices = mesh->num_devices();
  r.mesh_axes = mesh::MeshAxesToString(mesh->axes());
  r.overlap = mesh->overlap_collectives();
  if (const int64_t rows = static_cast<int64_t>(layers.size()) * r.devices; o.device_rows && rows > o.max_layers)
    return InvalidArgumentError(Printable(o.path) + ": " + std::to_string(layers.size()) + " layers on " +
                                std::to_string(r.devices) + " devices make " + std::to_string(rows) +
                                " rows of --report, --report-csv or --trace, more than " +
                                std::to_string(o.max_layers) + " (simulate --max-layers N raises it, up to " +
                                std::to_string(kMaxWorkloadLayers) + ")");
  // A collective's cost depends only on its group's layout (mesh/interconnect.h:
  // chips, cores per chip, ring or line, hops per step; every member sends and
  // waits alike): each axis's groups are found and laid out once, and each
  // (layer, distinct layout) priced once, so the work grows with layers x
  // layouts (one or two), not with layers x devices^2 or layers x groups. A
  // device's figures are the collectives' costs of its groups' layouts;
  // devices with the same figures share one priced log.
  struct AxisGroups {
    std::vector<int> layout_of;                   // device -> index in `layouts`
    std::vector<std::vector<int>> representative;  // layout -> a group with it
  };
  std::map<std::string, AxisGroups> axes;
  for (const WorkloadLayer& l : layers) {
    if (!l.collective || axes.count(l.axis)) continue;
    AxisGroups& a = axes[l.axis];
    a.layout_of.assign(r.devices, -1);
    std::map<std::tuple<int, int, int, int, bool, int, std::string>, int> index;
    const std::string axis[] = {l.axis};
    for (int d = 0; d < r.devices; ++d) {
      if (a.layout_of[d] >= 0) continue;
      auto group = mesh->Group(d, axis);
      if (!group.ok()) return group.status().WithContext(Printable(o.path) + ": layer " + Quoted(l.record.module));
      const mesh::GroupLayout g = mesh::AnalyzeGroup(mesh->topology(), *group);
      auto [it, fresh] = index.emplace(std::tuple(g.devices, g.chips, g.cores_per_chip, g.chiplets_per_chip, g.ring,
                                                  g.hops_per_step, g.algorithm),
                                       static_cast<int>(a.representative.size()));
      if (fresh) a.representative.push_back(*group);
      for (const int member : *group) a.layout_of[member] = it->second;
    }
  }
  // Per device, the index of its priced figures in `costs` for each
  // collective layer; devices with equal rows run the same ops.
  std::vector<mesh::CollectiveCost> costs;
  std::vector<std::vector<int>> row(r.devices);
  for (const WorkloadLayer& l : layers) {
    if (!l.collective) continue;
    const AxisGroups& a = axes[l.axis];
    const size_t first = costs.size();
    for (const std::vector<int>& g : a.representative)
      costs.push_back(mesh::ModelCollective(r.chip, mesh->topology(), *l.collective, g, l.bytes));
    for (int d = 0; d < r.devices; ++d) row[d].push_back(static_cast<int>(first) + a.layout_of[d]);
  }
  // Equal costs in different groups (a torus's identical rings) are one class.
  std::map<std::vector<std::pair<double, double>>, int> class_of_figures;
  std::vector<int> class_of(r.devices);
  std::vector<std::vector<mesh::OpRecord>> distinct;
  for (int d = 0; d < r.devices; ++d) {
    std::vector<std::pair<double, double>> figures;
    for (const int c : row[d]) figures.emplace_back(costs[c].seconds, static_cast<double>(costs[c].bytes_sent_per_device));
    auto [it, fresh] = class_of_figures.emplace(std::move(figures), static_cast<int>(distinct.size()));
    class_of[d] = it->second;
    if (!fresh) continue;
    std::vector<mesh::OpRecord> records;
    records.reserve(layers.size());
    size_t k = 0;
    for (const WorkloadLayer& l : layers) {
      records.push_back(l.record);
      if (!l.collective) continue;
      const mesh::CollectiveCost& cost = costs[row[d][k++]];
      records.back().ici_seconds = cost.seconds;
      records.back().ici_bytes = cost.bytes_sent_per_device;
    }
    distinct.push_back(std::move(records));
  }
  r.Finish(distinct, class_of, o.keep_ops);
  TPUMESH_RETURN_IF_ERROR(CheckFinite(r, class_of, o.path));
  r.info = {{"model", o.path},
            {"workload_layers", std::to_string(layers.size())},
            {"dataflow", std::string(kernels::DataflowName(r.chip.dataflow))},
            {"precision", o.precision == models::Precision::kDefault ? "default" : "highest"},
            {"simulation_wall_seconds",
             std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count())}};
  return r;
}

StatusOr<std::vector<MeshSweepRow>> SweepMesh(const SimulateOptions& o) {
  TPUMESH_ASSIGN_OR_RETURN(ModelConfigs cf, ReadConfigs(o));
  // The device count the sweep factorises.
  TPUMESH_ASSIGN_OR_RETURN(auto base, mesh::CreateDataModelMesh(o.mesh));
  const int n = base->num_devices();
  std::vector<MeshSweepRow> rows;
  // Per model size M: data parallel over the rest, and (when the rest is
  // more than one device) FSDP over all of it, maxdiffusion's
  // ici_fsdp_parallelism=-1; mixed data x fsdp meshes are left to --mesh
  // (listing them would multiply the rows: 66 meshes for 1024 devices).
  for (int m = 1; m <= n; ++m) {
    if (n % m != 0) continue;
    const int rest = n / m;
    std::vector<int> fsdp_sizes = {1};
    if (rest > 1) fsdp_sizes.push_back(rest);
    for (const int f : fsdp_sizes) {
      SimulateOptions so = o;
      so.mesh.devices = n;
      so.mesh.axes = "data=" + std::to_string(rest / f) + (f > 1 ? ",fsdp=" + std::to_string(f) : "") +
                     ",model=" + std::to_string(m);
      so.mesh.overlap = "on";
      so.request.keep_ops = false;
      so.check_hbm = false;
      TPUMESH_ASSIGN_OR_RETURN(report::RunReport r, SimulateOn(so, cf));
      MeshSweepRow row;
      row.mesh = so.mesh.axes;
      row.data = rest / f;
      row.fsdp = f;
      row.model = m;
      row.images = r.images;
      row.seconds = r.modelled_seconds();
      row.serial_seconds = r.serial_modelled_seconds();
      row.images_per_second = row.seconds > 0 ? r.images / row.seconds : 0;
      row.hbm_capacity = r.chip.hbm_bytes_per_device();
      row.fits = true;
      mesh::OpTypeTotals all;
      for (int d = 0; d < r.devices; ++d) {
        row.param_bytes = std::max(row.param_bytes, r.param_bytes[d]);
        row.activation_bytes = std::max(row.activation_bytes, r.hbm_peak_bytes[d] - r.param_bytes[d]);
        row.fits = row.fits && r.hbm_peak_bytes[d] <= row.hbm_capacity;
        const mesh::OpTypeTotals t = r.logs[d].total();
        all.mxu_useful_macs += t.mxu_useful_macs;
        all.mxu_capacity_macs += t.mxu_capacity_macs;
        row.ici_seconds = std::max(row.ici_seconds, t.ici_seconds);
        row.ici_bytes += static_cast<int64_t>(t.ici_bytes);
      }
      row.mxu_utilisation = all.utilisation();
      row.ici_share = row.seconds > 0 ? row.ici_seconds / row.seconds : 0;
      rows.push_back(row);
    }
  }
  return rows;
}

StatusOr<std::vector<DataflowSweepRow>> SweepDataflow(
    const mesh::MeshSpec& base, const std::function<StatusOr<report::RunReport>(const mesh::MeshSpec&)>& run) {
  std::vector<DataflowSweepRow> rows;
  for (const char* dataflow : {"ws", "os", "is"}) {
    for (double vmem : kSweepVmemMib) {
      mesh::MeshSpec spec = base;
      spec.dataflow = dataflow;
      spec.vmem_mib = vmem;
      TPUMESH_ASSIGN_OR_RETURN(report::RunReport r, run(spec));
      DataflowSweepRow row;
      row.dataflow = dataflow;
      row.vmem_mib = vmem;
      row.seconds = r.modelled_seconds();
      const mesh::OpTypeTotals all = report::AllDevicesTotals(r);
      row.mxu_cycles = all.mxu_cycles;
      row.hbm_bytes = all.bytes;
      row.energy_joules = all.energy.total();
      row.mxu_utilisation = all.utilisation();
      row.average_watts = row.seconds > 0 ? row.energy_joules / row.seconds : 0;
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace tpumesh::pipeline
