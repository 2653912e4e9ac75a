#include "mesh/chip_spec.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "base/input_file.h"
#include "base/json_text.h"
#include "base/printable.h"
#include "nlohmann/json.hpp"

namespace tpumesh::mesh {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;

}  // namespace

std::string_view AttentionKernelName(AttentionKernel k) {
  return k == AttentionKernel::kStandard ? "standard" : "flash";
}

StatusOr<AttentionKernel> ParseAttentionKernel(std::string_view name) {
  for (AttentionKernel k : {AttentionKernel::kFlash, AttentionKernel::kStandard})
    if (name == AttentionKernelName(k)) return k;
  return InvalidArgumentError("attention '" + std::string(name) +
                              "': flash (the fused kernel, scores in VMEM) or standard (scores through HBM)");
}

std::vector<std::pair<const char*, double EnergySpec::*>> EnergyFields() {
  return {{"mac_pj", &EnergySpec::mac_pj},
          {"vector_flop_pj", &EnergySpec::vector_flop_pj},
          {"transcendental_pj", &EnergySpec::transcendental_pj},
          {"vmem_byte_pj", &EnergySpec::vmem_byte_pj},
          {"hbm_byte_pj", &EnergySpec::hbm_byte_pj},
          {"ici_byte_pj", &EnergySpec::ici_byte_pj}};
}

// Figures and their sources: docs/chips.md (one row per field). Tags below:
// [GC] the Google Cloud TPU page of that version, [SB] "How to Scale Your
// Model", ch. "How to Think About TPUs", [JAX] jax/_src/pallas/mosaic/tpu_info.py,
// [V4] Jouppi et al., ISCA 2023, [HC20] the Hot Chips 2020 TPUv2/v3 talk (Norrie
// et al., IEEE Micro 2021) as live-blogged by AnandTech.
// Per-link ICI bandwidth is one direction; for v5e and v4 it equals the [GC]
// page's "all-reduce bandwidth per Pod" / chips / ICI ports.
ChipSpec V5eChip() {
  ChipSpec c;
  c.name = "v5e";
  c.device_kind = "TPU v5 lite";  // [JAX]
  c.tensorcores_per_chip = 1;     // [GC] "Each v5e chip contains one TensorCore"
  c.devices_per_chip = 1;
  c.mxus_per_tensorcore = 4;      // [GC], [JAX] num_mxus
  c.mxu_rows = c.mxu_cols = 128;  // [SB], [JAX]
  c.clock_hz = 1.5e9;             // [SB] "1.5GHz"; 197e12 / (2*4*128*128) = 1.503 GHz
  c.peak_bf16_flops = 197e12;     // [GC], [SB], [JAX]
  c.hbm_bytes = 16 * kGiB;        // [GC] "16 GB"; [SB] 16 GiB; [JAX] 17.2e9 bytes
  c.hbm_bandwidth = 819e9;        // [GC]
  c.vmem_bytes = 128 * kMiB;      // [SB], [JAX]
  c.ici_ports = 4;                // [GC] "ICI ports per chip: 4"
  // [GC]: 400 GB/s bidirectional per chip = 4 ports x 2 directions x 50 GB/s;
  // 51.2 TB/s all-reduce / 256 chips / 4 ports = 50 GB/s. [SB] gives 4.5e10.
  c.ici_link_bandwidth = 50e9;
  c.ici_hop_latency_s = 1e-6;     // [SB] worked problem: "about 1us" per hop
  c.torus_wrap_size = 16;         // [SB] no wraparound on axes of fewer than 16
  c.default_topology = {2, 4};    // [GC] v5litepod-8: 2x4
  return c;
}

