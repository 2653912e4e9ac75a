#include "hlo/attrs.h"

#include <string>

#include "hlo/ops.h"

namespace tpumesh::hlo {
namespace {

// An attribute's word (#stablehlo<comparison_direction GT> -> "GT"), or "".
std::string_view Word(const Op& op, std::string_view key) {
  const Attr* a = op.Find(key);
  return a && a->kind == Attr::Kind::kWord ? std::string_view(a->s) : std::string_view();
}

StatusOr<CompareAttrs> Compare(const Op& op) {
  static constexpr std::pair<std::string_view, CompareDirection> kDirections[] = {
      {"EQ", CompareDirection::kEq}, {"NE", CompareDirection::kNe}, {"LT", CompareDirection::kLt},
      {"LE", CompareDirection::kLe}, {"GT", CompareDirection::kGt}, {"GE", CompareDirection::kGe}};
  const std::string_view dir = Word(op, "comparison_direction");
  for (const auto& [word, d] : kDirections)
    if (dir == word) return CompareAttrs{d, Word(op, "compare_type") == "TOTALORDER"};
  return InvalidArgumentError("bad comparison_direction");
}

StatusOr<ReducePrecisionAttrs> ReducePrecision(const Op& op) {
  const Attr* eb = op.Find("exponent_bits");
  const Attr* mb = op.Find("mantissa_bits");
  if (!eb || !mb || eb->kind != Attr::Kind::kInt || mb->kind != Attr::Kind::kInt)
    return InvalidArgumentError("needs exponent_bits and mantissa_bits");
  const int m = static_cast<int>(mb->i), x = static_cast<int>(eb->i);
  if (m < 0 || m > 23 || x < 1 || x > 8) return InvalidArgumentError("bad bit counts");
  return ReducePrecisionAttrs{x, m};
}

// The highest of precision_config's words; HIGHEST > HIGH > DEFAULT
// lexically, and any other word counts as DEFAULT.
kernels::Precision Precision(const Op& op) {
  const Attr* p = op.Find("precision_config");
  std::string w = "DEFAULT";
  if (p && p->kind == Attr::Kind::kList)
    for (const Attr& a : p->list)
      if (a.kind == Attr::Kind::kWord && a.s > w) w = a.s;
  if (w == "HIGHEST") return kernels::Precision::kHighest;
  if (w == "HIGH") return kernels::Precision::kHigh;
  return kernels::Precision::kDefault;
}

template <typename T>
void Set(OpAttrs& a, StatusOr<T> v) {
  if (v.ok()) a.value = *std::move(v);
  else a.status = v.status();
}

}  // namespace

std::shared_ptr<const OpAttrs> ResolveAttrs(const Op& op) {
  auto a = std::make_shared<OpAttrs>();
  const OpEntry* e = EntryOf(op);
  if (!e) return a;
  const auto& in = op.operand_types;
  const auto& out = op.result_types;
  if (e->scalar.kind == ScalarFn::Kind::kCompare) {
    Set(*a, Compare(op));
  } else if (e->scalar.kind == ScalarFn::Kind::kReducePrecision) {
    Set(*a, ReducePrecision(op));
  } else if (e->run == Run::kDot && in.size() == 2) {
    a->precision = Precision(op);
    auto d = GetDotDims(op, in[0], in[1]);
    if (d.ok()) a->value = DotAttrs{*std::move(d)};
    else a->status = d.status();
  } else if (e->run == Run::kConvolution && in.size() == 2 && out.size() == 1) {
    a->precision = Precision(op);
    auto s = GetConvShape(op, in[0], in[1], out[0]);
    if (s.ok()) a->value = ConvAttrs{*std::move(s)};
    else a->status = s.status();
  }
  return a;
}

}  // namespace tpumesh::hlo
