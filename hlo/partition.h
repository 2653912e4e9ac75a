// A jit program priced as XLA's SPMD partitioner splits it. jax.jit with
// NamedShardings writes, on @main's arguments and results and in sharding
// constraints, how each global array is split over the devices; XLA then
// gives every device only its piece of each op (a batch split over 8
// devices: each device's matmuls are 1/8 of the program's) and inserts the
// collectives an op needs when a split cannot pass through it.
//
// The interpreter still computes every value whole, so the outputs never
// depend on this: a Split only says how a value would be laid out, and each
// op is priced on its local shapes. Propagate is the per-op rule, a subset
// of XLA's: splits pass through elementwise ops, broadcasts, reshapes that
// keep a split dimension's prefix, transposes, dot_general (batch and free
// dimensions; split contracting dimensions give partial sums, summed by an
// all-reduce), convolution (batch and output features; split input features
// are summed the same way), reductions (a reduced split dimension is an
// all-reduce), slices, pads, concatenations and windows that leave the split
// dimension whole, dynamic slices, sort, top_k and embedding gathers
// (indices split on a batch dimension). Anywhere else the split operand is
// all-gathered first, as the partitioner does for an op it cannot split.
// hlo/'s internal header.
//
// Contract: Propagate never fails; what it cannot split it gathers. A
// result's Split always divides its type evenly.
#ifndef TPUMESH_HLO_PARTITION_H_
#define TPUMESH_HLO_PARTITION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hlo/sharding.h"
#include "hlo/module.h"

namespace tpumesh::hlo {

// The devices that hold the pieces of one split dimension, in piece order
// (this device among them).
using DeviceGroup = std::shared_ptr<const std::vector<int>>;
bool SameGroup(const DeviceGroup& a, const DeviceGroup& b);

struct DimSplit {
  int64_t ways = 1;
  DeviceGroup group;  // null when ways == 1
  bool split() const { return ways > 1; }
  bool operator==(const DimSplit& o) const { return ways == o.ways && (ways == 1 || SameGroup(group, o.group)); }
};

struct Split {
  std::vector<DimSplit> dims;  // one per dimension; empty: replicated

  bool replicated() const;
  DimSplit dim(size_t k) const { return k < dims.size() ? dims[k] : DimSplit{}; }
  // The piece one device holds: every split dimension divided by its ways.
  Type Local(const Type& global) const;
  // Every device that holds a piece, with this one (sorted): the group of an
  // all-gather that makes the value whole.
  std::vector<int> Members() const;
  bool operator==(const Split& o) const;
};

// How `device` holds an array of `dims` under `s`; a dimension that does not
// split evenly, or whose pieces do not map onto one device each, is left
// whole.
Split SplitOf(const Sharding& s, int device, const std::vector<int64_t>& dims);

struct Partitioned {
  std::vector<Split> results;            // one per result
  std::vector<size_t> gathered;          // operands all-gathered before the op
  // Per operand, the piece each device reads: its own split, or for a whole
  // operand beside split ones (a broadcast constant added to a split
  // activation) the piece that lines up with theirs, as the partitioner
  // slices it locally; empty for a gathered operand.
  std::vector<Split> read;
  std::vector<DeviceGroup> reduced_over;  // the results are partial sums over these groups
};

// The rule for one op (not control flow or sharding ops: the interpreter
// follows those itself). `in` holds the operands' splits, in operand order.
Partitioned Propagate(const Op& op, const std::vector<Type>& in_types, const std::vector<Split>& in,
                      const std::vector<Type>& out_types);

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_PARTITION_H_