ChipSpec V4Chip() {
  ChipSpec c;
  c.name = "v4";
  c.device_kind = "TPU v4";       // [JAX]
  c.tensorcores_per_chip = 2;     // [GC]
  c.devices_per_chip = 1;         // megacore: both TensorCores form one JAX device [SB]
  c.mxus_per_tensorcore = 4;      // [GC], [JAX] num_mxus
  c.mxu_rows = c.mxu_cols = 128;  // [SB], [JAX]
  c.clock_hz = 1.05e9;            // [V4]; 275e12 / (2*8*128*128) = 1.049 GHz
  c.peak_bf16_flops = 275e12;     // [GC], [SB], [JAX]
  c.hbm_bytes = 32 * kGiB;        // [GC] "32 GiB"
  c.hbm_bandwidth = 1200e9;       // [GC] "1200 GBps"; [SB], [JAX] 1.23e12
  c.vmem_bytes = 16 * kMiB;       // [JAX] "16 MiB per core" (plus 128 MiB CMEM per chip, not modelled)
  c.ici_ports = 6;                // [SB] 6 nearest neighbours, 3-D torus
  // [SB] 4.5e10 one way; [GC] 1.1 PB/s all-reduce / 4096 chips / 6 ports = 44.8 GB/s.
  c.ici_link_bandwidth = 45e9;
  c.ici_hop_latency_s = 1e-6;     // as v5e; no v4 figure published
  c.torus_wrap_size = 4;          // [GC], [SB] wraparound on multiples of the 4x4x4 cube
  c.default_topology = {2, 2, 1}; // [SB] v4-8 = 4 chips, 2x2x1
  return c;
}

ChipSpec V2Chip() {
  ChipSpec c;
  c.name = "v2";
  c.device_kind = "TPU v2";       // [JAX]
  c.tensorcores_per_chip = 2;     // [JAX], [SB]
  c.devices_per_chip = 2;         // a v2-8 is 4 chips = 8 cores = 8 JAX devices [SB]
  c.mxus_per_tensorcore = 1;      // [JAX] num_mxus = 1; [HC20] v3 doubled them
  c.mxu_rows = c.mxu_cols = 128;  // [HC20] "128x128 systolic array"
  c.clock_hz = 700e6;             // [HC20] "Clock 700 to 940 MHz" (v2 to v3)
  c.peak_bf16_flops = 46e12;      // [JAX] 4.6e13 per chip; Cloud docs round to 45
  c.hbm_bytes = 16 * kGiB;        // 2 x 8 GiB HBM stacks; [JAX] 16e9 bytes per chip
  c.hbm_bandwidth = 700e9;        // [HC20] "700 GB/s per chip"; [JAX] 7.16e11
  c.vmem_bytes = 16 * kMiB;       // [JAX] "16 MiB per core"
  c.ici_ports = 4;                // [SB] 4 nearest neighbours, 2-D torus
  // 496 Gbit/s per link per direction (TPUv2 papers, as recalled; not confirmed
  // from a stored source). Same convention as v3's 656 Gbit/s, which matches
  // Cloud's v3 340 TB/s all-reduce / 1024 chips / 4 ports = 83 GB/s.
  c.ici_link_bandwidth = 62e9;
  c.ici_hop_latency_s = 1e-6;     // assumed, as v5e
  c.torus_wrap_size = 16;         // the v2 pod is a 16x16 2-D torus; assumed full-pod axes only
  c.default_topology = {2, 2};    // v2-8: 4 chips
  return c;
}

// v6e, v5p, TPU7x: [GC] is the TPU7x page's table "v5p | v6e | TPU7x" and
// each chip's own page. None of the three clocks is published: each is the
// MXU pass rate that gives the published peak from the published MXU count
// (docs/chips.md, "Clocks not published").
ChipSpec V6eChip() {
  ChipSpec c;
  c.name = "v6e";
  c.device_kind = "TPU v6 lite";  // [JAX] ("TPU v6e" too)
  c.tensorcores_per_chip = 1;     // [GC] "Each v6e chip contains one TensorCore"
  c.devices_per_chip = 1;
  c.mxus_per_tensorcore = 2;      // [GC] "two 256x256 matrix-multiply units"; [JAX] num_mxus
  c.mxu_rows = c.mxu_cols = 256;  // [GC], [SB], [JAX]
  c.clock_hz = 3.5e9;             // derived: 918e12 / (2*2*256*256) = 3.502 GHz
  c.peak_bf16_flops = 918e12;     // [GC]; [SB], [JAX] 9.20e14
  c.hbm_bytes = 32 * kGiB;        // [GC] "32 GB"; [JAX] 34.4e9 bytes = 32 GiB
  c.hbm_bandwidth = 1638e9;       // [GC] "1638 GBps"; [SB] 1.6e12, [JAX] 1.64e12
  c.vmem_bytes = 128 * kMiB;      // [JAX]
  c.ici_ports = 4;                // [GC] "ICI ports per chip: 4", 2-D torus
  // [GC] 800 GB/s bidirectional per chip = 4 ports x 2 x 100 GB/s; 102.4 TB/s
  // all-reduce / 256 chips / 4 ports = 100 GB/s; [SB] 1e11 one way.
  c.ici_link_bandwidth = 100e9;
  c.ici_hop_latency_s = 1e-6;     // assumed, as v5e
  c.torus_wrap_size = 16;         // [SB] a 16x16 pod; no wraparound on axes under 16
  c.default_topology = {2, 4};    // [GC] v6e-8: 8 chips per host, 2x4
  return c;
}

