// What `tpumesh devices` prints for a mesh: the devices as jax.devices()
// shows them, the mesh axes, the chip and the host, as text or as JSON. One
// formatting for the command and for the Python module's tpumesh.devices()
// (python/).
#ifndef TPUMESH_REPORT_DEVICES_TEXT_H_
#define TPUMESH_REPORT_DEVICES_TEXT_H_

#include <string>

#include "mesh/mesh.h"

namespace tpumesh::report {

// The text, a line per device between the header and the chip and host lines
// (docs/cli.md, "tpumesh devices"), each line ending in '\n'.
std::string DevicesText(const mesh::Mesh& m);
// The JSON (chip, topology, mesh, devices, host_cores), indented by 2.
std::string DevicesJson(const mesh::Mesh& m);

}  // namespace tpumesh::report

#endif  // TPUMESH_REPORT_DEVICES_TEXT_H_
