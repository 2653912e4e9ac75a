#include "hlo/attrs.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

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
  if (m < 0 || m > 52 || x < 1 || x > 11) return InvalidArgumentError("bad bit counts");
  return ReducePrecisionAttrs{x, m};
}

// The highest of precision_config's words; HIGHEST > HIGH > DEFAULT
// lexically, and any other word counts as DEFAULT.
kernels::Precision Precision(const Op& op) {
  // A dot algorithm (lax.DotAlgorithmPreset) says it instead: bf16 operands
  // in 1, 3 or 6 passes (BF16_BF16_F32, _X3, _X6: the MXU's DEFAULT, HIGH,
  // HIGHEST), tf32 as 3 passes, f16 as one; f32 or wider operands exactly.
  if (const Attr* alg = op.Find("algorithm"); alg && alg->kind == Attr::Kind::kDict) {
    const Attr* type = alg->Find("lhs_precision_type");
    const Attr* ops = alg->Find("num_primitive_operations");
    const std::string t = type && type->kind == Attr::Kind::kWord ? type->s : "";
    const int64_t n = ops && ops->kind == Attr::Kind::kInt ? ops->i : 1;
    if (t == "bf16") return n >= 6 ? kernels::Precision::kHighest : n >= 3 ? kernels::Precision::kHigh
                                                                            : kernels::Precision::kDefault;
    if (t == "tf32") return kernels::Precision::kHigh;
    if (t == "f32" || t == "f64") return kernels::Precision::kHighest;
    return kernels::Precision::kDefault;
  }
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

StatusOr<AxesAttrs> Axes(const Op& op, std::string_view key) {
  TPUMESH_ASSIGN_OR_RETURN(Dims axes, IntsAttr(op, key));
  return AxesAttrs{std::move(axes)};
}

StatusOr<AxisAttrs> Axis(const Op& op, std::string_view key, std::optional<int64_t> fallback = std::nullopt) {
  TPUMESH_ASSIGN_OR_RETURN(int64_t axis, IntAttr(op, key, fallback));
  return AxisAttrs{axis};
}

StatusOr<SliceAttrs> Slice(const Op& op) {
  SliceAttrs s;
  TPUMESH_ASSIGN_OR_RETURN(s.start, IntsAttr(op, "start_indices"));
  TPUMESH_ASSIGN_OR_RETURN(s.limit, IntsAttr(op, "limit_indices"));
  TPUMESH_ASSIGN_OR_RETURN(s.strides, IntsAttr(op, "strides", Dims(s.start.size(), 1)));
  return s;
}

StatusOr<PadAttrs> Pad(const Op& op, size_t rank) {
  PadAttrs p;
  TPUMESH_ASSIGN_OR_RETURN(p.low, IntsAttr(op, "edge_padding_low"));
  TPUMESH_ASSIGN_OR_RETURN(p.high, IntsAttr(op, "edge_padding_high"));
  TPUMESH_ASSIGN_OR_RETURN(p.interior, IntsAttr(op, "interior_padding", Dims(rank, 0)));
  p.interior_given = op.Find("interior_padding") != nullptr;
  return p;
}

StatusOr<WindowAttrs> Window(const Op& op, size_t rank) {
  WindowAttrs w;
  TPUMESH_ASSIGN_OR_RETURN(w.dims, IntsAttr(op, "window_dimensions"));
  TPUMESH_ASSIGN_OR_RETURN(w.strides, IntsAttr(op, "window_strides", Dims(rank, 1)));
  TPUMESH_ASSIGN_OR_RETURN(w.base_dilations, IntsAttr(op, "base_dilations", Dims(rank, 1)));
  TPUMESH_ASSIGN_OR_RETURN(w.window_dilations, IntsAttr(op, "window_dilations", Dims(rank, 1)));
  TPUMESH_ASSIGN_OR_RETURN(w.padding, IntsAttr(op, "padding", Dims(2 * rank, 0)));
  return w;
}

// select_and_scatter's window: its dimensions are 1s when absent too.
StatusOr<WindowAttrs> SelectWindow(const Op& op, size_t rank) {
  WindowAttrs w;
  TPUMESH_ASSIGN_OR_RETURN(w.dims, IntsAttr(op, "window_dimensions", Dims(rank, 1)));
  TPUMESH_ASSIGN_OR_RETURN(w.strides, IntsAttr(op, "window_strides", Dims(rank, 1)));
  w.base_dilations = w.window_dilations = Dims(rank, 1);
  TPUMESH_ASSIGN_OR_RETURN(w.padding, IntsAttr(op, "padding", Dims(2 * rank, 0)));
  return w;
}

StatusOr<GatherAttrs> Gather(const Op& op) {
  const Attr* dn = op.Find("dimension_numbers");
  GatherAttrs g;
  g.offset_dims = DictInts(dn, "offset_dims");
  g.collapsed_slice_dims = DictInts(dn, "collapsed_slice_dims");
  g.operand_batching_dims = DictInts(dn, "operand_batching_dims");
  g.start_indices_batching_dims = DictInts(dn, "start_indices_batching_dims");
  g.start_index_map = DictInts(dn, "start_index_map");
  g.index_vector_dim = DictInt(dn, "index_vector_dim", 0);  // printed only when not 0
  TPUMESH_ASSIGN_OR_RETURN(g.slice_sizes, IntsAttr(op, "slice_sizes"));
  return g;
}

StatusOr<ScatterAttrs> Scatter(const Op& op) {
  const Attr* dn = op.Find("scatter_dimension_numbers");
  ScatterAttrs s;
  s.update_window_dims = DictInts(dn, "update_window_dims");
  s.inserted_window_dims = DictInts(dn, "inserted_window_dims");
  s.input_batching_dims = DictInts(dn, "input_batching_dims");
  s.scatter_indices_batching_dims = DictInts(dn, "scatter_indices_batching_dims");
  s.scatter_dims_to_operand_dims = DictInts(dn, "scatter_dims_to_operand_dims");
  s.index_vector_dim = DictInt(dn, "index_vector_dim", 0);  // printed only when not 0
  return s;
}

StatusOr<CollectiveAttrs> Collective(const Op& op, Run run) {
  CollectiveAttrs c;
  if (run == Run::kCollectivePermute) {
    const Attr* p = op.Find("source_target_pairs");
    if (!p) return InvalidArgumentError("needs source_target_pairs");
    TPUMESH_ASSIGN_OR_RETURN(c.pairs, p->Ints());
    if (c.pairs.size() % 2) return InvalidArgumentError("source_target_pairs must be pairs");
    return c;
  }
  const Attr* rg = op.Find("replica_groups");
  if (rg && rg->kind == Attr::Kind::kDense && rg->type.dims.size() == 2 && rg->type.num_elements() > 0) {
    TPUMESH_ASSIGN_OR_RETURN(Dims flat, rg->Ints());
    c.dense_groups = true;
    const int64_t per = rg->type.dims[1];
    for (int64_t g = 0; g < rg->type.dims[0]; ++g) {
      std::vector<int64_t> grp;
      for (int64_t j = 0; j < per; ++j) {
        const int64_t d = flat[static_cast<size_t>(g * per + j)];
        if (d >= 0) grp.push_back(d);  // -1: padding of ragged groups
      }
      c.groups.push_back(std::move(grp));
    }
  } else if (rg && rg->kind == Attr::Kind::kList && !rg->list.empty()) {
    for (const Attr& g : rg->list) {
      TPUMESH_ASSIGN_OR_RETURN(Dims grp, g.Ints());
      c.groups.push_back(std::move(grp));
    }
  }
  if (run == Run::kReduceScatter) {
    TPUMESH_ASSIGN_OR_RETURN(c.dim, IntAttr(op, "scatter_dimension"));
  } else if (run == Run::kAllGather) {
    TPUMESH_ASSIGN_OR_RETURN(c.dim, IntAttr(op, "all_gather_dim"));
  } else if (run == Run::kAllToAll) {
    TPUMESH_ASSIGN_OR_RETURN(c.dim, IntAttr(op, "split_dimension"));
    TPUMESH_ASSIGN_OR_RETURN(c.concat_dim, IntAttr(op, "concat_dimension"));
    TPUMESH_ASSIGN_OR_RETURN(c.split_count, IntAttr(op, "split_count"));
  }
  return c;
}

StatusOr<FftAttrs> Fft(const Op& op) {
  if (op.operand_types.size() != 1 || op.result_types.size() != 1) return InvalidArgumentError("needs one operand and one result");
  static constexpr std::pair<std::string_view, kernels::FftType> kTypes[] = {{"FFT", kernels::FftType::kFft},
                                                                             {"IFFT", kernels::FftType::kIfft},
                                                                             {"RFFT", kernels::FftType::kRfft},
                                                                             {"IRFFT", kernels::FftType::kIrfft}};
  const std::string_view word = Word(op, "fft_type");
  const auto* it = std::find_if(std::begin(kTypes), std::end(kTypes), [&](const auto& t) { return t.first == word; });
  if (it == std::end(kTypes)) return InvalidArgumentError("bad fft_type (FFT, IFFT, RFFT or IRFFT)");
  TPUMESH_ASSIGN_OR_RETURN(Dims length, IntsAttr(op, "fft_length"));
  const Type& in = op.operand_types[0];
  const Type& out = op.result_types[0];
  TPUMESH_ASSIGN_OR_RETURN(kernels::FftShape shape, kernels::MakeFftShape(it->second, in.dims, length));
  // Element types: complex in and out, but real in (RFFT) or out (IRFFT),
  // of one precision.
  const bool real_in = it->second == kernels::FftType::kRfft, real_out = it->second == kernels::FftType::kIrfft;
  const ElementType part = PartType(in.element);
  if ((part != ElementType::kF32 && part != ElementType::kF64) || IsComplex(in.element) == real_in ||
      IsComplex(out.element) == real_out || PartType(out.element) != part)
    return InvalidArgumentError(std::string(word) + " does not take " + in.ToString() + " to " + out.ToString());
  // The result's dims: the operand's, the last one fft_length[-1] / 2 + 1
  // (RFFT) or fft_length[-1] (IRFFT).
  Dims want = in.dims;
  if (real_in) want.back() = length.back() / 2 + 1;
  if (real_out) want.back() = length.back();
  if (out.dims != want) {
    Type expected = out;
    expected.dims = want;
    return InvalidArgumentError("the result of " + std::string(word) + " on " + in.ToString() + " is " +
                                expected.ToString() + ", not " + out.ToString());
  }
  return FftAttrs{std::move(shape)};
}

// The generic form's flags: left_side, lower, unit_diagonal, transpose_a.
StatusOr<TriangularSolveAttrs> TriangularSolve(const Op& op) {
  const auto& in = op.operand_types;
  if (in.size() != 2 || op.result_types.size() != 1) return InvalidArgumentError("needs two operands and one result");
  bool flag[3] = {false, false, false};
  const char* kFlags[] = {"left_side", "lower", "unit_diagonal"};
  for (int k = 0; k < 3; ++k) {
    const Attr* a = op.Find(kFlags[k]);
    if (!a || a->kind != Attr::Kind::kBool) return InvalidArgumentError(std::string("needs ") + kFlags[k] + " = true or false");
    flag[k] = a->i != 0;
  }
  const std::string_view t = Word(op, "transpose_a");
  kernels::TriangularTranspose transpose;
  if (t == "NO_TRANSPOSE") transpose = kernels::TriangularTranspose::kNoTranspose;
  else if (t == "TRANSPOSE") transpose = kernels::TriangularTranspose::kTranspose;
  else if (t == "ADJOINT") transpose = kernels::TriangularTranspose::kAdjoint;
  else return InvalidArgumentError("bad transpose_a (NO_TRANSPOSE, TRANSPOSE or ADJOINT)");
  const ElementType e = in[0].element;
  if (in[1].element != e || op.result_types[0] != in[1] ||
      (e != ElementType::kF32 && e != ElementType::kF64 && !IsComplex(e)))
    return InvalidArgumentError("takes a and b of one type of f32, f64, complex<f32> or complex<f64>, and gives b's type");
  TPUMESH_ASSIGN_OR_RETURN(kernels::TriangularSolveShape shape,
                           kernels::MakeTriangularSolveShape(in[0].dims, in[1].dims, flag[0], flag[1], flag[2], transpose));
  return TriangularSolveAttrs{shape};
}

// lower: a bool, false when absent; one operand of f32, f64 or complex, and
// a result of its type.
StatusOr<CholeskyAttrs> Cholesky(const Op& op) {
  const auto& in = op.operand_types;
  if (in.size() != 1 || op.result_types.size() != 1) return InvalidArgumentError("needs one operand and one result");
  bool lower = false;
  if (const Attr* a = op.Find("lower")) {
    if (a->kind != Attr::Kind::kBool) return InvalidArgumentError("needs lower = true or false");
    lower = a->i != 0;
  }
  const ElementType e = in[0].element;
  if (op.result_types[0] != in[0] || (e != ElementType::kF32 && e != ElementType::kF64 && !IsComplex(e)))
    return InvalidArgumentError("takes a of f32, f64, complex<f32> or complex<f64>, and gives a's type");
  TPUMESH_ASSIGN_OR_RETURN(kernels::CholeskyShape shape, kernels::MakeCholeskyShape(in[0].dims, lower));
  return CholeskyAttrs{shape};
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
  } else {
    const size_t rank = in.empty() ? 0 : in[0].dims.size();
    switch (e->run) {
      case Run::kBroadcastInDim: Set(*a, Axes(op, "broadcast_dimensions")); break;
      case Run::kTranspose: Set(*a, Axes(op, "permutation")); break;
      case Run::kReverse:
      case Run::kReduce: Set(*a, Axes(op, "dimensions")); break;
      case Run::kIota: Set(*a, Axis(op, "iota_dimension")); break;
      case Run::kConcatenate: Set(*a, Axis(op, "dimension")); break;
      case Run::kSort: Set(*a, Axis(op, "dimension", -1)); break;
      case Run::kTopK: Set(*a, Axis(op, "k")); break;
      case Run::kSlice: Set(*a, Slice(op)); break;
      case Run::kPad: Set(*a, Pad(op, rank)); break;
      case Run::kReduceWindow: Set(*a, Window(op, rank)); break;
      case Run::kSelectAndScatter: Set(*a, SelectWindow(op, rank)); break;
      case Run::kGather: Set(*a, Gather(op)); break;
      case Run::kScatter:
        if (!in.empty()) Set(*a, Scatter(op));
        break;
      case Run::kAllReduce:
      case Run::kAllGather:
      case Run::kReduceScatter:
      case Run::kCollectivePermute:
      case Run::kAllToAll: Set(*a, Collective(op, e->run)); break;
      case Run::kFft: Set(*a, Fft(op)); break;
      case Run::kTriangularSolve: Set(*a, TriangularSolve(op)); break;
      case Run::kCholesky: Set(*a, Cholesky(op)); break;
      default: break;  // no attributes read where it runs, or still read by key
    }
  }
  return a;
}

}  // namespace tpumesh::hlo