ChipSpec V5pChip() {
  ChipSpec c;
  c.name = "v5p";
  c.device_kind = "TPU v5";       // [JAX] ("TPU v5p" too)
  c.tensorcores_per_chip = 2;     // [GC]
  c.devices_per_chip = 1;         // megacore, as v4 [SB], [JAX] supports_megacore
  c.mxus_per_tensorcore = 4;      // [GC] "Each TensorCore has four ... (MXU)"; [JAX]
  c.mxu_rows = c.mxu_cols = 128;  // [SB], [JAX]
  c.clock_hz = 1.75e9;            // derived: 459e12 / (2*8*128*128) = 1.751 GHz
  c.peak_bf16_flops = 459e12;     // [GC], [SB], [JAX]
  c.hbm_bytes = 95 * kGiB;        // [GC] "95 GiB"; [JAX] 103e9 bytes = 95.9 GiB
  c.hbm_bandwidth = 2765e9;       // [GC] "2765 GBps"; [SB] 2.8e12, [JAX] 2.46e12
  c.vmem_bytes = 64 * kMiB;       // [JAX] "64 MiB per core"
  c.ici_ports = 6;                // [SB] 6 nearest neighbours, 3-D torus
  // [GC] 1200 GB/s bidirectional per chip = 6 ports x 2 x 100 GB/s; [SB] 1e11 one way.
  c.ici_link_bandwidth = 100e9;
  c.ici_hop_latency_s = 1e-6;     // assumed, as v5e
  c.torus_wrap_size = 4;          // [SB] wraparound on whole 4x4x4 cubes, as v4
  c.default_topology = {2, 2, 1}; // [GC] v5p-8: 2x2x1, 4 chips, 1 host
  return c;
}

ChipSpec Tpu7xChip() {
  ChipSpec c;
  c.name = "tpu7x";
  c.device_kind = "TPU7x";        // [JAX]
  c.tensorcores_per_chip = 2;     // [GC] "two TensorCores and four SparseCores"
  c.devices_per_chip = 2;         // [GC] "Dual-chiplet architecture": two TPU devices per chip
  c.chiplets_per_chip = 2;        // [GC] one TensorCore per chiplet
  c.mxus_per_tensorcore = 2;      // [JAX] num_mxus
  c.mxu_rows = c.mxu_cols = 256;  // [JAX] mxu_column_size
  c.clock_hz = 4.4e9;             // derived: 2307e12 / (2*4*256*256) = 4.400 GHz
  c.peak_bf16_flops = 2307e12;    // [GC]; [JAX] 2.31e15
  c.hbm_bytes = 192 * kGiB;       // [GC] "192 GiB"; [JAX] 206e9 bytes = 191.9 GiB
  c.hbm_bandwidth = 7380e9;       // [GC] "7380 GB/s"; [JAX] 7.40e12
  c.vmem_bytes = 64 * kMiB;       // [JAX] "64 MiB per core"
  c.ici_ports = 6;                // assumed: a 3-D torus of 4x4x4 cubes [GC] has 6 neighbours
  // [GC] 1200 GB/s bidirectional per chip / 6 ports / 2 directions.
  c.ici_link_bandwidth = 100e9;
  // [GC] the die-to-die link is about 6x an ICI link (docs/chips.md: read
  // as 6 x 100 GB/s, one direction).
  c.chiplet_link_bandwidth = 600e9;
  c.ici_hop_latency_s = 1e-6;     // assumed, as v5e
  c.torus_wrap_size = 4;          // assumed as v5p: optical wraparound on whole 4x4x4 cubes
  c.default_topology = {2, 2, 1}; // v7-8: 4 chips = 8 devices, 1 host [GC]
  return c;
}

