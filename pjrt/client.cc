#include "pjrt/client.h"

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "mesh/topology.h"

namespace tpumesh::pjrt {
namespace {

// An option's value as text: a string, or an int64 in decimal.
StatusOr<std::string> OptionText(const PJRT_NamedValue& v) {
  std::string_view name(v.name, v.name_size);
  switch (v.type) {
    case PJRT_NamedValue_kString:
      return std::string(v.string_value, v.value_size);
    case PJRT_NamedValue_kInt64:
      return std::to_string(v.int64_value);
    default:
      return InvalidArgumentError("tpumesh: PJRT client option '" + std::string(name) +
                                  "' must be a string or an integer");
  }
}

StatusOr<int> ParseCount(std::string_view what, const std::string& text) {
  char* end = nullptr;
  long n = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || n < 1 || n > mesh::kMaxDevices)
    return InvalidArgumentError(std::string(what) + " must be a device count from 1 to " +
                                std::to_string(mesh::kMaxDevices) + ", got '" + text + "'");
  return static_cast<int>(n);
}

}  // namespace

StatusOr<mesh::MeshSpec> MeshSpecFrom(std::span<const PJRT_NamedValue> options) {
  mesh::MeshSpec spec;
  if (const char* chip = std::getenv("TPUMESH_PJRT_CHIP"); chip && *chip) spec.chip = chip;
  if (const char* topology = std::getenv("TPUMESH_PJRT_TOPOLOGY"); topology && *topology) spec.topology = topology;
  if (const char* devices = std::getenv("TPUMESH_PJRT_DEVICES"); devices && *devices) {
    TPUMESH_ASSIGN_OR_RETURN(spec.devices, ParseCount("TPUMESH_PJRT_DEVICES", devices));
  }
  for (const PJRT_NamedValue& v : options) {
    std::string_view name(v.name, v.name_size);
    if (name != "chip" && name != "devices" && name != "topology") continue;  // JAX's own options
    TPUMESH_ASSIGN_OR_RETURN(std::string text, OptionText(v));
    if (name == "chip") spec.chip = text;
    if (name == "topology") spec.topology = text;
    if (name == "devices") {
      TPUMESH_ASSIGN_OR_RETURN(spec.devices, ParseCount("the PJRT client option 'devices'", text));
    }
  }
  return spec;
}

StatusOr<std::unique_ptr<PJRT_Client>> CreateClient(const mesh::MeshSpec& spec) {
  auto mesh = mesh::CreateMesh(spec);
  if (!mesh.ok()) return mesh.status().WithContext("tpumesh: PJRT client");
  auto client = std::make_unique<PJRT_Client>();
  client->spec = spec;
  client->mesh = std::move(mesh).value();
  const mesh::Mesh& m = *client->mesh;
  const mesh::ChipSpec& chip = m.chip();
  client->platform_version = "tpumesh 0.1.0 (" + chip.name + " " + m.topology().DimsString() + ", emulated)";
  const int n = m.num_devices();
  for (int i = 0; i < n; ++i) {
    auto device = std::make_unique<PJRT_Device>();
    auto memory = std::make_unique<PJRT_Memory>();
    const mesh::DeviceCoords c = m.topology().Coords(i);
    PJRT_DeviceDescription& d = device->description;
    d.id = i;
    d.kind = chip.device_kind;
    d.coords = {c.chip[0], c.chip[1], c.chip[2]};
    d.core_on_chip = c.core_on_chip;
    const std::string where = "coords=(" + std::to_string(c.chip[0]) + "," + std::to_string(c.chip[1]) + "," +
                              std::to_string(c.chip[2]) + "), core_on_chip=" + std::to_string(c.core_on_chip);
    d.to_string = "TpuDevice(id=" + std::to_string(i) + ", process_index=0, " + where + ")";  // a TPU's repr
    d.debug_string = "tpumesh:" + std::to_string(i) + " " + chip.device_kind + " (emulated) " + where;
    PJRT_NamedValue coords{};
    coords.struct_size = sizeof(PJRT_NamedValue);
    coords.name = "coords";
    coords.name_size = 6;
    coords.type = PJRT_NamedValue_kInt64List;
    coords.int64_array_value = d.coords.data();
    coords.value_size = d.coords.size();
    PJRT_NamedValue core{};
    core.struct_size = sizeof(PJRT_NamedValue);
    core.name = "core_on_chip";
    core.name_size = 12;
    core.type = PJRT_NamedValue_kInt64;
    core.int64_value = d.core_on_chip;
    core.value_size = 1;
    d.attributes = {coords, core};

    device->client = client.get();
    device->local_hardware_id = i;
    device->hbm_bytes = chip.hbm_bytes_per_device();
    memory->id = i;
    memory->devices = {device.get()};
    memory->debug_string = "tpumesh:" + std::to_string(i) + " HBM (" + std::to_string(device->hbm_bytes) + " bytes)";
    memory->to_string = "MEMORY_SPACE_" + std::to_string(i);
    device->memory = memory.get();
    device->memories = {memory.get()};
    client->device_handles.push_back(device.get());
    client->memory_handles.push_back(memory.get());
    client->devices.push_back(std::move(device));
    client->memories.push_back(std::move(memory));
  }
  return client;
}

}  // namespace tpumesh::pjrt
