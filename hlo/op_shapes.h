// How StableHLO ops lay out their operands, read from their attributes:
// integer attributes, dot_general's and convolution's dimension numbers.
// Read once per op into its typed attributes (hlo/attrs.h), and by the
// partitioner's pricing (hlo/partition.h) on local types. hlo/'s internal header.
//
// Contract: the getters check the numbers against the operand types and
// return InvalidArgument naming what does not fit; they never index out of
// range.
#ifndef TPUMESH_HLO_OP_SHAPES_H_
#define TPUMESH_HLO_OP_SHAPES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "hlo/module.h"

namespace tpumesh::hlo {

using Dims = std::vector<int64_t>;

std::string TypesToString(const std::vector<Type>& ts);
// Row-major strides of a shape.
Dims Strides(const Dims& d);
// An integer list attribute, or `fallback` when absent.
StatusOr<Dims> IntsAttr(const Op& op, std::string_view key, std::optional<Dims> fallback = std::nullopt);
StatusOr<int64_t> IntAttr(const Op& op, std::string_view key, std::optional<int64_t> fallback = std::nullopt);
// A dictionary attribute's integer list / integer entry (empty / fallback when absent).
Dims DictInts(const Attr* d, std::string_view key);
int64_t DictInt(const Attr* d, std::string_view key, int64_t fallback = 0);

// dot_general (or dot): the operands' batch, contracting and free
// dimensions, each list in order. The result is [batch..., lhs free...,
// rhs free...].
struct DotDims {
  Dims lb, rb, lc, rc, lf, rf;  // batch, contracting, free (in order)
};
StatusOr<DotDims> GetDotDims(const Op& op, const Type& l, const Type& r);
// The product of t's dims at `ds`.
int64_t Prod(const Type& t, const Dims& ds);

// convolution: the dimension orders and the window, checked against the
// operand and result types.
//
// Its groups, as the StableHLO spec defines them: feature_group_count
// (`groups`) splits the input features and the output features into as
// many groups, group g's outputs from group g's inputs; batch_group_count
// (`batch_groups`) splits the input batch into contiguous groups and the
// output features likewise, group g's outputs from group g's images (the
// result's batch is batch / batch_groups). At most one of them exceeds 1.
struct ConvShape {
  Dims in_order, k_order, out_order;  // permutations into N,S..,C / S..,I,O / N,S..,O
  int64_t batch = 0, cin = 0, cout = 0, groups = 1, batch_groups = 1;  // batch: the input's
  Dims in_sp, k_sp, out_sp, stride, pad_lo, pad_hi, lhs_dil, rhs_dil;
  std::vector<bool> reverse;

  int64_t out_batch() const { return batch / batch_groups; }
  // The groups the op computes separately (one of groups, batch_groups is
  // 1), and each group's input and output features.
  int64_t all_groups() const { return groups * batch_groups; }
  int64_t group_in() const { return cin / groups; }
  int64_t group_out() const { return cout / all_groups(); }
};
StatusOr<ConvShape> GetConvShape(const Op& op, const Type& l, const Type& r, const Type& o);
// What the interpreter computes of a convolution it can price: float
// operands (Unimplemented otherwise). Verify asks it
// of every convolution before `run` starts, and the run asks it again.
Status ConvolutionComputable(const ConvShape& s, const Type& l, const Type& r);

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_OP_SHAPES_H_
