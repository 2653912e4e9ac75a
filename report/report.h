// The chip's view of a run, for generate, eval, simulate and run: each device's
// op records priced on the chip (mesh/cost_model.h), a summary, a JSON
// report, a Chrome trace and a short table.
//
// Contract: Finish() prices every record of every device in order and
// advances nothing else; modelled_seconds is the slowest device's time (the
// devices run concurrently; within a device collectives overlap compute when
// `overlap`, mesh/cost_model.h). The JSON report has a top-level "summary"
// (modelled_seconds, overlap "on" or "off", serial_modelled_seconds: the
// slowest device's with every collective serial, ici_hidden_seconds: their
// difference, the ICI time hidden under compute, host_seconds,
// images, chip, devices, mesh, param_bytes_per_device, ici_bytes: sent by
// all devices, ici_seconds: the busiest device's time in collectives,
// ici_share of the modelled time, ...), per device a breakdown by op type,
// by layer ("layers", mesh::DeviceCostLog::layers) and by collective kind
// with its ici_bytes, ici_seconds and ici_hidden_seconds, its
// serial_modelled_seconds, ici_hidden_seconds and param_bytes,
// and a "sharding_plan": per split layer, how it is split, the collective
// it runs, calls, bytes per call and ICI seconds on device 0. The trace is
// Chrome trace-event JSON (opens in Perfetto): one process per virtual
// device with MXU, vector unit, HBM DMA and ICI tracks (one ICI event per
// collective, where the timeline starts it), plus a "host" process with the
// wall-clock time each op took on this host. Files are written atomically
// (io/atomic_file.h).
#ifndef TPUMESH_REPORT_REPORT_H_
#define TPUMESH_REPORT_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "mesh/chip_spec.h"
#include "mesh/cost_model.h"

namespace tpumesh::report {

struct RunReport {
  std::string mode;  // "generate", "eval" or "simulate"
  mesh::ChipSpec chip;
  int devices = 0;
  int64_t images = 0;
  double host_seconds = 0;
  // Host wall seconds of each rank (report/rank_report.h), rank 0 first;
  // host_seconds is their maximum. Empty: one process, not recorded.
  std::vector<double> host_seconds_per_rank;
  std::map<std::string, std::string> info;  // extra summary fields (model, steps, scheduler...)
  std::vector<mesh::DeviceCostLog> logs;     // per device, after Finish
  // Per device, the most HBM held at once (parameters and live activations,
  // as the device's accounting counts them); empty when not measured.
  std::vector<int64_t> hbm_peak_bytes;
  std::string mesh_axes;               // "data=4,model=2"; empty when unknown
  std::vector<int64_t> param_bytes;    // per device: HBM its parameters hold
  // The layers split over the model axis and how (pipeline/txt2img.h
  // ShardingPlan); empty when nothing is split.
  struct ShardedLayer {
    std::string module;  // "unet/down_blocks.0.resnets.0.conv2"
    std::string split;   // "input features (partial sums added by psum) by 32 groups; rank 0 holds 4"
    std::string collective;  // what the split layer runs: "psum", "all_gather" or "none"
  };
  std::vector<ShardedLayer> sharding;
  // Collectives overlapped with compute (mesh::Mesh::overlap_collectives);
  // set before Finish.
  bool overlap = true;

  // Prices `records[d]` for every device d (keep_ops: for a trace).
  void Finish(const std::vector<std::vector<mesh::OpRecord>>& records, bool keep_ops);
  // Prices each list of `distinct` once and gives device d the log of
  // distinct[of_device[d]]: devices that ran the same ops share one log
  // (mesh::DeviceCostLog copies share until written), so a 1024-device
  // report holds as many logs as there are distinct devices.
  void Finish(const std::vector<std::vector<mesh::OpRecord>>& distinct, const std::vector<int>& of_device,
              bool keep_ops);
  double modelled_seconds() const;
  double serial_modelled_seconds() const;  // the slowest device's, every collective serial
};

// The report and the trace as text, and written atomically.
std::string ReportJson(const RunReport& report);

// Every device's totals added: FLOPs, bytes, MXU cycles and MACs, ICI bytes,
// energy; ici_seconds is the busiest device's.
mesh::OpTypeTotals AllDevicesTotals(const RunReport& report);
// Per device and layer (mesh::DeviceCostLog::layers), one CSV row each:
// device, layer, op, type, shape, count, flops, mxu_cycles,
// mxu_utilisation, vmem_bytes, hbm_bytes, modelled_seconds, mxu_seconds, vector_seconds,
// hbm_seconds, ici_seconds, ici_bytes, vmem_access_bytes, energy_joules and its
// parts mxu_joules, vector_joules, vmem_joules, hbm_joules, ici_joules (an
// estimate), bound (MXU, vector, HBM or ICI).
// Each device's rows sum to its per-op-type totals.
std::string LayersCsv(const RunReport& report);
std::string TraceJson(const RunReport& report);
Status WriteReportJson(const std::string& path, const RunReport& report);
Status WriteTraceJson(const std::string& path, const RunReport& report);
// A few lines: per op type of device 0, count, GFLOP, GB, modelled seconds,
// MXU utilisation, host seconds; then the totals.
std::string ReportTable(const RunReport& report);

}  // namespace tpumesh::report

#endif  // TPUMESH_REPORT_REPORT_H_
