// Tensor parallelism over a mesh's `model` axis: how a device computes its
// share of a layer and how the shares are combined (Megatron-LM's column and
// row parallel layers; docs/sharding.md gives the plan per block).
//
// A ModelAxis is one device's view of the axis: its rank, the axis size and
// the collectives over it. In a real run they go through the device's
// mesh::DeviceContext (which moves real bytes between the devices' buffers:
// the one seam through which activations cross devices); in a dry run they
// move nothing and allocate the result. Either way each collective appends a
// mesh::OpRecord (type "collective", priced on the ICI model for the group's
// place on the topology, mesh/interconnect.h) to Ctx::ops, so a real run and
// a simulation record the same traffic.
//
// The layers below take one rank's ParamMap (models/params.h): when the
// layer's weight is split there they compute the rank's share and combine it;
// when it is whole they are the plain layer, so a model runs unchanged on one
// device. Sums over the axis run in rank order with f32 accumulation (the
// collectives' contract): the same bits on every device, every run and every
// thread count.
//
// Bytes on the wire are counted as the chip would send them: bf16 at
// Precision::kDefault, f32 at kHighest (the host moves f32 either way).
#ifndef TPUMESH_MODELS_PARALLEL_H_
#define TPUMESH_MODELS_PARALLEL_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "mesh/collectives.h"
#include "mesh/mesh.h"
#include "models/nn.h"
#include "models/params.h"

namespace tpumesh::models {

class ModelAxis {
 public:
  // A real run: collectives over `axis` through the pmap body's context.
  static StatusOr<ModelAxis> ForDevice(mesh::DeviceContext& dctx, const std::string& axis = "model");
  // A dry run of `device` of `mesh`: priced, nothing moved.
  static StatusOr<ModelAxis> Priced(const mesh::Mesh& mesh, int device, const std::string& axis = "model");

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(group_.size()); }
  const std::vector<int>& group() const { return group_; }

  // jax.lax.psum over the axis; `layer` names it in the report.
  StatusOr<Array> Psum(const Ctx& ctx, const Array& x, const std::string& layer) const;
  // jax.lax.all_gather(x, axis, axis=dim, tiled=True): the ranks' slices of
  // dimension `dim` concatenated in rank order.
  StatusOr<Array> AllGather(const Ctx& ctx, const Array& x, int dim, const std::string& layer) const;
  // FSDP (an axis named "fsdp"): weight `w` of `module`, sharded over the
  // axis (each device holds ceil(elements / size) of it), all_gathered
  // right before its layer runs. Records the all_gather (a prefetch,
  // mesh/cost_model.h: it may start one layer ahead) and returns its
  // async_id, which the layer's record awaits, with the gathered weight's
  // HBM held until the layer ends (a dry run's allocation). Priced only: a
  // real run is refused (FailedPrecondition). Size 1: id 0, nothing held.
  struct GatheredWeight {
    int64_t async_id = 0;
    Array held;
  };
  StatusOr<GatheredWeight> GatherWeight(const Ctx& ctx, const Array& w, const std::string& module) const;

 private:
  ModelAxis() = default;
  StatusOr<Array> Run(const Ctx& ctx, mesh::CollectiveKind kind, const Array& x, int dim,
                      const std::string& layer) const;

  mesh::DeviceContext* dctx_ = nullptr;  // null: a dry run
  const mesh::ChipSpec* chip_ = nullptr;
  const mesh::Topology* topology_ = nullptr;
  std::string axis_;
  std::vector<int> group_;
  int rank_ = 0;
};

// The rank of the Ctx's model axis (0 without one); the map of `ranks` a
// model runs with, checked against the axis (FailedPrecondition when a model
// sharded M ways runs on an axis of another size).
StatusOr<const ParamMap*> RankParams(const Ctx& ctx, const std::vector<ParamMap>& ranks, const char* component);

// y = x W^T + b for a row-parallel layer (`layer`.weight split by input
// features): this rank's partial product of its input slice, psum, then the
// bias. Whole weight: Linear.
StatusOr<Array> RowLinear(const Ctx& ctx, const ParamMap& P, const std::string& layer, const Array& x);
// The same for a convolution (x [N, C/M, H, W] -> psum of [N, O, Ho, Wo]).
StatusOr<Array> RowConv2d(const Ctx& ctx, const ParamMap& P, const std::string& layer, const Array& x, int stride,
                          int pad);
// A column-parallel layer whose output is all_gathered (kGathered): this
// rank's output features, then all_gather along the feature dimension (the
// last of x [..., in] for a Linear or a 1x1 conv on channels-last input).
// Whole weight: Linear / Conv2d.
StatusOr<Array> GatheredLinear(const Ctx& ctx, const ParamMap& P, const std::string& layer, const Array& x);
StatusOr<Array> GatheredConv2d(const Ctx& ctx, const ParamMap& P, const std::string& layer, const Array& x,
                               int stride, int pad_top, int pad_left, int pad_bottom, int pad_right);
// Units of `param`'s split this rank holds (heads, groups), or `whole` when
// the parameter is not split.
int64_t LocalUnits(const ParamMap& P, const std::string& param, int64_t whole);

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_PARALLEL_H_