namespace {

// The one table of presets: LoadChipSpec, ChipPresetNames and the error
// naming them all read it.
struct Preset {
  const char* name;
  ChipSpec (*make)();
};
constexpr Preset kPresets[] = {{"v5e", V5eChip}, {"v4", V4Chip},   {"v2", V2Chip},
                               {"v6e", V6eChip}, {"v5p", V5pChip}, {"tpu7x", Tpu7xChip}};

}  // namespace

std::vector<std::string> ChipPresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

std::string ChipPresetList() {
  std::string list;
  for (const Preset& p : kPresets) list += (list.empty() ? "" : ", ") + std::string(p.name);
  return list;
}

Status ChipSpec::Validate() const {
  auto bad = [&](std::string_view field, std::string_view why) {
    return InvalidArgumentError("chip " + Quoted(name) + ": field '" + std::string(field) + "' " + std::string(why));
  };
  if (name.empty()) return InvalidArgumentError("chip: field 'name' is empty");
  // Every number's range (docs/chips.md): wide enough for any chip of the
  // field (a 1x1 MXU too, for studies), narrow enough that no product the
  // cost model forms overflows or reaches infinity.
  struct Range {
    const char* field;
    double value, lo, hi;
    bool lo_open;  // > lo rather than >= lo
  };
  const Range ranges[] = {
      {"tensorcores_per_chip", double(tensorcores_per_chip), 1, 16, false},
      {"devices_per_chip", double(devices_per_chip), 1, 16, false},
      {"chiplets_per_chip", double(chiplets_per_chip), 1, 16, false},
      {"mxus_per_tensorcore", double(mxus_per_tensorcore), 1, 64, false},
      {"mxu_rows", double(mxu_rows), 1, 4096, false},
      {"mxu_cols", double(mxu_cols), 1, 4096, false},
      {"clock_hz", clock_hz, 0, 1e11, true},
      {"peak_bf16_flops", peak_bf16_flops, 0, 1e18, true},
      {"hbm_bytes", double(hbm_bytes), 1, 1125899906842624.0, false},
      {"hbm_bandwidth", hbm_bandwidth, 0, 1e16, true},
      {"vmem_bytes", double(vmem_bytes), 0, 1099511627776.0, false},
      {"ici_ports", double(ici_ports), 0, 64, false},
      {"ici_link_bandwidth", ici_link_bandwidth, 0, 1e15, true},
      {"chiplet_link_bandwidth", chiplet_link_bandwidth, 0, 1e15, false},
      {"ici_hop_latency_s", ici_hop_latency_s, 0, 1, false},
      {"torus_wrap_size", double(torus_wrap_size), 0, kMaxChipsPerAxis, false},
  };
  auto text = [](double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  };
  for (const Range& r : ranges)
    if (!(r.lo_open ? r.value > r.lo : r.value >= r.lo) || !(r.value <= r.hi))
      return bad(r.field, "is " + text(r.value) + ", must be " + (r.lo_open ? "> " : "from ") + text(r.lo) +
                              (r.lo_open ? " and at most " : " to ") + text(r.hi));
  if (tensorcores_per_chip % devices_per_chip != 0) return bad("devices_per_chip", "must divide tensorcores_per_chip");
  if (devices_per_chip % chiplets_per_chip != 0) return bad("chiplets_per_chip", "must divide devices_per_chip");
  if (chiplets_per_chip > 1 && chiplet_link_bandwidth == 0)
    return bad("chiplet_link_bandwidth", "is 0, must be > 0 when chiplets_per_chip is above 1");
  if (chiplets_per_chip == 1 && chiplet_link_bandwidth != 0)
    return bad("chiplet_link_bandwidth", "is " + text(chiplet_link_bandwidth) +
                                             ", must be 0 when chiplets_per_chip is 1 (no link to price)");
  if (default_topology.empty() || default_topology.size() > 3)
    return bad("default_topology", "must have 1 to 3 axes");
  for (int d : default_topology)
    if (d < 1 || d > kMaxChipsPerAxis)
      return bad("default_topology", "axes must be from 1 to " + std::to_string(kMaxChipsPerAxis));
  for (const auto& [field, member] : EnergyFields())
    if (!(energy.*member >= 0) || !(energy.*member <= kMaxEnergyPj))
      return bad(std::string("energy.") + field, "is " + text(energy.*member) + ", must be from 0 to " +
                                                     text(kMaxEnergyPj) + " pJ");
  return OkStatus();
}

