// The objects behind the PJRT C API's opaque handles (pjrt/pjrt_c_api.h):
// a client owns an emulated mesh (mesh/mesh.h) and, for each of its devices,
// a PJRT_Device with its description and its one memory (the device's HBM).
//
// Contract: everything a PJRT getter hands out (strings, arrays of handles,
// attribute lists) is built once by CreateClient and lives as long as the
// client, as the API requires; the getters only read. The configuration is
// the CLI's (tools' --chip, --devices, --topology) taken from the
// environment (docs/pjrt.md, "Configuration"):
//   TPUMESH_PJRT_CHIP      v5e (default), another preset (v4, v2, v6e, v5p, tpu7x) or a chip JSON file
//   TPUMESH_PJRT_DEVICES   the device count (default: the topology's, else 8)
//   TPUMESH_PJRT_TOPOLOGY  chips per axis, e.g. 2x4 (default: the chip's slice)
// and from PJRT_Client_Create's options of the same names in lower case
// without the prefix ("chip", "devices", "topology"), which take precedence.
#ifndef TPUMESH_PJRT_CLIENT_H_
#define TPUMESH_PJRT_CLIENT_H_

#include <cstdint>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "mesh/mesh.h"
#include "pjrt/pjrt_c_api.h"

struct PJRT_DeviceDescription {
  int id = 0;
  int process_index = 0;
  std::string kind;       // the chip's device_kind, e.g. "TPU v5 lite"
  std::string debug_string;
  std::string to_string;
  std::vector<int64_t> coords;  // (x, y, z) of the device's chip
  std::vector<PJRT_NamedValue> attributes;  // "coords", "core_on_chip"; point into this object
  int64_t core_on_chip = 0;
};

struct PJRT_Memory {
  int id = 0;
  std::string kind = "device";  // TPU's name for HBM
  std::string debug_string;
  std::string to_string;
  std::vector<PJRT_Device*> devices;  // the one device it belongs to
};

struct PJRT_Device {
  PJRT_Client* client = nullptr;
  PJRT_DeviceDescription description;
  PJRT_Memory* memory = nullptr;  // owned by the client
  int local_hardware_id = 0;
  int64_t hbm_bytes = 0;
  std::vector<PJRT_Memory*> memories;  // {memory}
};

namespace tpumesh::pjrt {
struct Program;  // pjrt/executable.cc
}

struct PJRT_Client {
  tpumesh::mesh::MeshSpec spec;                // what the client was made from
  std::unique_ptr<tpumesh::mesh::Mesh> mesh;  // its devices: buffers and HBM
  std::string platform_name = "tpumesh";
  std::string platform_version;
  std::vector<std::unique_ptr<PJRT_Device>> devices;
  std::vector<std::unique_ptr<PJRT_Memory>> memories;
  std::vector<PJRT_Device*> device_handles;
  std::vector<PJRT_Memory*> memory_handles;
  // Programs run on meshes of their own device count and axes (the
  // client's chip), made on first use; compiled programs by bytes and
  // options. Both under run_mutex.
  std::mutex run_mutex;
  std::map<std::string, std::unique_ptr<tpumesh::mesh::Mesh>> run_meshes;
  std::map<std::string, std::shared_ptr<tpumesh::pjrt::Program>> compiled;
  std::mutex execute_mutex;            // held by each execution (pjrt/executable.cc)
  std::atomic<int64_t> executions{0};  // numbers the report files (TPUMESH_PJRT_REPORT_DIR)
};

namespace tpumesh::pjrt {

// The mesh the client emulates: the environment, then `options`
// (PJRT_NamedValue strings or int64s named chip, devices, topology).
StatusOr<mesh::MeshSpec> MeshSpecFrom(std::span<const PJRT_NamedValue> options);

StatusOr<std::unique_ptr<PJRT_Client>> CreateClient(const mesh::MeshSpec& spec);

}  // namespace tpumesh::pjrt

#endif  // TPUMESH_PJRT_CLIENT_H_
