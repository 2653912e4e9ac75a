// `tpumesh simulate`: prices a whole text-to-image generation on the emulated
// chip without computing it and without weights. It runs the text-to-image
// flow itself (pipeline/txt2img.h) as a dry run on zero weights
// (models::Ctx::dry_run: every layer checks shapes, allocates and records
// its cost, computes nothing), so that a simulation and a real run of the
// same settings record the same ops and report the same modelled time.
// Every device runs the same shapes, so one device is run and its figures
// stand for each.
//
// Contract: the request is validated as generate validates it (the flow's
// Validate, prompts aside); InvalidArgument names the flag.
#ifndef TPUMESH_PIPELINE_SIMULATE_H_
#define TPUMESH_PIPELINE_SIMULATE_H_

#include <string>

#include "base/status.h"
#include "pipeline/report.h"
#include "pipeline/txt2img.h"

namespace tpumesh::pipeline {

struct SimulateOptions {
  std::string arch;   // sd15 | sd21 | sdxl | tiny; or
  std::string model;  // a model file (its configs only are read)
  std::string chip = "v5e";
  int devices = 8;
  // Sizes, steps, scheduler, guidance, precision, SDXL's size conditioning
  // and keep_ops (for a trace); prompts are not read.
  GenerateRequest request;
};

StatusOr<RunReport> Simulate(const SimulateOptions& options);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_SIMULATE_H_
