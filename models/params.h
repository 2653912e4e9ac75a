// A component's parameters by checkpoint name, checked against the manifest
// of its config (configs.h) before any model is built from them.
#ifndef TPUMESH_MODELS_PARAMS_H_
#define TPUMESH_MODELS_PARAMS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "mesh/array.h"
#include "models/configs.h"
#include "models/nn.h"

namespace tpumesh::models {

// Whether a parameter reaches the computation only through its packed form
// (WeightPacks widens a bf16 one exactly): the Linear and conv weights, rank
// 2 or 4, not the embedding tables (read element by element: CLIP's
// *embedding.weight, T5's shared.weight and relative_attention_bias).
bool OnlyPacked(const std::string& name, const mesh::Shape& shape);
// Whether a parameter may be held in bf16 (a model file stored in bf16 keeps
// it so: half the host memory, no f32 master copy): the OnlyPacked weights
// and the CLIP text embeddings (token and position tables) and T5's token
// table, which the text encoders widen as they gather their rows. Everything else is f32.
bool MayHoldBf16(const std::string& name, const mesh::Shape& shape);

// Name -> array: f32, or bf16 where MayHoldBf16. Arrays may be replicated
// views (read-only, shared). A map holds a whole component, or one model
// rank's share of it (ShardParams): then split() says which parameters are
// slices and which units of the split each holds.
class ParamMap {
 public:
  ParamMap() = default;
  explicit ParamMap(std::map<std::string, mesh::Array> params);

  // NotFound / InvalidArgument naming `component` and the first missing or
  // mis-shaped tensor (expected vs got), before any compute.
  Status Check(const std::vector<ParamSpec>& manifest, std::string_view component) const;
  // The parameter; Check() guarantees presence for manifest names.
  const mesh::Array& operator[](const std::string& name) const { return params_.at(name); }
  const std::map<std::string, mesh::Array>& all() const { return params_; }
  // The name of the parameter whose storage `a` is (its data pointer), or
  // nullptr: how a layer's record learns its module's name.
  const std::string* NameOf(const mesh::Array& a) const;
  int64_t bytes() const;
  // Rank `rank` of `ranks` (0 of 1 for a whole component).
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  // The units [first, second) of its split this rank holds of `name`, or
  // nullptr when the parameter is whole on every rank.
  const std::pair<int64_t, int64_t>* split(const std::string& name) const {
    auto it = split_.find(name);
    return it == split_.end() ? nullptr : &it->second;
  }
  // Marks this map as rank `rank` of `ranks` of `manifest` (which of its
  // parameters are split, and how).
  void SetShard(const std::vector<ParamSpec>& manifest, int ranks, int rank);
  // The packed forms of these weights (shared by copies of this map).
  WeightPacks* packs() const { return packs_.get(); }
  // Uses `other`'s packs: the model ranks of one model share theirs, so a
  // parameter they hold in common (not split) is packed once, and releasing
  // its loaded pages after packing (release_packed_weights) cannot pull
  // them from under another rank's packer.
  void SharePacks(const ParamMap& other) { packs_ = other.packs_; }
  // Packs the matmul weights among these parameters (every rank-2 and rank-4
  // array whose name `include` accepts; all of them without `include`) into
  // ctx.packs at ctx.precision, those not packed yet, several at once
  // (WeightPacks::PackAll). A model's Forward calls it first, so that its
  // first call packs the whole model in one parallel pass. Does nothing in a
  // dry run or without ctx.packs.
  Status PackMatmulWeights(const Ctx& ctx, const std::function<bool(const std::string&)>& include = {}) const;
  // Gives the host memory of these parameters back for good, for a model
  // whose last use has passed: the packs (WeightPacks::Drop; the model's
  // rank maps share them) and the pages of the loaded arrays mapped on
  // their own (mesh::Array::ReleaseHostPages: 2 MiB and more; smaller ones
  // stay). Their views placed on devices keep their HBM accounting. Nothing
  // may read these arrays afterwards (a read faults), and a Forward fails
  // (FailedPrecondition). Returns the bytes given back.
  int64_t GiveBack() const;

 private:
  std::map<std::string, mesh::Array> params_;
  std::map<const void*, std::string> names_;  // data pointer -> name
  std::shared_ptr<WeightPacks> packs_ = std::make_shared<WeightPacks>();
  int rank_ = 0, ranks_ = 1;
  std::map<std::string, std::pair<int64_t, int64_t>> split_;
};

// Which model ranks' shares a process holds. One process holds them all
// (an int converts: `count` ranks, every one local). Under MPI a process
// holds only the model ranks of its own devices (mesh::Mesh::is_local,
// AxisIndices(d)[1]); each other model rank's map then holds lazy zeros
// (mesh::Array::LazyZeros) of that rank's shapes and dtypes: no host pages,
// never read and never packed (no device of this process computes with
// them), but their size_bytes() are the real share's, so HBM accounting and
// the report's param_bytes count every device as before.
struct ModelRanks {
  ModelRanks(int count = 1) : count(count) {}  // NOLINT: every rank local
  ModelRanks(int count, std::vector<bool> local) : count(count), local(std::move(local)) {}
  bool is_local(int r) const { return local.empty() || local[r]; }
  bool all_local() const;
  int count = 1;
  std::vector<bool> local;  // [count], or empty: every rank local
};

// Builds every model rank's ParamMap of a component one parameter at a time,
// so that a whole tensor is held only while its local shares are cut from it
// (the loader streams a model file through it: a process's peak is its own
// shares, not the whole component). Split parameters (ParamSpec::split over
// count ranks) are sliced into copies (dtype kept) for the local ranks; whole
// ones are shared by the local ranks; the other ranks get lazy zeros.
class ShardBuilder {
 public:
  ShardBuilder(std::vector<ParamSpec> manifest, ModelRanks ranks);
  // `whole`: the manifest's parameter `name` at its full shape.
  void Add(const std::string& name, const mesh::Array& whole);
  // The maps (SetShard done, packs shared between them); count 1: the one
  // map of the arrays as added.
  std::vector<ParamMap> Finish() &&;

 private:
  std::vector<ParamSpec> manifest_;
  std::map<std::string, const ParamSpec*> by_name_;
  ModelRanks ranks_;
  std::vector<std::map<std::string, mesh::Array>> maps_;
};

// Units [first, second) of `units` that rank r of m holds: units r / m to
// units (r + 1) / m (balanced; the last ranks hold the larger shares).
std::pair<int64_t, int64_t> ShardUnits(int64_t units, int m, int r);
// The shapes rank r of m holds: each split parameter's dim cut to its share.
std::vector<ParamSpec> ShardManifest(const std::vector<ParamSpec>& manifest, int m, int r);
// Every rank's parameters (ranks.count maps, SetShard done): split
// parameters sliced (copies on the host, dtype kept), whole ones shared with
// `full`, the ranks that are not local lazy zeros (ShardBuilder). One rank
// returns `full` itself.
StatusOr<std::vector<ParamMap>> ShardParams(const ParamMap& full, const std::vector<ParamSpec>& manifest,
                                            const ModelRanks& ranks);
// Checks `ranks` against `manifest`: as many as ranks()[0].ranks(), each
// rank's shapes as ShardManifest says.
Status CheckShards(const std::vector<ParamMap>& ranks, const std::vector<ParamSpec>& manifest,
                   std::string_view component);

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_PARAMS_H_
