// Mesh: N virtual devices laid out on named axes, and JAX's SPMD verbs over
// them: Replicate, Shard and Pmap (collectives inside pmap: collectives.h).
//
// Contract:
// - Axes are row-major over mesh positions, the last axis fastest, as
//   jax.sharding.Mesh(devices.reshape(sizes), names): the device at position
//   p has axis indices unravel(p, sizes). Positions follow the physical
//   layout: the cores of a chip first, then the chips along
//   MeshOptions::fastest_chip_axis, then along the other chip axes in x, y, z
//   order. With the default (x fastest) position p is device p, as
//   jax.devices() orders a slice; so the last mesh axis (`model`) runs along
//   x first, and its groups are the chips nearest each other.
// - Replicate(x) puts x on every device (shared read-only storage, counted
//   on every device's HBM). Shard(x) splits the leading dimension b into n
//   slices of b/n (InvalidArgument when n does not divide b); the stacked
//   view is [n, b/n, ...], as the seed's `shard`. Shard(x, axes) splits it
//   over the named axes only (slice = the device's row-major index over
//   them) and replicates it over the others: a batch sharded over `data`,
//   the same on every device of a `model` group.
// - Pmap(fn, args) runs fn once per device, concurrently, each on a host
//   thread that enters the device's task arena; fn gets a DeviceContext (axis
//   indices, collectives) and the device's shard of every argument. Outputs
//   come back as one DistributedArray per output, stacked like jax.pmap.
// - At most `host_cores` device bodies compute at once; a body parked in a
//   collective gives its core to another, so N devices on 2 cores neither
//   oversubscribe nor deadlock.
// - The Mesh owns its devices; arrays on them must not outlive it.
// - Ranks (cluster.h): a mesh may span the R ranks of a Cluster. Rank r
//   hosts the devices with ids [r*n/R, (r+1)*n/R): a contiguous block of
//   device ids, so (positions following ids by default) the last mesh axis,
//   `model`, stays inside a rank when its size divides n/R. R must divide n.
//   A rank creates arenas and HBM budgets for its own devices only;
//   device(i) of another rank's device is an error (is_local tells). Every
//   rank calls the same Replicate, Shard and Pmap: the DistributedArrays hold
//   this rank's shards, and an empty Array (no device) for the others'.
//   Pmap runs the body on this rank's devices; collectives between ranks go
//   through the cluster and give the same bits as one process.
//   ResetClocks, MaxClockSeconds and DistributedArray::Gather see this
//   rank's devices only; Mesh::GatherToRank brings other ranks' shards to
//   one rank (a collective: every rank calls it, in the same order).
#ifndef TPUMESH_MESH_MESH_H_
#define TPUMESH_MESH_MESH_H_

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "mesh/array.h"
#include "mesh/chip_spec.h"
#include "mesh/cluster.h"
#include "mesh/device.h"
#include "mesh/topology.h"

namespace tpumesh::mesh {

struct MeshAxis {
  std::string name;
  int size = 1;
};
// "data=8" or "x=2,y=4" -> axes. Also accepts "8" (-> data=8).
StatusOr<std::vector<MeshAxis>> ParseMeshAxes(std::string_view text);
std::string MeshAxesToString(const std::vector<MeshAxis>& axes);  // "x=2,y=4"

struct MeshOptions {
  // Host threads in each device's arena; 0 picks max(1, host_cores / devices).
  int threads_per_device = 0;
  // Host cores the mesh may keep busy; 0 means all (hardware_concurrency).
  int host_cores = 0;
  // The chip axis (0 = x, 1 = y, 2 = z) mesh positions run along first, after
  // the cores of a chip: the physical axis the last mesh axis occupies.
  int fastest_chip_axis = 0;
  // The cost model's collectives: overlapped with compute as XLA runs them
  // on a TPU (true) or serial (mesh/cost_model.h; --overlap).
  bool overlap_collectives = true;
  // The ranks the mesh spans (not owned; outlives the mesh). Null: this
  // process alone (LocalCluster()).
  Cluster* cluster = nullptr;
};
// "x" | "y" | "z" -> 0 | 1 | 2.
StatusOr<int> ParseChipAxis(std::string_view name);

// One array per device: shards[i] lives on device i (PJRT's per-device list
// of one argument).
struct DistributedArray {
  std::vector<Array> shards;
  bool replicated = false;

  int num_shards() const { return static_cast<int>(shards.size()); }
  // [n, ...shard shape]: the stacked view jax.pmap returns.
  Shape stacked_shape() const;
  // Copies every shard to the host and stacks them: [n, ...shard shape].
  StatusOr<Array> Gather() const;
};

class DeviceContext;
class CollectiveHub;

// The body of a pmap: gets its device's context and its shard of each
// argument, returns its outputs (the same count, dtypes and shapes on every
// device).
using PmapFn =
    std::function<StatusOr<std::vector<Array>>(DeviceContext& ctx, std::span<const Array> args)>;

class Mesh {
 public:
  // The product of the axis sizes must equal the topology's device count.
  static StatusOr<std::unique_ptr<Mesh>> Create(const ChipSpec& chip,
                                                const std::vector<int>& chip_dims,
                                                std::vector<MeshAxis> axes,
                                                MeshOptions options = {});
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  const ChipSpec& chip() const { return chip_; }
  const Topology& topology() const { return topology_; }
  const std::vector<MeshAxis>& axes() const { return axes_; }
  // Devices of the whole mesh, on every rank.
  int num_devices() const { return static_cast<int>(devices_.size()); }
  // A device of this rank (is_local(i)).
  Device& device(int i) { return *devices_[i]; }
  const Device& device(int i) const { return *devices_[i]; }
  int host_cores() const { return host_cores_; }

