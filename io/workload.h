// A user's workload for `tpumesh simulate --workload FILE`: layers to price
// on the emulated chip with no model file. Two formats (docs/formats.md):
//
//  - A SCALE-Sim v2 topology CSV (*.csv), in either of its forms, told apart
//    by the header row:
//      conv: Layer name, IFMAP Height, IFMAP Width, Filter Height,
//            Filter Width, Channels, Num Filter, Strides[, ...]
//      GEMM: Layer, M, N, K[, ...]
//    (the GEMM form's first column may also be "Layer Name"). A conv row
//    is one image, unpadded (SCALE-Sim's convention): an E x F ofmap with
//    E = ceil((H - R + stride) / stride) as SCALE-Sim rounds it (a last
//    window that overhangs the edge counts), F likewise; as a matmul
//    M = E F ofmap pixels, N = filters, K = R S C; a layer named with "DP" is depthwise
//    as SCALE-Sim reads it: one single-channel conv per channel,
//    "<name>Channel_<i>". A GEMM row is C[M, N] = A[M, K] x B[K, N].
//    Extra columns (SCALE-Sim's sparsity fields) and trailing commas are
//    ignored; blank lines are skipped.
//  - A JSON object {"layers": [...]} (*.json), each layer an object with a
//    "name", an "op" and the op's fields (all integers >= 1):
//      matmul       m, n, k                 C[m, n] = A[m, k] B[k, n]
//      conv         batch, height, width, in_channels, out_channels,
//                   kernel, [stride = 1, padding = 0]   (square kernel)
//      attention    batch, q_len, kv_len, heads, head_dim
//      elementwise  elements, [flops_per_element = 1,
//                   transcendentals_per_element = 0, inputs = 1]
//      psum | pmean | all_gather | psum_scatter | all_to_all
//                   axis (a mesh axis name), bytes (per device, input)
//    and optionally "repeat" (default 1: the layer runs that many times).
//
// Every layer becomes an OpRecord named after it (OpRecord::module), with
// the figures the model layers state (bytes as bf16 at kDefault, f32
// otherwise) and its matmuls for the MXU; a collective carries its kind,
// axis and bytes for the caller to price on a mesh.
//
// Contract: a malformed file is one InvalidArgument naming the file and the
// place: "net.csv:3:4: ..." (line, 1-based field) for a CSV, the JSON
// parser's line and column, or "layers[2] (\"fc1\"): field 'k' ..." for a
// JSON layer; names are quoted and escaped (base/printable.h), a value is
// shown as its type when it is not a number (a field nested 200,000 arrays
// deep is "an array", never dumped). A UTF-8 byte order mark and CRLF line
// ends are accepted.
//
// Bounded work: a file expands to at most `max_layers` layers (a depthwise
// row counts its channels) or is refused at the row that passes it, naming
// the bound and `simulate --max-layers`, before the layers are built.
#ifndef TPUMESH_IO_WORKLOAD_H_
#define TPUMESH_IO_WORKLOAD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/matmul.h"
#include "mesh/cost_model.h"
#include "mesh/interconnect.h"

namespace tpumesh::pipeline {

// The default bound on a workload's layers (simulate --max-layers), and the
// most that flag allows: a layer's record and its report row take about
// 1 KB, so 100,000 layers stay near 100 MB.
inline constexpr int64_t kDefaultMaxWorkloadLayers = 100'000;
inline constexpr int64_t kMaxWorkloadLayers = 10'000'000;

struct WorkloadLayer {
  mesh::OpRecord record;  // record.module: the layer's name; record.repeat
  // A collective: what it is, over which mesh axis, bytes per device.
  std::optional<mesh::CollectiveKind> collective;
  std::string axis;
  int64_t bytes = 0;
};

// `origin` names the text in errors (the path); the format follows its
// extension (.csv or .json).
StatusOr<std::vector<WorkloadLayer>> ParseWorkload(std::string_view text, std::string_view origin,
                                                   kernels::Precision precision,
                                                   int64_t max_layers = kDefaultMaxWorkloadLayers);
StatusOr<std::vector<WorkloadLayer>> LoadWorkload(const std::string& path, kernels::Precision precision,
                                                  int64_t max_layers = kDefaultMaxWorkloadLayers);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_IO_WORKLOAD_H_
