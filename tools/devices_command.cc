// `tpumesh devices`: the emulated devices as jax.devices() shows them, the
// mesh and a chip summary, for the same device flags as generate, eval and
// simulate (any axis names here: the mesh is only shown).
#include <iostream>
#include <memory>
#include <string>

#include "mesh/mesh.h"
#include "report/devices_text.h"
#include "tools/commands.h"
#include "tools/device_flags.h"

namespace tpumesh::tools {
namespace {

struct DevicesOptions {
  DeviceFlags dev;
  bool json = false;
};

Status RunDevices(const DevicesOptions& opt) {
  TPUMESH_ASSIGN_OR_RETURN(std::unique_ptr<mesh::Mesh> m, mesh::CreateMesh(opt.dev.mesh));
  std::cout << (opt.json ? report::DevicesJson(*m) : report::DevicesText(*m));
  return OkStatus();
}

}  // namespace

void RegisterDevices(CLI::App& app, RunFn* run) {
  auto opt = std::make_shared<DevicesOptions>();
  CLI::App* cmd = app.add_subcommand(
      "devices", "List the emulated devices (like jax.devices()), the mesh and the chip.");
  AddDeviceFlags(cmd, &opt->dev, kMeshFlags | kThreadFlags);
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, run] { *run = [opt] { return RunDevices(*opt); }; });
}

}  // namespace tpumesh::tools