std::string ChipSpec::ToJson() const {
  nlohmann::ordered_json j;
  j["name"] = name;
  j["device_kind"] = device_kind;
  j["tensorcores_per_chip"] = tensorcores_per_chip;
  j["devices_per_chip"] = devices_per_chip;
  j["chiplets_per_chip"] = chiplets_per_chip;
  j["chiplet_link_bandwidth"] = chiplet_link_bandwidth;
  j["mxus_per_tensorcore"] = mxus_per_tensorcore;
  j["mxu_rows"] = mxu_rows;
  j["mxu_cols"] = mxu_cols;
  j["clock_hz"] = clock_hz;
  j["peak_bf16_flops"] = peak_bf16_flops;
  j["hbm_bytes"] = hbm_bytes;
  j["hbm_bandwidth"] = hbm_bandwidth;
  j["vmem_bytes"] = vmem_bytes;
  j["dataflow"] = std::string(kernels::DataflowName(dataflow));
  j["ici_ports"] = ici_ports;
  j["ici_link_bandwidth"] = ici_link_bandwidth;
  j["ici_hop_latency_s"] = ici_hop_latency_s;
  j["torus_wrap_size"] = torus_wrap_size;
  j["default_topology"] = default_topology;
  for (const auto& [field, member] : EnergyFields()) j["energy"][field] = energy.*member;
  return j.dump(2);
}

