#include "report/devices_text.h"

#include <cstdio>
#include <sstream>
#include <vector>

#include "kernels/matmul.h"
#include "mesh/chip_spec.h"
#include "nlohmann/json.hpp"

namespace tpumesh::report {
namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// What runs the devices' arithmetic on this host: the compute path, the
// Highway target, kAuto's matmul provider per precision and libblis's
// configuration (kernels/matmul.h).
struct HostKernels {
  std::string path, highway, provider_default, provider_highest;
  kernels::BlisConfig blis;
};
HostKernels GetHostKernels() {
  HostKernels h;
  h.path = std::string(kernels::CpuPathName(kernels::ActiveCpuPath()));
  h.highway = std::string(kernels::HighwayTargetName());
  auto provider = [](kernels::Precision p) {
    const StatusOr<kernels::Provider> r = kernels::ResolveProvider(kernels::Provider::kAuto, p);
    return r.ok() ? std::string(kernels::ProviderName(*r)) : r.status().ToString();
  };
  h.provider_default = provider(kernels::Precision::kDefault);
  h.provider_highest = provider(kernels::Precision::kHighest);
  h.blis = kernels::ProcessBlisConfig();
  return h;
}

}  // namespace

std::string DevicesJson(const mesh::Mesh& m) {
  const mesh::ChipSpec& chip = m.chip();
  const mesh::Topology& topo = m.topology();
  nlohmann::ordered_json j;
  j["chip"] = nlohmann::ordered_json::parse(chip.ToJson());
  nlohmann::ordered_json t;
  t["chip_dims"] = topo.chip_dims();
  std::vector<bool> wraps;
  for (size_t a = 0; a < topo.chip_dims().size(); ++a) wraps.push_back(topo.wraps(a));
  t["wraparound"] = wraps;
  t["chips"] = topo.num_chips();
  t["devices_per_chip"] = topo.devices_per_chip();
  j["topology"] = t;
  nlohmann::ordered_json axes_json = nlohmann::ordered_json::array();
  for (const auto& a : m.axes()) axes_json.push_back({{"name", a.name}, {"size", a.size}});
  j["mesh"] = {{"axes", axes_json}};
  nlohmann::ordered_json devs = nlohmann::ordered_json::array();
  for (int d = 0; d < m.num_devices(); ++d) {
    const mesh::Device& dev = m.device(d);
    const auto& c = dev.coords();
    devs.push_back({{"id", d},
                    {"coords", {c.chip[0], c.chip[1], c.chip[2]}},
                    {"core_on_chip", c.core_on_chip},
                    {"kind", dev.kind()},
                    {"hbm_bytes", dev.hbm_capacity()},
                    {"mesh_indices", m.AxisIndices(d)},
                    {"threads", dev.threads()}});
  }
  j["devices"] = devs;
  j["host_cores"] = m.host_cores();
  const HostKernels h = GetHostKernels();
  j["host_kernels"] = {{"path", h.path},
                       {"highway_target", h.highway},
                       {"matmul_provider_default", h.provider_default},
                       {"matmul_provider_highest", h.provider_highest},
                       {"blis_configuration", h.blis.name},
                       {"blis_optimized", h.blis.optimized},
                       {"blis_note", h.blis.note}};
  return j.dump(2) + "\n";
}

std::string DevicesText(const mesh::Mesh& m) {
  const mesh::ChipSpec& chip = m.chip();
  const mesh::Topology& topo = m.topology();
  std::ostringstream out;
  std::string wrap = "no wraparound";
  for (size_t a = 0; a < topo.chip_dims().size(); ++a)
    if (topo.wraps(a)) wrap = "wraparound on axis " + std::to_string(a);
  out << m.num_devices() << " devices";
  if (topo.devices_per_chip() > 1) out << " on " << topo.num_chips() << " chips";
  out << ": " << m.device(0).kind() << ", chip " << chip.name
      << ", topology " << topo.DimsString() << " (" << wrap << ")\n";
  for (int d = 0; d < m.num_devices(); ++d) {
    const mesh::Device& dev = m.device(d);
    out << "  " << dev.ToString() << "  HBM " << mesh::FormatBytes(dev.hbm_capacity())
        << "  mesh " << mesh::MeshAxesToString(m.axes()) << " index (";
    auto idx = m.AxisIndices(d);
    for (size_t i = 0; i < idx.size(); ++i) out << (i ? "," : "") << idx[i];
    out << ")\n";
  }
  out << "Mesh: " << mesh::MeshAxesToString(m.axes())
      << " (row-major over device ids, last axis fastest)\n";
  out << "Chip " << chip.name << ": " << chip.tensorcores_per_chip << " TensorCore(s) x "
      << chip.mxus_per_tensorcore << " MXU " << chip.mxu_rows << "x" << chip.mxu_cols << " "
      << kernels::DataflowName(chip.dataflow) << " @ " << Fixed(chip.clock_hz / 1e9, 2) << " GHz, "
      << Fixed(chip.peak_bf16_flops / 1e12, 0) << " TFLOP/s bf16 per chip; HBM "
      << mesh::FormatBytes(chip.hbm_bytes) << " @ " << Fixed(chip.hbm_bandwidth / 1e9, 0)
      << " GB/s; VMEM " << mesh::FormatBytes(chip.vmem_bytes) << "; ICI " << chip.ici_ports
      << " links x " << Fixed(chip.ici_link_bandwidth / 1e9, 1) << " GB/s per direction, "
      << Fixed(chip.ici_hop_latency_s * 1e6, 1) << " us/hop";
  if (chip.chiplets_per_chip > 1)
    out << "; " << chip.chiplets_per_chip << " chiplets per chip (" << chip.devices_per_chip / chip.chiplets_per_chip
        << " device(s) each) joined at " << Fixed(chip.chiplet_link_bandwidth / 1e9, 1) << " GB/s per direction";
  out << "\n";
  out << "Host: " << m.host_cores() << " cores, " << m.device(0).threads()
      << " thread(s) per device arena (the chip figures are the emulated chip's, "
         "not this host's)\n";
  const HostKernels h = GetHostKernels();
  out << "Host kernels: path " << h.path << ", Highway " << h.highway << "; matmul provider "
      << h.provider_default << " at default/high, " << h.provider_highest << " at highest; BLIS "
      << h.blis.name << " (" << h.blis.note << "), only for --provider blis\n";
  return out.str();
}

}  // namespace tpumesh::report
