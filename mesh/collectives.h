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
// - Groups may span ranks (a mesh over a Cluster, mesh.h): each rank
//   receives only the parts of other ranks' inputs its devices need
//   (rank_split.h: psum and pmean as a reduce-scatter then an all-gather
//   between ranks, each rank summing its range of the array from all
//   inputs in group order), and the results are the same bits as one
//   process with the same mesh.
#ifndef TPUMESH_MESH_COLLECTIVES_H_
#define TPUMESH_MESH_COLLECTIVES_H_

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "mesh/array.h"
#include "mesh/collective_hub.h"
#include "mesh/interconnect.h"
#include "mesh/mesh.h"

namespace tpumesh::mesh {

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

  // Waits until every device of this rank has reached its own next host
  // barrier or returned from the pmap, giving this device's host core to
  // another meanwhile (CollectiveHub::HostBarrier): a rendezvous of the host
  // threads, not a collective (no clock, no traffic, no record; other ranks
  // take no part). True for one device of each barrier, so that one of them
  // can act for all (e.g. give back a model no device needs any more).
  // Outside a pmap (no hub): true at once.
  bool HostBarrier() { return hub_ == nullptr || hub_->HostBarrier(device_, ++barriers_); }

 private:
  StatusOr<Array> Run(CollectiveCall call);

  Mesh& mesh_;
  int device_;
  CollectiveHub* hub_;
  int seq_ = 0;
  int barriers_ = 0;  // HostBarrier calls made
};

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_COLLECTIVES_H_
