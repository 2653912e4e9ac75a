// `tpumesh eval`: runs one component of a model file on inputs from an HDF5
// file, the batch sharded over N emulated devices (parameters replicated to
// every device, the batch split along its leading dimension, one pmap), and
// writes the outputs to an HDF5 file.
//
//   tokenizer     prompts (strings) [B]                  -> input_ids [B, 77] int32
//   text_encoder  input_ids [B, 77]                      -> last_hidden_state [B, 77, H]
//   unet          sample [B, C, h, w], timestep [B] or scalar,
//                 encoder_hidden_states [B, 77, D]       -> out_sample [B, C, h, w]
//   vae_decoder   latents [B, 4, h, w] (already / scaling_factor) -> sample [B, 3, H, W]
//   vae_encoder   sample [B, 3, H, W]                    -> latent_mean [B, 4, h, w]
#ifndef TPUMESH_PIPELINE_EVAL_H_
#define TPUMESH_PIPELINE_EVAL_H_

#include <string>

#include "base/status.h"
#include "models/nn.h"
#include "pipeline/report.h"

namespace tpumesh::pipeline {

struct EvalOptions {
  std::string model;
  std::string component;
  std::string input;
  std::string output;
  models::Precision precision = models::Precision::kHighest;
  int devices = 1;
  std::string chip = "v5e";
  std::string report;  // when set: the chip's view as JSON (pipeline/report.h)
  std::string trace;   // when set: a Chrome trace
};

struct EvalStats {
  RunReport report;
  int64_t batch = 0;
  double host_seconds = 0;       // the pmap (the forward pass), measured
  double total_seconds = 0;      // loading, replicating and the pmap
  double modelled_seconds = 0;   // the slowest device's simulated clock: its ops priced on the chip
};

StatusOr<EvalStats> RunEval(const EvalOptions& options);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_EVAL_H_
