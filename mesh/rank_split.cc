#include "mesh/rank_split.h"

#include <algorithm>

namespace tpumesh::mesh {
namespace {

void Append(int64_t offset, int64_t size, std::vector<ByteRange>* out) {
  if (size <= 0) return;
  if (!out->empty() && out->back().offset + out->back().size == offset) {
    out->back().size += size;
    return;
  }
  out->push_back({offset, size});
}

int64_t Prod(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

}  // namespace

RankSplit::RankSplit(const Mesh& mesh, const CollectiveCall& call, std::vector<int> group)
    : call_(call), group_(std::move(group)), elem_(static_cast<int64_t>(DTypeSize(call.dtype))) {
  member_rank_.reserve(group_.size());
  for (int d : group_) member_rank_.push_back(mesh.rank_of(d));
  ranks_ = member_rank_;
  std::sort(ranks_.begin(), ranks_.end());
  ranks_.erase(std::unique(ranks_.begin(), ranks_.end()), ranks_.end());
}

std::vector<int> RankSplit::MembersOn(int rank) const {
  std::vector<int> m;
  for (int k = 0; k < static_cast<int>(group_.size()); ++k)
    if (member_rank_[k] == rank) m.push_back(k);
  return m;
}

int RankSplit::PositionOnRank(int k) const {
  int q = 0;
  for (int i = 0; i < k; ++i) q += member_rank_[i] == member_rank_[k];
  return q;
}

std::pair<int64_t, int64_t> RankSplit::OwnedElements(int rank) const {
  const int64_t count = NumElements(call_.shape);
  const auto it = std::find(ranks_.begin(), ranks_.end(), rank);
  if (it == ranks_.end()) return {0, 0};
  const int64_t i = it - ranks_.begin(), r = static_cast<int64_t>(ranks_.size());
  return {count * i / r, count * (i + 1) / r};
}

Shape RankSplit::AllToAllBox() const {
  Shape box = call_.shape;
  box[call_.axis] = call_.tiled ? box[call_.axis] / static_cast<int64_t>(group_.size()) : 1;
  return box;
}

void RankSplit::AppendBox(int64_t origin, const Shape& box, std::vector<ByteRange>* out) const {
  const Shape& s = call_.shape;
  const int rank = static_cast<int>(s.size());
  if (NumElements(box) == 0) return;
  // Rows of the box's last dimension are contiguous in the input.
  const int64_t run = box[rank - 1];
  std::vector<int64_t> strides(rank, 1);
  for (int i = rank - 2; i >= 0; --i) strides[i] = strides[i + 1] * s[i + 1];
  std::vector<int64_t> idx(rank, 0);
  const int64_t rows = NumElements(box) / run;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t e = origin;
    for (int a = 0; a < rank - 1; ++a) e += idx[a] * strides[a];
    Append(e * elem_, run * elem_, out);
    for (int a = rank - 2; a >= 0; --a) {
      if (++idx[a] < box[a]) break;
      idx[a] = 0;
    }
  }
}

std::vector<ByteRange> RankSplit::Slices(int k, int to) const {
  std::vector<ByteRange> out;
  if (!spans_ranks() || member_rank_[k] == to) return out;
  const int n = static_cast<int>(group_.size());
  const std::vector<int> members = MembersOn(to);
  if (members.empty()) return out;
  const Shape& s = call_.shape;
  switch (call_.kind) {
    case CollectiveKind::kPsum:
    case CollectiveKind::kPmean: {
      const auto [begin, end] = OwnedElements(to);
      Append(begin * elem_, (end - begin) * elem_, &out);
      break;
    }
    case CollectiveKind::kPsumScatter: {
      // [outer, n, chunk]: the blocks of `to`'s members, row by row.
      const int64_t outer = Prod(s, 0, call_.axis);
      const int64_t chunk = Prod(s, call_.axis, s.size()) / n;
      for (int64_t o = 0; o < outer; ++o)
        for (int j : members) Append((o * n + j) * chunk * elem_, chunk * elem_, &out);
      break;
    }
    case CollectiveKind::kAllGather:
      Append(0, NumElements(s) * elem_, &out);
      break;
    case CollectiveKind::kPpermute:
      for (const auto& [src, dst] : call_.perm)
        if (src == k && member_rank_[dst] == to) Append(0, NumElements(s) * elem_, &out);
      break;
    case CollectiveKind::kAllToAll: {
      const Shape box = AllToAllBox();
      const int64_t step = Prod(s, call_.axis + 1, s.size()) * box[call_.axis];
      for (int j : members) AppendBox(j * step, box, &out);
      break;
    }
  }
  return out;
}

int64_t RankSplit::SliceBytes(int k, int to) const {
  int64_t n = 0;
  for (const ByteRange& r : Slices(k, to)) n += r.size;
  return n;
}

}  // namespace tpumesh::mesh
