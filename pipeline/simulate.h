// `tpumesh simulate`: prices a whole text-to-image generation on the emulated
// chip without computing it and without weights. The models run in dry mode
// (models::Ctx::dry_run: every layer checks shapes, allocates and records
// its cost, computes nothing), on the same code path and in the same order as
// `tpumesh generate` — text encoder on [uncond; cond], per UNet call the
// UNet, the guidance and the scheduler step, then the VAE decode — so that a
// simulation and a real run of the same settings report the same modelled
// time. Every device runs the same shapes, so one device is priced and its
// figures stand for each.
//
// Contract: InvalidArgument for bad settings (as generate), Unimplemented
// for a UNet the models cannot run (SDXL's text_time conditioning).
#ifndef TPUMESH_PIPELINE_SIMULATE_H_
#define TPUMESH_PIPELINE_SIMULATE_H_

#include <string>

#include "base/status.h"
#include "models/nn.h"
#include "pipeline/report.h"

namespace tpumesh::pipeline {

struct SimulateOptions {
  std::string arch;   // sd15 | sd21 | sdxl | tiny; or
  std::string model;  // a model file (its configs only are read)
  std::string chip = "v5e";
  int devices = 8;
  int batch_per_device = 1;
  int steps = 50;
  int height = 0;  // 0: the architecture's default size
  int width = 0;
  std::string scheduler;  // empty: the model's
  float guidance = 7.5f;
  models::Precision precision = models::Precision::kDefault;
  bool keep_ops = false;  // for a trace
};

StatusOr<RunReport> Simulate(const SimulateOptions& options);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_SIMULATE_H_
