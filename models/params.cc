#include "models/params.h"

#include <algorithm>
#include <cstring>
#include <optional>

namespace tpumesh::models {

ParamMap::ParamMap(std::map<std::string, mesh::Array> params) : params_(std::move(params)) {
  for (const auto& [name, a] : params_)
    if (a.size_bytes() > 0) names_.emplace(a.raw(), name);
}

const std::string* ParamMap::NameOf(const mesh::Array& a) const {
  if (a.size_bytes() == 0) return nullptr;
  auto it = names_.find(a.raw());
  return it == names_.end() ? nullptr : &it->second;
}

Ctx Ctx::WithParams(const ParamMap& p) const {
  Ctx c = WithPacks(p.packs());
  c.params = &p;
  return c;
}

bool OnlyPacked(const std::string& name, const mesh::Shape& shape) {
  // The tables read by index: CLIP's embeddings, T5's token table ("shared")
  // and its relative position bias.
  auto ends_with = [&](std::string_view tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return (shape.size() == 2 || shape.size() == 4) && name.find("embedding.weight") == std::string::npos &&
         name != "shared.weight" && !ends_with("relative_attention_bias.weight");
}

bool MayHoldBf16(const std::string& name, const mesh::Shape& shape) {
  auto ends_with = [&](std::string_view tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return OnlyPacked(name, shape) || (shape.size() == 2 && (ends_with("embeddings.token_embedding.weight") ||
                                                            ends_with("embeddings.position_embedding.weight") ||
                                                            name == "shared.weight"));
}

Status ParamMap::Check(const std::vector<ParamSpec>& manifest, std::string_view component) const {
  for (const ParamSpec& p : manifest) {
    auto it = params_.find(p.name);
    if (it == params_.end())
      return NotFoundError(std::string(component) + ": missing tensor " + p.name + " " +
                           mesh::ShapeToString(p.shape));
    if (it->second.shape() != p.shape)
      return InvalidArgumentError(std::string(component) + ": tensor " + p.name + " has shape " +
                                  mesh::ShapeToString(it->second.shape()) + " but the config needs " +
                                  mesh::ShapeToString(p.shape));
    const mesh::DType d = it->second.dtype();
    if (d != mesh::DType::kF32 && !(d == mesh::DType::kBF16 && MayHoldBf16(p.name, p.shape)))
      return InvalidArgumentError(std::string(component) + ": tensor " + p.name + " is " +
                                  it->second.ToString() + ", expected f32");
  }
  return OkStatus();
}

Status ParamMap::PackMatmulWeights(const Ctx& ctx, const std::function<bool(const std::string&)>& include) const {
  if (ctx.dry_run || ctx.packs == nullptr) return OkStatus();
  std::vector<const mesh::Array*> weights, releasable;
  for (const auto& [name, a] : params_) {
    if ((a.rank() == 2 || a.rank() == 4) && (!include || include(name))) {
      // Only the weights that reach the computation through their packs
      // alone may give their loaded copy back.
      (ctx.release_packed_weights && OnlyPacked(name, a.shape()) ? releasable : weights).push_back(&a);
    }
  }
  TPUMESH_RETURN_IF_ERROR(ctx.packs->PackAll(weights, ctx.precision, ctx.threads));
  return ctx.packs->PackAll(releasable, ctx.precision, ctx.threads, /*release=*/true);
}

int64_t ParamMap::GiveBack() const {
  int64_t freed = static_cast<int64_t>(packs_->bytes());
  packs_->Drop();
  for (const auto& [name, a] : params_) freed += a.ReleaseHostPages();
  return freed;
}

void ParamMap::SetShard(const std::vector<ParamSpec>& manifest, int ranks, int rank) {
  rank_ = rank;
  ranks_ = ranks;
  split_.clear();
  for (const ParamSpec& p : manifest)
    if (p.split.SplitsOver(ranks)) split_[p.name] = ShardUnits(p.split.units, ranks, rank);
}

std::pair<int64_t, int64_t> ShardUnits(int64_t units, int m, int r) {
  return {units * r / m, units * (r + 1) / m};
}

std::vector<ParamSpec> ShardManifest(const std::vector<ParamSpec>& manifest, int m, int r) {
  std::vector<ParamSpec> out = manifest;
  for (ParamSpec& p : out) {
    if (!p.split.SplitsOver(m)) continue;
    const auto [u0, u1] = ShardUnits(p.split.units, m, r);
    const int64_t unit = p.shape[p.split.dim] / (p.split.parts * p.split.units);
    p.shape[p.split.dim] = p.split.parts * (u1 - u0) * unit;
  }
  return out;
}

bool ModelRanks::all_local() const {
  for (int r = 0; r < count; ++r)
    if (!is_local(r)) return false;
  return true;
}

namespace {

// Rank r of m's share of `a` along p.split: copies of the runs of each
// part's units [u0, u1).
mesh::Array ShareOf(const ParamSpec& p, const mesh::Array& a, int m, int r) {
  const ParamSplit& s = p.split;
  const int64_t dim_size = a.dim(s.dim), part = dim_size / s.parts, unit = part / s.units;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < s.dim; ++i) outer *= a.dim(i);
  for (int i = s.dim + 1; i < a.rank(); ++i) inner *= a.dim(i);
  const size_t elem = mesh::DTypeSize(a.dtype());
  const std::byte* src = static_cast<const std::byte*>(a.raw());
  const auto [u0, u1] = ShardUnits(s.units, m, r);
  mesh::Shape shape = a.shape();
  shape[s.dim] = s.parts * (u1 - u0) * unit;
  mesh::Array out = mesh::Array::Host(a.dtype(), shape);
  std::byte* dst = static_cast<std::byte*>(out.mutable_raw());
  const size_t run = static_cast<size_t>((u1 - u0) * unit * inner) * elem;
  for (int64_t o = 0; o < outer; ++o)
    for (int q = 0; q < s.parts; ++q) {
      std::memcpy(dst, src + static_cast<size_t>((o * dim_size + q * part + u0 * unit) * inner) * elem, run);
      dst += run;
    }
  return out;
}

}  // namespace

ShardBuilder::ShardBuilder(std::vector<ParamSpec> manifest, ModelRanks ranks)
    : manifest_(std::move(manifest)), ranks_(std::move(ranks)), maps_(std::max(1, ranks_.count)) {
  for (const ParamSpec& p : manifest_) by_name_.emplace(p.name, &p);
}

void ShardBuilder::Add(const std::string& name, const mesh::Array& whole) {
  const int m = ranks_.count;
  const ParamSpec& p = *by_name_.at(name);
  if (m <= 1 || !p.split.SplitsOver(m)) {
    std::optional<mesh::Array> zeros;  // one array of lazy zeros for every other rank
    for (int r = 0; r < static_cast<int>(maps_.size()); ++r) {
      if (ranks_.is_local(r)) {
        maps_[r].emplace(name, whole);
        continue;
      }
      if (!zeros) zeros = mesh::Array::LazyZeros(whole.dtype(), whole.shape());
      maps_[r].emplace(name, *zeros);
    }
    return;
  }
  for (int r = 0; r < m; ++r) {
    if (ranks_.is_local(r)) {
      maps_[r].emplace(name, ShareOf(p, whole, m, r));
      continue;
    }
    const auto [u0, u1] = ShardUnits(p.split.units, m, r);
    mesh::Shape shape = whole.shape();
    shape[p.split.dim] = p.split.parts * (u1 - u0) * (whole.dim(p.split.dim) / (p.split.parts * p.split.units));
    maps_[r].emplace(name, mesh::Array::LazyZeros(whole.dtype(), shape));
  }
}

std::vector<ParamMap> ShardBuilder::Finish() && {
  std::vector<ParamMap> ranks;
  const int m = static_cast<int>(maps_.size());
  for (int r = 0; r < m; ++r) {
    ranks.emplace_back(std::move(maps_[r]));
    if (m > 1) ranks.back().SetShard(manifest_, m, r);
    if (r > 0) ranks.back().SharePacks(ranks.front());
  }
  return ranks;
}

StatusOr<std::vector<ParamMap>> ShardParams(const ParamMap& full, const std::vector<ParamSpec>& manifest,
                                            const ModelRanks& ranks) {
  if (ranks.count <= 1) return std::vector<ParamMap>{full};
  ShardBuilder b(manifest, ranks);
  for (const ParamSpec& p : manifest) b.Add(p.name, full[p.name]);
  return std::move(b).Finish();
}

Status CheckShards(const std::vector<ParamMap>& ranks, const std::vector<ParamSpec>& manifest,
                   std::string_view component) {
  if (ranks.empty()) return InvalidArgumentError(std::string(component) + ": no parameters");
  const int m = static_cast<int>(ranks.size());
  for (int r = 0; r < m; ++r) {
    if (ranks[r].ranks() != m || ranks[r].rank() != r)
      return InternalError(std::string(component) + ": parameter map " + std::to_string(r) + " is rank " +
                           std::to_string(ranks[r].rank()) + " of " + std::to_string(ranks[r].ranks()));
    const std::string name =
        std::string(component) + (m == 1 ? "" : " (model rank " + std::to_string(r) + " of " + std::to_string(m) + ")");
    TPUMESH_RETURN_IF_ERROR(ranks[r].Check(m == 1 ? manifest : ShardManifest(manifest, m, r), name));
  }
  return OkStatus();
}

int64_t ParamMap::bytes() const {
  int64_t b = 0;
  for (const auto& [name, a] : params_) b += a.size_bytes();
  return b;
}

}  // namespace tpumesh::models
