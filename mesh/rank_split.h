// RankSplit: how a collective whose group spans several ranks divides its
// data between the ranks, so that each rank receives only what its devices
// need and does only its share of a reduction. The rendezvous
// (collective_hub.cc) sends and places the bytes by it, the collectives
// (collectives.cc) compute from them by it: both derive the layout from the
// call and the mesh, so sender and receiver agree and no layout travels.
//
// Contract (R = ranks().size(), n = group size, k = a member's group index):
// - ranks(): the distinct ranks hosting members, ascending. A group inside
//   one rank (R == 1) sends nothing: Slices() is empty.
// - psum, pmean: a reduce-scatter then an all-gather between ranks. Rank
//   ranks()[i] owns the elements OwnedElements(ranks()[i]) = [count*i/R,
//   count*(i+1)/R); every member sends each other owning rank that range of
//   its input; the owner's members sum it from all n inputs in group order
//   (the same bits as one process), and the owned sums then travel to the
//   other ranks of the group in a second exchange (collective_hub.h).
// - psum_scatter: member k keeps the sum of block k of the input viewed as
//   [outer, n, chunk]; each member sends rank `to` only the blocks of `to`'s
//   members, as [outer, Q, chunk] (Q = members on `to`, in group order).
// - all_gather: the whole input to every other rank hosting a member.
// - ppermute: the whole input to the rank of its destination, if any.
// - all_to_all: to rank `to`, the split-axis chunks for `to`'s members, each
//   packed row-major as a box of the input's shape with split axis extent
//   c (c = size/n tiled, 1 untiled), in group order.
// - Slices(k, to): the byte ranges of member k's input that rank `to`
//   receives, in the order they are concatenated on the wire; empty when
//   `to` hosts member k or needs nothing from it.
// The call (and its shape) must outlive the RankSplit.
#ifndef TPUMESH_MESH_RANK_SPLIT_H_
#define TPUMESH_MESH_RANK_SPLIT_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "mesh/collective_hub.h"
#include "mesh/mesh.h"

namespace tpumesh::mesh {

struct ByteRange {
  int64_t offset = 0;
  int64_t size = 0;
};

class RankSplit {
 public:
  // `group`: Mesh::Group of a participant for call.axes.
  RankSplit(const Mesh& mesh, const CollectiveCall& call, std::vector<int> group);

  const std::vector<int>& group() const { return group_; }
  const std::vector<int>& ranks() const { return ranks_; }
  bool spans_ranks() const { return ranks_.size() > 1; }
  int rank_of_member(int k) const { return member_rank_[k]; }
  // Group indices of the members on `rank`, in group order.
  std::vector<int> MembersOn(int rank) const;
  // Member k's position among the members on its rank.
  int PositionOnRank(int k) const;
  // psum/pmean: the elements [begin, end) rank `rank` reduces.
  std::pair<int64_t, int64_t> OwnedElements(int rank) const;

  std::vector<ByteRange> Slices(int k, int to) const;
  int64_t SliceBytes(int k, int to) const;

  // all_to_all: a member's split-axis chunk as a box of the input (the
  // input's shape, split axis extent c), and c.
  Shape AllToAllBox() const;

 private:
  // Appends the rows of `box` at element `origin` of the input (row-major)
  // to `out`, merging runs that touch.
  void AppendBox(int64_t origin, const Shape& box, std::vector<ByteRange>* out) const;

  const CollectiveCall& call_;
  std::vector<int> group_;
  std::vector<int> member_rank_;  // by group index
  std::vector<int> ranks_;
  int64_t elem_;
};

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_RANK_SPLIT_H_
