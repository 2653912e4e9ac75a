// `tpumesh eval`: runs one component of a model file on inputs from an HDF5
// file over a data x model mesh (mesh::CreateDataModelMesh: --mesh
// data=D,model=M), one pmap, and writes the outputs to an HDF5 file. The
// batch is split along its leading dimension over `data`; the component's
// parameters are split over `model` as generate splits them
// (docs/sharding.md), each device holding its model rank's share; the
// output is read from the model rank 0 device of each data index. The
// output path is checked writable before any compute; the file itself is
// returned, not written.
//
// Ranks (mesh.cluster, docs/cluster.md): every rank calls RunEval with the
// same options and reads the model and the inputs itself; errors before
// the pmap are settled across ranks (mesh::Cluster::Agree: every rank
// fails, the cause reported by one); each rank runs its devices; the output
// and the report (every device's records, priced on rank 0) end on rank 0
// only: the other ranks' `files` are empty.
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
#include <utility>
#include <vector>

#include "base/status.h"
#include "mesh/mesh.h"
#include "models/nn.h"
#include "pipeline/lora.h"
#include "report/report.h"

namespace tpumesh::pipeline {

struct EvalOptions {
  std::string model;
  std::string component;
  std::string input;
  std::string output;
  models::Precision precision = models::Precision::kHighest;
  mesh::MeshSpec mesh;  // devices 0 and no axes: one device
  bool keep_ops = false;  // keep every op in the report (for a trace)
  // LoRAs fused into the text encoder's or the UNet's weights at load
  // (pipeline/lora.h), each checked against the whole model.
  std::vector<LoraSpec> loras;
};

struct EvalStats {
  report::RunReport report;
  int64_t batch = 0;
  double host_seconds = 0;       // the pmap (the forward pass), measured
  double total_seconds = 0;      // loading, replicating and the pmap
  double modelled_seconds = 0;   // the slowest device's simulated clock: its ops priced on the chip
  // The output file (path, bytes), for the caller to write together with
  // its other outputs (io/atomic_file.h WriteFilesAtomic).
  std::vector<std::pair<std::string, std::string>> files;
};

StatusOr<EvalStats> RunEval(const EvalOptions& options);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_EVAL_H_
