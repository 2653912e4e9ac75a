#include "tools/device_flags.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "mesh/chip_spec.h"

namespace tpumesh::tools {
namespace {

// VMEM: 0 (not modelled) or 1 KiB to 1 TiB; below 1 KiB a size rounds to no
// bytes and would silently mean "not modelled".
constexpr double kMinVmemMib = 1.0 / 1024, kMaxVmemMib = 1 << 20;

}  // namespace

CLI::Validator RealNumber() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        errno = 0;
        char* end = nullptr;
        std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0') return "Value '" + value + "' is not a number";
        if (errno == ERANGE) return "Value " + value + " is outside a double's range";
        return "";
      },
      "NUMBER");
}

// A number within [lo, hi] (NaN and infinities refused too; CLI11's Range
// lets NaN through), for a flag whose omission means its default: a value
// given must be one the range names, never a sentinel.
CLI::Validator Within(double lo, double hi) {
  std::ostringstream range;
  range << lo << " to " << hi;
  const std::string text = range.str();
  return CLI::Validator(
      [lo, hi, text](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || !(v >= lo && v <= hi))
          return "Value " + value + " is not from " + text;
        return "";
      },
      "FROM " + text);
}

void AddDeviceFlags(CLI::App* cmd, DeviceFlags* f, unsigned which) {
  if (which & kMeshFlags) {
    cmd->add_option("--chip", f->mesh.chip, "Chip: " + mesh::ChipPresetList() + " or a chip JSON file (docs/chips.md)")
        ->capture_default_str()
        ->group("Devices");
    cmd->add_option("--dataflow", f->mesh.dataflow,
                    "How matmuls sit on the MXUs: ws (weight stationary, a TPU's), os (output stationary) or is "
                    "(input stationary), as SCALE-Sim defines them (default: the chip file's, else ws; "
                    "docs/cost-model.md)")
        ->group("Devices");
    cmd->add_option("--vmem-mib", f->mesh.vmem_mib,
                    "VMEM per TensorCore in MiB, 1/1024 (1 KiB) to 1048576, or 0 for none modelled (no tiling "
                    "traffic), overriding the chip's: operands are tiled into it and HBM traffic follows "
                    "(docs/cost-model.md)")
        ->check(CLI::Validator(
            [](std::string& value) -> std::string {
              char* end = nullptr;
              const double v = std::strtod(value.c_str(), &end);
              if (value.empty() || *end != '\0' || !(v == 0 || (v >= kMinVmemMib && v <= kMaxVmemMib)))
                return "Value " + value + " is neither 0 (none modelled) nor from 1/1024 (1 KiB) to 1048576 MiB";
              return "";
            },
            "0 OR 1/1024 TO 1048576"))
        ->group("Devices");
    cmd->add_option("--attention", f->mesh.attention,
                    "How attention's scores are priced: flash (the fused kernel a TPU runs, jax's Pallas flash / "
                    "splash attention: scores in VMEM, K and V re-read per block of queries) or standard (the score "
                    "matrix written to and read from HBM); a StableHLO program's softmax between two dot_generals "
                    "is priced the same way (default: flash; docs/cost-model.md, \"Attention\")")
        ->check(CLI::IsMember({"flash", "standard"}))
        ->group("Devices");
    cmd->add_option("--devices", f->mesh.devices,
                    "Emulated devices, 1 to 1024 (default: the --topology count, else the --mesh product, else 8; "
                    "eval: 1)")
        ->check(Within(1, 1024))
        ->group("Devices");
    cmd->add_option("--mesh", f->mesh.axes,
                    "Mesh axes, e.g. data=4,model=2: images split over data, each model split over model "
                    "(default data=DEVICES); simulate also data=D,fsdp=F,model=M: images over data x fsdp, "
                    "weights sharded over fsdp and all_gathered before use (docs/sharding.md)")
        ->group("Devices");
    cmd->add_option("--topology", f->mesh.topology, "Chips per axis, e.g. 2x4; must hold the devices (default: the chip's slice for the device count)")
        ->group("Devices");
    cmd->add_option("--model-axis-along", f->mesh.model_axis_along,
                    "Physical chip axis (x, y or z) the mesh's last axis (model) runs along first")
        ->capture_default_str()
        ->group("Devices");
    cmd->add_option("--overlap", f->mesh.overlap,
                    "Collectives in the cost model: on, overlapped with compute as XLA runs them on a TPU (async "
                    "start/done; only the op reading a result waits for it), or off, serial; the report gives both "
                    "times and the ICI seconds hidden (docs/cost-model.md)")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str()
        ->group("Devices");
  }
  if (which & kThreadFlags) {
    cmd->add_option("--threads-per-device", f->mesh.threads_per_device,
                    "Host threads per device arena, 0 to 1024 (0: host cores / devices)")
        ->check(Within(0, 1024))
        ->capture_default_str()
        ->group("Devices");
  }
  if (which & kOutputFlags) {
    cmd->add_option("--report", f->out.report,
                    "Write the chip's view as JSON: summary (modelled time, HBM, ICI bytes and seconds, estimated "
                    "energy and average power), per device per op type, per layer and per collective kind, and the "
                    "sharding plan (docs/cost-model.md)")
        ->group("Devices");
    cmd->add_option("--trace", f->out.trace, "Write a Chrome trace (Perfetto): MXU, vector, HBM, ICI tracks per device")
        ->group("Devices");
    cmd->add_option("--report-csv", f->out.csv,
                    "Write the per-layer figures as CSV, a row per device and layer: FLOPs, MXU cycles, "
                    "utilisation, HBM bytes, modelled seconds, what bounds it (docs/cost-model.md)")
        ->group("Devices");
  }
}

}  // namespace tpumesh::tools
