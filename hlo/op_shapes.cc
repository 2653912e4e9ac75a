#include "hlo/op_shapes.h"

#include <algorithm>

namespace tpumesh::hlo {

std::string TypesToString(const std::vector<Type>& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].ToString();
  return s;
}

Dims Strides(const Dims& d) {
  Dims s(d.size(), 1);
  for (int i = static_cast<int>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}

// Integer list attribute, or `fallback` when absent.
StatusOr<Dims> IntsAttr(const Op& op, std::string_view key, std::optional<Dims> fallback) {
  const Attr* a = op.Find(key);
  if (!a) {
    if (fallback) return *fallback;
    return InvalidArgumentError("needs attribute " + std::string(key));
  }
  auto v = a->Ints();
  if (!v.ok()) return InvalidArgumentError("attribute " + std::string(key) + " is not a list of integers");
  return *v;
}
StatusOr<int64_t> IntAttr(const Op& op, std::string_view key, std::optional<int64_t> fallback) {
  const Attr* a = op.Find(key);
  if (!a) {
    if (fallback) return *fallback;
    return InvalidArgumentError("needs attribute " + std::string(key));
  }
  if (a->kind == Attr::Kind::kInt) return a->i;
  auto v = a->Ints();
  if (v.ok() && v->size() == 1) return (*v)[0];
  return InvalidArgumentError("attribute " + std::string(key) + " is not an integer");
}
Dims DictInts(const Attr* d, std::string_view key) {
  if (!d) return {};
  const Attr* a = d->Find(key);
  if (!a) return {};
  auto v = a->Ints();
  return v.ok() ? *v : Dims{};
}
int64_t DictInt(const Attr* d, std::string_view key, int64_t fallback) {
  if (!d) return fallback;
  const Attr* a = d->Find(key);
  return a && a->kind == Attr::Kind::kInt ? a->i : fallback;
}

StatusOr<DotDims> GetDotDims(const Op& op, const Type& l, const Type& r) {
  DotDims d;
  if (op.name == "stablehlo.dot") {
    if (l.dims.size() > 2 || r.dims.size() > 2 || l.dims.empty() || r.dims.empty())
      return InvalidArgumentError("stablehlo.dot takes vectors and matrices");
    d.lc = {static_cast<int64_t>(l.dims.size()) - 1};
    d.rc = {0};
  } else {
    const Attr* dn = op.Find("dot_dimension_numbers");
    d.lb = DictInts(dn, "lhs_batching_dimensions");
    d.rb = DictInts(dn, "rhs_batching_dimensions");
    d.lc = DictInts(dn, "lhs_contracting_dimensions");
    d.rc = DictInts(dn, "rhs_contracting_dimensions");
  }
  if (d.lb.size() != d.rb.size() || d.lc.size() != d.rc.size())
    return InvalidArgumentError("batching or contracting dimension lists differ in length");
  auto check = [](const Dims& list, size_t rank) {
    std::vector<bool> seen(rank, false);
    for (int64_t k : list) {
      if (k < 0 || k >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(k)]) return false;
      seen[static_cast<size_t>(k)] = true;
    }
    return true;
  };
  Dims la = d.lb, ra = d.rb;
  la.insert(la.end(), d.lc.begin(), d.lc.end());
  ra.insert(ra.end(), d.rc.begin(), d.rc.end());
  if (!check(la, l.dims.size()) || !check(ra, r.dims.size())) return InvalidArgumentError("bad dimension numbers");
  for (size_t k = 0; k < d.lb.size(); ++k)
    if (l.dims[static_cast<size_t>(d.lb[k])] != r.dims[static_cast<size_t>(d.rb[k])])
      return InvalidArgumentError("batch dimensions differ: " + l.ToString() + " x " + r.ToString());
  for (size_t k = 0; k < d.lc.size(); ++k)
    if (l.dims[static_cast<size_t>(d.lc[k])] != r.dims[static_cast<size_t>(d.rc[k])])
      return InvalidArgumentError("contracting dimensions differ: " + l.ToString() + " x " + r.ToString());
  for (int64_t k = 0; k < static_cast<int64_t>(l.dims.size()); ++k)
    if (std::find(la.begin(), la.end(), k) == la.end()) d.lf.push_back(k);
  for (int64_t k = 0; k < static_cast<int64_t>(r.dims.size()); ++k)
    if (std::find(ra.begin(), ra.end(), k) == ra.end()) d.rf.push_back(k);
  return d;
}
int64_t Prod(const Type& t, const Dims& ds) {
  int64_t p = 1;
  for (int64_t k : ds) p *= t.dims[static_cast<size_t>(k)];
  return p;
}

