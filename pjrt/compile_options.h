// What the plugin reads of a serialized xla.CompileOptionsProto (the bytes
// PJRT_Client_Compile receives): the replica and partition counts and the
// device assignment. A protobuf wire-format reader of those fields only
// (no protobuf library in the build; the fields' numbers are XLA's, stable
// since the API began):
//   CompileOptionsProto.executable_build_options          = 3
//   ExecutableBuildOptionsProto.num_replicas              = 4
//   ExecutableBuildOptionsProto.num_partitions            = 5
//   ExecutableBuildOptionsProto.device_assignment         = 9
//   DeviceAssignmentProto.replica_count                   = 1
//   DeviceAssignmentProto.computation_count               = 2
//   DeviceAssignmentProto.computation_devices             = 3 (repeated)
//   ComputationDevice.replica_device_ids                  = 1 (repeated int64, packed or not)
// Every other field is skipped by its wire type.
//
// Contract: bytes that are not a well-formed message (a length past the
// end, a varint of more than 10 bytes, an unknown wire type) are
// InvalidArgument naming what; counts default to 1; without a device
// assignment `devices` is empty (the caller picks).
#ifndef TPUMESH_PJRT_COMPILE_OPTIONS_H_
#define TPUMESH_PJRT_COMPILE_OPTIONS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tpumesh::pjrt {

struct CompileOptions {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  // devices[replica][partition]: the device id of each logical device.
  std::vector<std::vector<int64_t>> devices;
};

StatusOr<CompileOptions> ParseCompileOptions(std::string_view bytes);

// A serialized xla.OpSharding: REPLICATED when `tiles` is empty or all 1
// and nothing is unreduced; else OTHER with tile_assignment_dimensions =
// tiles, then the replica count when `replicas` > 1, then the unreduced
// count when `unreduced` > 1, and tile_assignment_devices = `devices`
// (logical device ids, row-major over those dimensions). The subgroups are
// replicate_on_last_tile_dim when the replicas are the only one, else
// last_tile_dims (REPLICATED, UNREDUCED), as XLA writes them.
std::string SerializeOpSharding(const std::vector<int64_t>& tiles, int64_t replicas, int64_t unreduced,
                                const std::vector<int64_t>& devices);

// A serialized DeviceAssignmentProto of devices[replica][partition].
std::string SerializeDeviceAssignment(const std::vector<std::vector<int64_t>>& devices);

}  // namespace tpumesh::pjrt

#endif  // TPUMESH_PJRT_COMPILE_OPTIONS_H_
