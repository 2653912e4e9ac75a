// Collectives inside pmap, with JAX's semantics and output shapes
// (jax.lax.psum, pmean, all_gather, psum_scatter, ppermute, all_to_all), over
// one named mesh axis or several. They move real data between the device
// buffers and advance every participant's simulated clock by the modelled ICI
// time (interconnect.h): a collective ends for all participants at
// max(their clocks on entry) + its modelled time.
//
// Contract:
// - SPMD: every device of the pmap calls the same collectives in the same
//   order with the same dtype, shape and parameters. A device that calls a
//   different one, or returns without entering one the others entered, makes
//   all of them fail with FailedPrecondition naming the culprit: never a hang.
// - Call collectives from the pmapped function itself, not from inside tasks
//   it spawns (a task parked in a collective would hold an arena slot).
// - Sums run in group-index order with f32 accumulation for f32 and bf16
//   (bf16 rounded once at the end, round-to-nearest-even) and wrap-around
//   integer arithmetic for s32/u32, so every device gets the same bits.
// - Group index: the position of a device in Mesh::Group(device, axes).
#ifndef TPUMESH_MESH_COLLECTIVES_H_
#define TPUMESH_MESH_COLLECTIVES_H_

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "mesh/array.h"
#include "mesh/host_cores.h"
#include "mesh/interconnect.h"
#include "mesh/mesh.h"

namespace tpumesh::mesh {

using AxisNames = std::vector<std::string>;

// What one device asks of one collective; compared across devices.
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::kPsum;
  AxisNames axes;
  DType dtype = DType::kF32;
  Shape shape;
  int axis = 0;         // all_gather axis, psum_scatter dimension, all_to_all split axis
  int concat_axis = 0;  // all_to_all
  bool tiled = false;
  std::vector<std::pair<int, int>> perm;  // ppermute, in group indices
  const Array* input = nullptr;
  std::byte* output = nullptr;  // the device's output buffer (psum's phases read it)

  std::string Describe() const;  // "psum over ('x','y') of f32[4,8]"
  bool SameAs(const CollectiveCall& o) const;
};

// Internal to Mesh::Pmap: the rendezvous of one pmap's collectives.
class CollectiveHub {
 public:
  CollectiveHub(Mesh& mesh, HostCores& host_cores);

  // Blocks until every device has entered its `seq`-th collective. Then
  // `calls` holds every device's call (indexed by device id) and the clocks
  // are advanced. Fails when the calls differ or a device will never come.
  Status Arrive(int device, int seq, const CollectiveCall& call,
                std::vector<const CollectiveCall*>* calls);
  // Blocks until every device has called Sync for the `seq`-th collective
  // (a barrier between the phases of one collective).
  void Sync(int device, int seq);
  // Blocks until every device has finished reading the `seq`-th inputs.
  void Depart(int device, int seq);
  // The device's pmap body returned after entering `entered` collectives.
  void Finish(int device, int entered, const Status& status);
  // Whether the device's error was caused by another device (not its own).
  bool IsSecondary(int device) const;

 private:
  struct Slot {
    std::vector<const CollectiveCall*> calls;  // valid only once ready
    CollectiveCall first;                      // a copy of the first arrival's call
    int first_device = -1;
    int arrived = 0;
    int synced = 0;
    int departed = 0;
    bool ready = false;
    Status error;
  };
  std::string AbandonReasonLocked(int seq) const;
  void WaitLocked(std::unique_lock<std::mutex>& lock, const std::function<bool()>& done);
  void AdvanceClocksLocked(const Slot& slot);

  Mesh& mesh_;
  HostCores& host_cores_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, Slot> slots_;
  std::vector<int> finished_;  // collectives entered, -1 while running
  std::vector<Status> finished_status_;
  std::vector<bool> secondary_;
};

class DeviceContext {
 public:
  DeviceContext(Mesh& mesh, int device, CollectiveHub* hub) : mesh_(mesh), device_(device), hub_(hub) {}

  Mesh& mesh() { return mesh_; }
  Device& device() { return mesh_.device(device_); }
  int device_id() const { return device_; }
  int collectives_entered() const { return seq_; }

  // jax.lax.axis_index(name) and the axis' size.
  StatusOr<int> axis_index(std::string_view axis) const;
  StatusOr<int> axis_size(std::string_view axis) const;

  // Allocates on this device.
  StatusOr<Array> Allocate(DType dtype, Shape shape, std::string_view what = "array") {
    return Array::Allocate(device(), dtype, std::move(shape), what);
  }

  StatusOr<Array> Psum(const Array& x, const AxisNames& axes);
  StatusOr<Array> Pmean(const Array& x, const AxisNames& axes);
  // untiled: a new axis of size n at `axis` (0..rank); tiled: concatenated
  // along the existing `axis`.
  StatusOr<Array> AllGather(const Array& x, const AxisNames& axes, int axis = 0,
                            bool tiled = false);
  // untiled: x.shape[dim] == n and the output drops that dim; tiled: n
  // divides x.shape[dim] and the output keeps 1/n of it.
  StatusOr<Array> PsumScatter(const Array& x, const AxisNames& axes, int scatter_dimension = 0,
                              bool tiled = false);
  // perm: (source, destination) group indices; a device that is nobody's
  // destination gets zeros.
  StatusOr<Array> Ppermute(const Array& x, const AxisNames& axes,
                           std::vector<std::pair<int, int>> perm);
  // untiled: x.shape[split_axis] == n; the output drops split_axis and has a
  // new axis of size n at concat_axis. tiled: split_axis divided by n,
  // concat_axis multiplied by n.
  StatusOr<Array> AllToAll(const Array& x, const AxisNames& axes, int split_axis,
                           int concat_axis, bool tiled = false);

 private:
  StatusOr<Array> Run(CollectiveCall call);

  Mesh& mesh_;
  int device_;
  CollectiveHub* hub_;
  int seq_ = 0;
};

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_COLLECTIVES_H_
