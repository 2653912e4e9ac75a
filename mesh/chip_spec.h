// ChipSpec: a description of one accelerator chip, usable with no device
// (like PJRT's DeviceDescription). Hardware numbers live here and nowhere
// else: the cost model and the interconnect model read them from a ChipSpec.
//
// Contract: every figure is per chip unless its name says otherwise; the
// presets carry published figures whose sources are listed in docs/chips.md.
// A JSON file may describe a custom chip (same field names as ToJson()
// writes); LoadChipSpec validates it and names the first bad field.
#ifndef TPUMESH_MESH_CHIP_SPEC_H_
#define TPUMESH_MESH_CHIP_SPEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kernels/matmul_cost.h"

namespace tpumesh::mesh {

// Energy per operation in picojoules, for the cost model's estimates
// (mesh/cost_model.h: joules per op from its counts). The defaults are 7 nm
// figures; docs/cost-model.md ("Energy") gives each source and derivation.
// They are dynamic energies only: no leakage, idle or host power.
struct EnergySpec {
  double mac_pj = 0.59;             // an MXU multiply-accumulate, one pass: bf16 multiply 0.21 + f32 add 0.38
  double vector_flop_pj = 0.845;    // an f32 vector op: mean of f32 add 0.38 and multiply 1.31
  double transcendental_pj = 6.76;  // assumed 4 f32 multiply-adds (a degree-4 polynomial): 4 x 1.69
  double vmem_byte_pj = 2.19;       // on-chip SRAM: 1/20 of HBM's per access (350 / 20 pJ per 8 bytes)
  double hbm_byte_pj = 43.75;       // HBM2: 250-450 pJ per 64-bit access, 350 / 8 bytes
  double ici_byte_pj = 16.8;        // a SerDes link: transmitter 1.3 + receiver 0.8 pJ/bit, x 8
};

// How attention's scores are priced (--attention; docs/cost-model.md,
// "Attention"). kFlash: the fused kernel a TPU runs (jax's Pallas flash and
// splash attention): the scores stay in VMEM; HBM moves Q and O once, K and V
// once per block of queries when the keys span more than one block; the
// online softmax's rescaling is vector work. kStandard: XLA's plain lowering,
// the score matrix through HBM (Q K^T writes S, the softmax reads it and
// writes P, P V reads P).
enum class AttentionKernel { kFlash, kStandard };
std::string_view AttentionKernelName(AttentionKernel k);  // "flash", "standard"
StatusOr<AttentionKernel> ParseAttentionKernel(std::string_view name);

struct ChipSpec {
  std::string name;         // a preset's name (ChipPresetNames()) or a custom one
  std::string device_kind;  // what JAX reports as device_kind, e.g. "TPU v5 lite"
  int tensorcores_per_chip = 1;
  // JAX devices per chip: 1 on v4 (megacore) and v5e, 2 on v2/v3 where a
  // device is one TensorCore, 2 on TPU7x where a device is one chiplet.
  int devices_per_chip = 1;
  // Dies in the chip's package, each holding devices_per_chip /
  // chiplets_per_chip devices, its share of the TensorCores and its own HBM
  // (hbm_* / chiplets_per_chip). Devices of one chiplet exchange through its
  // HBM; the chiplets of a chip through the chiplet link, chips over the ICI.
  // Optional in a chip file (1, and chiplet_link_bandwidth 0: one die).
  int chiplets_per_chip = 1;
  double chiplet_link_bandwidth = 0;  // bytes/s between two chiplets, one direction; 0 iff one chiplet
  int mxus_per_tensorcore = 4;
  int mxu_rows = 128;
  int mxu_cols = 128;
  double clock_hz = 0;
  double peak_bf16_flops = 0;    // per chip, dense
  int64_t hbm_bytes = 0;         // per chip
  double hbm_bandwidth = 0;      // bytes/s per chip
  int64_t vmem_bytes = 0;        // per TensorCore
  // How matmuls sit on the MXUs (kernels/matmul_cost.h): a TPU's is weight
  // stationary; a chip file may say "ws", "os" or "is" (optional field).
  kernels::Dataflow dataflow = kernels::Dataflow::kWeightStationary;
  // How the program's attention runs: a pricing setting (--attention), not a
  // chip file field.
  AttentionKernel attention = AttentionKernel::kFlash;
  int ici_ports = 0;             // ICI links per chip
  double ici_link_bandwidth = 0; // bytes/s per link, one direction
  double ici_hop_latency_s = 0;  // per hop
  // An axis of the slice gets wraparound links when its size is a positive
  // multiple of this (v5e: 16, only full-pod axes; v4: 4). 0: never.
  int torus_wrap_size = 0;
  std::vector<int> default_topology;  // chips per axis, e.g. {2, 4}
  // Optional field "energy" in a chip file: an object with every field of
  // EnergySpec; absent, the 7 nm defaults.
  EnergySpec energy;

  // Derived figures.
  int mxus_per_chip() const { return tensorcores_per_chip * mxus_per_tensorcore; }
  double peak_bf16_flops_per_device() const { return peak_bf16_flops / devices_per_chip; }
  int64_t hbm_bytes_per_device() const { return hbm_bytes / devices_per_chip; }
  double hbm_bandwidth_per_device() const { return hbm_bandwidth / devices_per_chip; }
  // One chiplet's HBM bandwidth, shared by the devices on it.
  double hbm_bandwidth_per_chiplet() const { return hbm_bandwidth / chiplets_per_chip; }
  // MXU count x rows x cols x 2 flops x clock; equals peak_bf16_flops for the presets.
  double mxu_peak_flops() const {
    return 2.0 * mxus_per_chip() * mxu_rows * mxu_cols * clock_hz;
  }

  Status Validate() const;
  std::string ToJson() const;  // pretty-printed, field names as above
};

ChipSpec V5eChip();
ChipSpec V4Chip();
ChipSpec V2Chip();
ChipSpec V6eChip();    // Trillium
ChipSpec V5pChip();
ChipSpec Tpu7xChip();  // Ironwood: two chiplets, each a device
// The presets' names, in the order `devices` and --help list them:
// {"v5e", "v4", "v2", "v6e", "v5p", "tpu7x"}; and the same joined by ", ".
std::vector<std::string> ChipPresetNames();
std::string ChipPresetList();
// EnergySpec's fields as a chip file names them, in order (mac_pj, ...):
// read one with `spec.*field.second`.
std::vector<std::pair<const char*, double EnergySpec::*>> EnergyFields();

// A preset's name (ChipPresetNames()) or a path to a JSON file.
StatusOr<ChipSpec> LoadChipSpec(std::string_view name_or_path);

// Bounds of a chip file's fields that others use too: chips along one axis
// of a topology (a torus wrap, a default topology's axis), and picojoules per
// event for every energy figure (real ones are 0.01 to 100).
inline constexpr int kMaxChipsPerAxis = 1024;
inline constexpr double kMaxEnergyPj = 1e6;
StatusOr<ChipSpec> ChipSpecFromJson(std::string_view json_text, std::string_view origin);

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_CHIP_SPEC_H_