  Cluster& cluster() const { return *cluster_; }
  // The rank hosting device i, and whether that is this one.
  int rank_of(int device) const { return device / (num_devices() / cluster_->size()); }
  bool is_local(int device) const { return devices_[device] != nullptr; }
  // This rank's devices: ids [first_local(), first_local() + num_local()).
  int first_local() const { return first_local_; }
  int num_local() const { return num_local_; }

  // Position of `name` in axes(), or InvalidArgument naming the known axes.
  StatusOr<int> AxisPosition(std::string_view name) const;
  // The device's index on every axis (row-major, last axis fastest).
  std::vector<int> AxisIndices(int device) const;
  // The device at these axis indices (one per axis).
  int DeviceAt(std::span<const int> indices) const;
  int fastest_chip_axis() const { return fastest_chip_axis_; }
  bool overlap_collectives() const { return overlap_collectives_; }  // MeshOptions
  // Devices that agree with `device` on every axis not named, ordered
  // row-major over the named axes in the order given (JAX's multi-axis
  // collective order). Names must be distinct axes of this mesh.
  StatusOr<std::vector<int>> Group(int device, std::span<const std::string> axis_names) const;

  StatusOr<DistributedArray> Replicate(const Array& x);
  StatusOr<DistributedArray> Shard(const Array& x);
  StatusOr<DistributedArray> Shard(const Array& x, std::span<const std::string> axes);
  StatusOr<std::vector<DistributedArray>> Pmap(const PmapFn& fn,
                                               std::span<const DistributedArray> args);
  // The shards of `devices` (all when empty) brought to rank `root`
  // through the cluster: on root the result is `x` with every listed shard
  // filled (another rank's as a host copy, the same dtype, shape and
  // bytes); on the other ranks it is `x` unchanged. Collective: every rank
  // calls it with the same `devices` and root. One process: `x`.
  StatusOr<DistributedArray> GatherToRank(const DistributedArray& x, int root = 0,
                                          std::span<const int> devices = {});

  void ResetClocks();
  double MaxClockSeconds() const;  // the slowest (local) device's simulated clock

 private:
  Mesh(const ChipSpec& chip, Topology topology, std::vector<MeshAxis> axes, int threads,
       int host_cores, int fastest_chip_axis, Cluster* cluster);

  ChipSpec chip_;
  Topology topology_;
  std::vector<MeshAxis> axes_;
  std::vector<std::unique_ptr<Device>> devices_;  // null: another rank's
  int host_cores_;
  int fastest_chip_axis_;
  bool overlap_collectives_ = true;
  Cluster* cluster_;
  int first_local_ = 0;
  int num_local_ = 0;
  int pmaps_ = 0;  // Pmaps run: checked across ranks
  std::vector<int> device_at_;    // mesh position -> device id
  std::vector<int> position_of_;  // device id -> mesh position
};

// The mesh a command runs on, as its device flags give it (one flag group
// for every command, tools/device_flags.h).
// The most devices a mesh emulates (each is a task arena and a cost log).
inline constexpr int kMaxDevices = 1024;

struct MeshSpec {
  std::string chip = "v5e";  // a preset (ChipPresetNames()) or a chip JSON file
  std::string dataflow;      // "ws", "os" or "is"; empty: the chip's
  double vmem_mib = -1;      // VMEM per TensorCore in MiB, 0 to 1048576 (0: none modelled); -1: the chip's
  std::string attention;     // "flash" or "standard" (ChipSpec::attention); empty: flash
  int devices = 0;           // 1 to 1024; 0 (not given): the topology's count, else the product of `axes`, else 8
  std::string axes;          // "data=4,model=2"; empty: data=devices
  std::string topology;      // "2x4"; empty: the chip's slice for the device count
  std::string model_axis_along = "x";  // the chip axis the last mesh axis runs along first
  int threads_per_device = 0;          // 0: host cores / devices
  std::string overlap = "on";          // collectives overlapped with compute: "on" or "off"
  // The ranks the mesh spans (not owned; mesh::MeshOptions::cluster); null:
  // this process alone.
  Cluster* cluster = nullptr;
};
// The devices, topology and axes of `spec`; errors name the flag.
StatusOr<std::unique_ptr<Mesh>> CreateMesh(const MeshSpec& spec);
// A mesh whose axes are exactly data=D, model=M (model=1 when `spec.axes`
// names no model axis; other axis names are refused; model=M alone leaves
// data the rest of the device count), or data=D,fsdp=F,model=M when
// `spec.axes` names fsdp=F with F > 1 (docs/sharding.md: images split over
// data x fsdp, weights sharded over fsdp; simulate only): what generate,
// simulate and eval run on; the model axis is always the last. Errors name
// the flags as given.
StatusOr<std::unique_ptr<Mesh>> CreateDataModelMesh(const MeshSpec& spec);

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_MESH_H_
