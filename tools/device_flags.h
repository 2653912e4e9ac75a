// The device flags, declared once for every command that runs or prices work
// on the emulated mesh (generate, simulate, eval, devices): the chip, the
// device count, the mesh axes and where they sit on the topology, host
// threads, and the report and trace of the chip's view.
#ifndef TPUMESH_TOOLS_DEVICE_FLAGS_H_
#define TPUMESH_TOOLS_DEVICE_FLAGS_H_

#include <string>

#include "CLI/CLI.hpp"
#include "mesh/mesh.h"
#include "report/report_files.h"

namespace tpumesh::tools {

struct DeviceFlags {
  mesh::MeshSpec mesh;
  report::ReportPaths out;  // --report, --trace, --report-csv
};

// What a command takes of the group.
enum DeviceFlagSet : unsigned {
  kMeshFlags = 1,     // --chip --dataflow --vmem-mib --attention --devices --mesh --topology --model-axis-along --overlap
  kThreadFlags = 2,   // --threads-per-device
  kOutputFlags = 4,   // --report --trace --report-csv
  kAllDeviceFlags = 7,
};
void AddDeviceFlags(CLI::App* cmd, DeviceFlags* flags, unsigned which = kAllDeviceFlags);

// A real number as written, for a flag whose range is checked after
// parsing: refuses an empty value (which CLI11 would take as "not given")
// and one a double cannot hold (1e309, 1e-400: strtod's ERANGE), naming the
// text given. Within(lo, hi) also checks [lo, hi] (NaN and infinities
// refused).
CLI::Validator RealNumber();
CLI::Validator Within(double lo, double hi);

}  // namespace tpumesh::tools

#endif  // TPUMESH_TOOLS_DEVICE_FLAGS_H_
