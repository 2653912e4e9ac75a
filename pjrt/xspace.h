// The executions a jax.profiler.trace session saw, as the XSpace JAX's
// profiler writes (tensorflow.profiler.XSpace, xla/tsl/profiler/protobuf/
// xplane.proto), serialized by a protobuf wire writer of our own.
//
// One XPlane per emulated device that ran, named "/device:TPU:<id>" (the
// PJRT device id) as a real TPU's plane is, so TensorBoard's profile plugin
// and xprof show it among the devices. Its lines:
//   1 "XLA Modules (modelled)": one event per execution, the program's name,
//     as long as the device's modelled time for it;
//   2 "XLA Ops (modelled)": one event per op: its modelled start on the
//     device's timeline and its modelled duration (the cost model's, for the
//     emulated chip), stats "op type", "shape", "flops", "bytes accessed",
//     "utilisation", "modelled_start_us", "modelled_us", "calls" (a record
//     standing for repeated calls) and "host_us" (measured on this host);
//   3 "Host wall time (measured)": one event per execution, from the host's
//     entry into PJRT_LoadedExecutable_Execute to its return.
// Placement: times are the host's realtime clock (as the profiler's own
// planes). An execution's modelled ops start on each device when the host
// launched it, or when the device's previous modelled work ends if later
// (a device runs one program at a time), so the modelled line never
// overlaps itself; within an execution, offsets are exactly the report's.
// Plane stats say what is modelled: "tpumesh" and "chip".
#ifndef TPUMESH_PJRT_XSPACE_H_
#define TPUMESH_PJRT_XSPACE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "report/report.h"

namespace tpumesh::pjrt {

struct ProfiledExecution {
  std::string program;  // the module's name, e.g. "jit_f"
  int64_t host_start_ns = 0,
          host_end_ns = 0;  // realtime clock, ns since the epoch
  std::vector<int64_t>
      device_ids;  // report device d ran on PJRT device device_ids[d]
  std::shared_ptr<const report::RunReport>
      report;  // with its ops kept (keep_ops)
};

// The serialized XSpace of `executions` (in the order they ran).
std::string SerializeXSpace(const std::vector<ProfiledExecution>& executions);

// Picoseconds of `seconds`, rounded: how SerializeXSpace writes every
// modelled duration and offset (tests compare with it).
int64_t Picoseconds(double seconds);

}  // namespace tpumesh::pjrt

#endif  // TPUMESH_PJRT_XSPACE_H_