StatusOr<ChipSpec> ChipSpecFromJson(std::string_view json_text,
                                    std::string_view origin) {
  const std::string where(origin);
  TPUMESH_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJsonFile<nlohmann::json>(json_text, where));
  if (!j.is_object())
    return InvalidArgumentError(where + ": a chip file must hold a JSON object");

  // Unknown keys are an error: a typo must not silently fall back to a default.
  static const char* const kKnown[] = {
      "name", "device_kind", "tensorcores_per_chip", "devices_per_chip",
      "mxus_per_tensorcore", "mxu_rows", "mxu_cols", "clock_hz",
      "peak_bf16_flops", "hbm_bytes", "hbm_bandwidth", "vmem_bytes",
      "ici_ports", "ici_link_bandwidth", "ici_hop_latency_s",
      "torus_wrap_size", "default_topology"};
  static const char* const kOptional[] = {"dataflow", "energy", "chiplets_per_chip", "chiplet_link_bandwidth"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKnown) known |= (key == k);
    for (const char* k : kOptional) known |= (key == k);
    if (!known) return InvalidArgumentError(where + ": unknown field " + Quoted(key));
  }
  for (const char* k : kKnown) {
    if (!j.contains(k)) return InvalidArgumentError(where + ": missing field '" + std::string(k) + "'");
  }

  ChipSpec c;
  auto get_string = [&](const char* key, std::string* out) -> Status {
    if (!j[key].is_string()) return InvalidArgumentError(where + ": field '" + key + "' must be a string");
    *out = j[key].get<std::string>();
    return OkStatus();
  };
  auto get_int = [&](const char* key, auto* out) -> Status {
    const auto& v = j[key];
    if (!v.is_number()) return InvalidArgumentError(where + ": field '" + key + "' must be a number");
    using T = std::remove_reference_t<decltype(*out)>;
    const double d = v.get<double>();
    if (d != std::floor(d)) return InvalidArgumentError(where + ": field '" + key + "' must be an integer");
    // The type's range, and for sizes and counts a sane one: 2^50 (1 PiB).
    constexpr double kMax = std::min(static_cast<double>(std::numeric_limits<T>::max()), 1125899906842624.0);
    if (!(std::fabs(d) <= kMax))
      return InvalidArgumentError(where + ": field '" + key + "' is " + DescribeJson(v) + ", out of range (at most " +
                                  std::to_string(static_cast<int64_t>(kMax)) + ")");
    *out = static_cast<T>(d);
    return OkStatus();
  };
  auto get_double = [&](const char* key, double* out) -> Status {
    if (!j[key].is_number()) return InvalidArgumentError(where + ": field '" + key + "' must be a number");
    *out = j[key].get<double>();
    return OkStatus();
  };
  TPUMESH_RETURN_IF_ERROR(get_string("name", &c.name));
  TPUMESH_RETURN_IF_ERROR(get_string("device_kind", &c.device_kind));
  TPUMESH_RETURN_IF_ERROR(get_int("tensorcores_per_chip", &c.tensorcores_per_chip));
  TPUMESH_RETURN_IF_ERROR(get_int("devices_per_chip", &c.devices_per_chip));
  TPUMESH_RETURN_IF_ERROR(get_int("mxus_per_tensorcore", &c.mxus_per_tensorcore));
  TPUMESH_RETURN_IF_ERROR(get_int("mxu_rows", &c.mxu_rows));
  TPUMESH_RETURN_IF_ERROR(get_int("mxu_cols", &c.mxu_cols));
  TPUMESH_RETURN_IF_ERROR(get_double("clock_hz", &c.clock_hz));
  TPUMESH_RETURN_IF_ERROR(get_double("peak_bf16_flops", &c.peak_bf16_flops));
  TPUMESH_RETURN_IF_ERROR(get_int("hbm_bytes", &c.hbm_bytes));
  TPUMESH_RETURN_IF_ERROR(get_double("hbm_bandwidth", &c.hbm_bandwidth));
  TPUMESH_RETURN_IF_ERROR(get_int("vmem_bytes", &c.vmem_bytes));
  TPUMESH_RETURN_IF_ERROR(get_int("ici_ports", &c.ici_ports));
  TPUMESH_RETURN_IF_ERROR(get_double("ici_link_bandwidth", &c.ici_link_bandwidth));
  TPUMESH_RETURN_IF_ERROR(get_double("ici_hop_latency_s", &c.ici_hop_latency_s));
  TPUMESH_RETURN_IF_ERROR(get_int("torus_wrap_size", &c.torus_wrap_size));
  if (j.contains("chiplets_per_chip")) TPUMESH_RETURN_IF_ERROR(get_int("chiplets_per_chip", &c.chiplets_per_chip));
  if (j.contains("chiplet_link_bandwidth"))
    TPUMESH_RETURN_IF_ERROR(get_double("chiplet_link_bandwidth", &c.chiplet_link_bandwidth));
  if (j.contains("dataflow")) {
    std::string name;
    TPUMESH_RETURN_IF_ERROR(get_string("dataflow", &name));
    auto d = kernels::ParseDataflow(name);
    if (!d.ok()) return InvalidArgumentError(where + ": field " + std::string(d.status().message()));
    c.dataflow = *d;
  }
  if (j.contains("energy")) {
    const auto& e = j["energy"];
    if (!e.is_object()) return InvalidArgumentError(where + ": field 'energy' must be an object");
    const auto fields = EnergyFields();
    for (const auto& [key, value] : e.items()) {
      bool known = false;
      for (const auto& f : fields) known |= key == f.first;
      if (!known) return InvalidArgumentError(where + ": unknown field " + Quoted("energy." + key));
    }
    for (const auto& [key, member] : fields) {
      if (!e.contains(key)) return InvalidArgumentError(where + ": missing field 'energy." + key + "'");
      if (!e[key].is_number())
        return InvalidArgumentError(where + ": field 'energy." + key + "' must be a number");
      c.energy.*member = e[key].get<double>();
    }
  }
  const auto& topo = j["default_topology"];
  if (!topo.is_array()) return InvalidArgumentError(where + ": field 'default_topology' must be an array of integers");
  for (const auto& d : topo) {
    if (!d.is_number_integer() || d.get<double>() < 1 || d.get<double>() > kMaxChipsPerAxis)
      return InvalidArgumentError(where + ": field 'default_topology' holds " + DescribeJson(d) +
                                  ": each axis must be an integer from 1 to " + std::to_string(kMaxChipsPerAxis));
    c.default_topology.push_back(d.get<int>());
  }
  Status s = c.Validate();
  if (!s.ok()) return s.WithContext(where);
  return c;
}

StatusOr<ChipSpec> LoadChipSpec(std::string_view name_or_path) {
  for (const Preset& p : kPresets)
    if (name_or_path == p.name) return p.make();
  const std::string path(name_or_path);
  auto text = ReadInputFile(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound)
      return NotFoundError("chip '" + path + "': neither a preset (" + ChipPresetList() + ") nor a readable JSON file");
    return text.status().WithContext("chip");
  }
  std::stringstream ss;
  ss << *text;
  return ChipSpecFromJson(ss.str(), path);
}

}  // namespace tpumesh::mesh
