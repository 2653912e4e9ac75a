// `tpumesh simulate`: prices a whole text-to-image generation on the emulated
// chip without computing it and without weights. It runs the text-to-image
// flow itself (pipeline/txt2img.h) as a dry run on zero weights
// (models::Ctx::dry_run: every layer checks shapes, allocates and records
// its cost, computes nothing; collectives are priced and move nothing), so
// that a simulation and a real run of the same settings record the same ops
// and collectives and report the same modelled time.
//
// Over a data=D, model=M mesh each model rank holds its own share of the
// parameters and may hold more or fewer heads or groups than another (an
// uneven split), so the flow is run once per rank, on the first device of
// that rank, and every device gets its rank's figures. A dry run runs the
// first denoising step and repeats its records for the others (every step
// has the same shapes).
//
// Ranks (options.mesh.cluster, docs/cluster.md): every rank calls Simulate
// with the same options; each dry run runs on the rank hosting its device
// (they spread over ranks when model groups do), a failure on any rank ends
// every rank (mesh::Cluster::Agree), and every rank ends with the whole
// report, the same as one process's; host_seconds_per_rank holds each
// rank's wall time. SimulateWorkload and the sweeps run in one process.
//
// Contract: the request is validated as generate validates it (the flow's
// Validate, prompts aside); InvalidArgument names the flag. Device HBM is
// enforced as in generate unless check_hbm is off (SweepMesh, --no-hbm-limit):
// hbm_peak_bytes says what each device would hold and SweepMesh whether it
// fits.
#ifndef TPUMESH_PIPELINE_SIMULATE_H_
#define TPUMESH_PIPELINE_SIMULATE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/workload.h"
#include "mesh/mesh.h"
#include "pipeline/txt2img.h"
#include "report/report.h"

namespace tpumesh::pipeline {

struct SimulateOptions {
  std::string arch;   // models::ArchitectureNames(); or
  std::string model;  // a model file (its configs only are read)
  mesh::MeshSpec mesh;
  // Sizes, steps, scheduler, guidance, precision, SDXL's size conditioning
  // and keep_ops (for a trace); prompts are not read.
  GenerateRequest request;
  // Each device's HBM enforced as generate enforces it (the same
  // RESOURCE_EXHAUSTED naming the device); SweepMesh turns it off and says
  // per mesh shape whether the run fits.
  bool check_hbm = true;
};

StatusOr<report::RunReport> Simulate(const SimulateOptions& options);

// `simulate --workload FILE`: a user's layers (io/workload.h), no model,
// priced on every device of the mesh: compute layers as recorded, each
// collective over the group of its mesh axis that holds the device
// (mesh/interconnect.h). An axis the mesh lacks is InvalidArgument naming
// the layer and the mesh's axes.
struct WorkloadOptions {
  std::string path;
  mesh::MeshSpec mesh;  // any axes (default data=devices)
  models::Precision precision = models::Precision::kDefault;
  bool keep_ops = false;  // for a trace
  int64_t max_layers = kDefaultMaxWorkloadLayers;  // io/workload.h: the bound on expanded layers
  // A report, CSV or trace will list a row per device and layer: then
  // max_layers bounds layers x devices too (1,000 layers on 1,024 devices
  // make a 760 MB JSON report).
  bool device_rows = false;
};
StatusOr<report::RunReport> SimulateWorkload(const WorkloadOptions& options);

// One row of `simulate --sweep-mesh`: the same request on data=D, model=M,
// or data=D,fsdp=F,model=M.
struct MeshSweepRow {
  std::string mesh;  // "data=4,model=2", "data=2,fsdp=2,model=2"
  int data = 0, fsdp = 1, model = 0;
  int64_t images = 0;               // per batch: D x F x batch per device
  double seconds = 0;               // modelled time of one batch = latency of an image, collectives overlapped
  double serial_seconds = 0;        // the same with every collective serial (--overlap off)
  double images_per_second = 0;     // throughput
  int64_t param_bytes = 0;          // per device (the largest)
  int64_t activation_bytes = 0;     // peak live activations per device (the largest)
  int64_t hbm_capacity = 0;         // per device
  bool fits = false;                // params + activations <= capacity on every device
  double mxu_utilisation = 0;       // over all devices
  double ici_seconds = 0;           // the largest device's time in collectives
  double ici_share = 0;             // ici_seconds / seconds
  int64_t ici_bytes = 0;            // sent by all devices
};
// Every factorisation D x F x M of the device count, M ascending, then F
// ascending (F = 1: data=D,model=M); each priced
// with collectives overlapped and serial (both from one run: the report's
// modelled and serial_modelled seconds), whatever options.mesh.overlap says.
StatusOr<std::vector<MeshSweepRow>> SweepMesh(const SimulateOptions& options);

// One row of `simulate --sweep-dataflow`: the same run priced in one
// dataflow with one VMEM size; figures over all devices.
struct DataflowSweepRow {
  std::string dataflow;      // ws | os | is
  double vmem_mib = 0;       // per TensorCore
  double seconds = 0;        // modelled time of the run (its slowest device)
  double mxu_cycles = 0;     // summed over devices
  double mxu_utilisation = 0;
  double hbm_bytes = 0;      // summed over devices
  double energy_joules = 0;  // estimate, summed over devices
  double average_watts = 0;  // energy_joules / seconds
};
// The VMEM sizes swept, MiB per TensorCore: v2 to v4 have 16, v5e 128.
inline constexpr double kSweepVmemMib[] = {16, 32, 64, 128};
// `run` prices the run on a mesh (Simulate or SimulateWorkload with that
// mesh); it is called for ws, os and is, each with every kSweepVmemMib, on
// `base` with its dataflow and VMEM replaced. Rows in that order.
StatusOr<std::vector<DataflowSweepRow>> SweepDataflow(
    const mesh::MeshSpec& base, const std::function<StatusOr<report::RunReport>(const mesh::MeshSpec&)>& run);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_SIMULATE_H_