StatusOr<ConvShape> GetConvShape(const Op& op, const Type& l, const Type& r, const Type& o) {
  const Attr* dn = op.Find("dimension_numbers");
  if (!dn || dn->kind != Attr::Kind::kDict) return InvalidArgumentError("needs dimension_numbers");
  ConvShape s;
  const Dims isp = DictInts(dn, "input_spatial_dimensions"), ksp = DictInts(dn, "kernel_spatial_dimensions"),
             osp = DictInts(dn, "output_spatial_dimensions");
  const size_t ns = isp.size();
  if (ksp.size() != ns || osp.size() != ns || l.dims.size() != ns + 2 || r.dims.size() != ns + 2 ||
      o.dims.size() != ns + 2)
    return InvalidArgumentError("ranks do not match the dimension numbers");
  s.in_order = {DictInt(dn, "input_batch_dimension")};
  s.in_order.insert(s.in_order.end(), isp.begin(), isp.end());
  s.in_order.push_back(DictInt(dn, "input_feature_dimension"));
  s.k_order = ksp;
  s.k_order.push_back(DictInt(dn, "kernel_input_feature_dimension"));
  s.k_order.push_back(DictInt(dn, "kernel_output_feature_dimension"));
  s.out_order = {DictInt(dn, "output_batch_dimension")};
  s.out_order.insert(s.out_order.end(), osp.begin(), osp.end());
  s.out_order.push_back(DictInt(dn, "output_feature_dimension"));
  for (const Dims* ord : {&s.in_order, &s.k_order, &s.out_order})
    for (int64_t k : *ord)
      if (k < 0 || k >= static_cast<int64_t>(ns + 2)) return InvalidArgumentError("bad dimension numbers");
  s.batch = l.dims[static_cast<size_t>(s.in_order[0])];
  s.cin = l.dims[static_cast<size_t>(s.in_order.back())];
  s.cout = r.dims[static_cast<size_t>(s.k_order.back())];
  TPUMESH_ASSIGN_OR_RETURN(s.groups, IntAttr(op, "feature_group_count", 1));
  TPUMESH_ASSIGN_OR_RETURN(s.batch_groups, IntAttr(op, "batch_group_count", 1));
  if (s.groups < 1 || s.cin % s.groups || s.cout % s.groups ||
      r.dims[static_cast<size_t>(s.k_order[ns])] != s.cin / s.groups)
    return InvalidArgumentError("feature groups do not divide the features");
  if (s.batch_groups < 1 || (s.batch_groups > 1 && s.groups > 1) || s.batch % s.batch_groups ||
      s.cout % s.batch_groups)
    return InvalidArgumentError("batch_group_count must divide the batch and the output features (and "
                                "feature_group_count be 1)");
  for (size_t k = 0; k < ns; ++k) {
    s.in_sp.push_back(l.dims[static_cast<size_t>(isp[k])]);
    s.k_sp.push_back(r.dims[static_cast<size_t>(ksp[k])]);
    s.out_sp.push_back(o.dims[static_cast<size_t>(osp[k])]);
  }
  TPUMESH_ASSIGN_OR_RETURN(s.stride, IntsAttr(op, "window_strides", Dims(ns, 1)));
  TPUMESH_ASSIGN_OR_RETURN(s.lhs_dil, IntsAttr(op, "lhs_dilation", Dims(ns, 1)));
  TPUMESH_ASSIGN_OR_RETURN(s.rhs_dil, IntsAttr(op, "rhs_dilation", Dims(ns, 1)));
  TPUMESH_ASSIGN_OR_RETURN(Dims pad, IntsAttr(op, "padding", Dims(2 * ns, 0)));
  if (s.stride.size() != ns || s.lhs_dil.size() != ns || s.rhs_dil.size() != ns || pad.size() != 2 * ns)
    return InvalidArgumentError("window attributes have the wrong length");
  s.reverse.assign(ns, false);
  if (const Attr* rv = op.Find("window_reversal"); rv && rv->kind == Attr::Kind::kList)
    for (size_t k = 0; k < ns && k < rv->list.size(); ++k) s.reverse[k] = rv->list[k].i != 0;
  for (size_t k = 0; k < ns; ++k) {
    s.pad_lo.push_back(pad[2 * k]);
    s.pad_hi.push_back(pad[2 * k + 1]);
    if (s.stride[k] < 1 || s.lhs_dil[k] < 1 || s.rhs_dil[k] < 1) return InvalidArgumentError("bad window");
    const int64_t in_ext = (s.in_sp[k] - 1) * s.lhs_dil[k] + 1 + s.pad_lo[k] + s.pad_hi[k];
    const int64_t k_ext = (s.k_sp[k] - 1) * s.rhs_dil[k] + 1;
    const int64_t expect = in_ext < k_ext ? 0 : (in_ext - k_ext) / s.stride[k] + 1;
    if (expect != s.out_sp[k])
      return InvalidArgumentError("result " + o.ToString() + " does not match the window (spatial dimension " +
                                  std::to_string(k) + " should be " + std::to_string(expect) + ")");
  }
  if (o.dims[static_cast<size_t>(s.out_order[0])] != s.out_batch() ||
      o.dims[static_cast<size_t>(s.out_order.back())] != s.cout)
    return InvalidArgumentError("result batch or features do not match");
  return s;
}

Status ConvolutionComputable(const ConvShape& s, const Type& l, const Type& r) {
  if (IsComplex(l.element) || IsComplex(r.element)) return UnimplementedError("complex convolution is not computed");
  if (IsFloat(l.element) != IsFloat(r.element))
    return UnimplementedError("a convolution of a float and an integer operand is not computed");
  return OkStatus();
}

}  // namespace tpumesh::hlo
