// Converts a diffusers Stable Diffusion folder (model_index.json,
// text_encoder/, unet/, vae/, tokenizer/, scheduler/) into one tpumesh model
// file (model_file.h).
//
// Contract: every required file is checked to exist and parse before the
// output is created; tensors stream from safetensors to HDF5 one at a time;
// the output appears only when complete (the writer's temp-file + rename).
// Non-float buffers (e.g. an int64 position_ids) are skipped and counted.
#ifndef TPUMESH_PIPELINE_CONVERT_H_
#define TPUMESH_PIPELINE_CONVERT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "mesh/array.h"

namespace tpumesh::pipeline {

struct ConvertStats {
  int64_t tensors = 0;
  int64_t parameters = 0;  // elements
  int64_t skipped = 0;     // non-float buffers not converted
  int64_t bytes_written = 0;
};

// progress(component, tensors done in it, tensors in it) is called after
// each tensor; may be empty.
StatusOr<ConvertStats> ConvertDiffusersFolder(
    const std::string& folder, const std::string& output, mesh::DType dtype,
    const std::function<void(const std::string&, int, int)>& progress = {});

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_CONVERT_H_
