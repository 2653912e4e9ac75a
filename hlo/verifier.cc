// Verify (hlo/interpreter.h): each op against its registry entry (hlo/ops.h)
// before anything runs.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "base/printable.h"
#include "hlo/attrs.h"
#include "hlo/interpreter.h"
#include "hlo/interpreter_impl.h"
#include "hlo/op_shapes.h"
#include "hlo/ops.h"

namespace tpumesh::hlo {
namespace {

// A count as "1e+12" or "4294967296".
std::string Count(double n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", n);
  return buf;
}

class Verifier {
 public:
  Verifier(const Module& m, VerifyFor purpose) : m_(m), purpose_(purpose) {}
  Status Run() {
    const Func* main = m_.FindFunc("main");
    if (!main) return InvalidArgumentError(m_.file + ": no @main function");
    for (const Func& f : m_.funcs) TPUMESH_RETURN_IF_ERROR(Region(f.body, &f));
    return OkStatus();
  }

 private:
  Status Fail(const Op& op, const std::string& what) const {
    return InvalidArgumentError(m_.Where(op.loc) + ": " + op.name + ": " + what);
  }
  Status Region(const hlo::Region& r, const Func* f) {
    for (const Block& b : r.blocks) {
      for (size_t i = 0; i < b.args.size(); ++i) TypeOf(b.args[i]) = &b.arg_types[i];
      for (const Op& op : b.ops) {
        for (size_t i = 0; i < op.operands.size(); ++i) {
          const Type* t = TypeOf(op.operands[i]);
          if (t && !(*t == op.operand_types[i]))
            return Fail(op, "operand " + std::to_string(i) + " is declared " + op.operand_types[i].ToString() +
                                " but " + m_.value_names[static_cast<size_t>(op.operands[i])] + " is " + t->ToString());
        }
        for (size_t i = 0; i < op.results.size(); ++i) TypeOf(op.results[i]) = &op.result_types[i];
        TPUMESH_RETURN_IF_ERROR(OneOp(op, f));
        for (const hlo::Region& inner : op.regions) TPUMESH_RETURN_IF_ERROR(Region(inner, nullptr));
      }
    }
    return OkStatus();
  }
  // The type a value was defined with (null until its definition is seen).
  const Type*& TypeOf(int v) {
    if (types_.size() < static_cast<size_t>(m_.num_values)) types_.resize(static_cast<size_t>(m_.num_values), nullptr);
    return types_[static_cast<size_t>(v)];
  }
  std::vector<const Type*> types_;
  Status OneOp(const Op& op, const Func* f) {
    const OpEntry* e = EntryOf(op);
    if (!e)
      return UnimplementedError(m_.Where(op.loc) + ": unsupported op " + Quoted(op.name) +
                                " (docs/stablehlo.md lists the supported ops)");
    const int n_in = static_cast<int>(op.operands.size()), n_out = static_cast<int>(op.results.size());
    if (n_in < e->min_operands || (e->max_operands >= 0 && n_in > e->max_operands))
      return Fail(op, "takes " +
                          (e->max_operands == e->min_operands ? std::to_string(e->min_operands)
                           : e->max_operands < 0            ? "at least " + std::to_string(e->min_operands)
                                                             : std::to_string(e->min_operands) + " to " +
                                                                   std::to_string(e->max_operands)) +
                          " operands, has " + std::to_string(n_in));
    if (e->results >= 0 && n_out != e->results)
      return Fail(op, "has " + std::to_string(e->results) + " result(s), not " + std::to_string(n_out));
    if (e->check == Check::kWhile && n_out != n_in) return Fail(op, "needs as many results as operands");
    for (const Type& t : op.result_types)
      if (t.kind != Type::Kind::kTensor) return Fail(op, "results of type " + t.ToString() + " are not supported");
    for (const Type& t : op.operand_types)
      if (t.kind != Type::Kind::kTensor) return Fail(op, "operands of type " + t.ToString() + " are not supported");
    const int n_regions = static_cast<int>(op.regions.size());
    if (e->min_regions == e->max_regions && n_regions != e->min_regions)
      return Fail(op, "needs " + std::to_string(e->min_regions) + " region(s), has " + std::to_string(n_regions));
    if (n_regions < e->min_regions) return Fail(op, "needs at least one branch");
    for (const hlo::Region& r : op.regions)
      if (r.blocks.size() != 1) return Fail(op, "regions must have one block");
    if (const auto attrs = AttrsOf(op); !attrs->status.ok())
      return Status(attrs->status.code(), m_.Where(op.loc) + ": " + op.name + ": " + attrs->status.message());
    const auto& in = op.operand_types;
    const auto& out = op.result_types;
    if (purpose_ == VerifyFor::kRun && e->run == Run::kConvolution)
      if (const auto* conv = std::get_if<ConvAttrs>(&AttrsOf(op)->value))
        if (Status s = ConvolutionComputable(conv->shape, in[0], in[1]); !s.ok())
          return Status(s.code(), m_.Where(op.loc) + ": " + op.name + ": " + s.message());
    if (e->run == Run::kScatter)
      if (auto layout = ScatterLayoutOf(op); !layout.ok())
        return Status(layout.status().code(), m_.Where(op.loc) + ": " + op.name + ": " + layout.status().message());
    if (const double folds = WindowFolds(op); purpose_ == VerifyFor::kRun && folds > kMaxWindowFolds)
      return ResourceExhaustedError(m_.Where(op.loc) + ": " + op.name + ": its window folds " + Count(folds) +
                                    " values, more than the " + Count(kMaxWindowFolds) +
                                    " `run` computes in one op (simulate --stablehlo prices it)");
    switch (e->check) {
      case Check::kUnset:
        return Fail(op, "internal: no check in the op table");
      case Check::kElementwise:
        return CheckElementwise(op, e->scalar);
      case Check::kReshape:
      case Check::kBitcastConvert:
        if (in.size() != 1 || out.size() != 1) return Fail(op, "needs one operand and one result");
        if (in[0].size_bytes() != out[0].size_bytes() ||
            (e->check == Check::kReshape &&
             (in[0].num_elements() != out[0].num_elements() || in[0].element != out[0].element)))
          return Fail(op, "cannot turn " + in[0].ToString() + " into " + out[0].ToString());
        return OkStatus();
      case Check::kBroadcastInDim: {
        if (in.size() != 1 || out.size() != 1) return Fail(op, "needs one operand and one result");
        TPUMESH_ASSIGN_OR_RETURN(AxesAttrs broadcast, Wrap(op, TypedAttrs<AxesAttrs>(op)));
        const Dims& dims = broadcast.axes;
        if (dims.size() != in[0].dims.size()) return Fail(op, "broadcast_dimensions has the wrong length");
        for (size_t i = 0; i < dims.size(); ++i) {
          if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(out[0].dims.size()))
            return Fail(op, "broadcast_dimensions out of range");
          if (in[0].dims[i] != 1 && in[0].dims[i] != out[0].dims[static_cast<size_t>(dims[i])])
            return Fail(op, "cannot broadcast " + in[0].ToString() + " to " + out[0].ToString());
        }
        if (in[0].element != out[0].element) return Fail(op, "element types differ");
        return OkStatus();
      }
      case Check::kTranspose: {
        TPUMESH_ASSIGN_OR_RETURN(AxesAttrs transpose, Wrap(op, TypedAttrs<AxesAttrs>(op)));
        const Dims& perm = transpose.axes;
        if (in.size() != 1 || perm.size() != in[0].dims.size()) return Fail(op, "permutation has the wrong length");
        Dims expect;
        std::vector<bool> seen(perm.size(), false);
        for (int64_t p : perm) {
          if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[static_cast<size_t>(p)])
            return Fail(op, "bad permutation");
          seen[static_cast<size_t>(p)] = true;
          expect.push_back(in[0].dims[static_cast<size_t>(p)]);
        }
        if (out.size() != 1 || out[0].dims != expect) return Fail(op, "result shape does not match the permutation");
        return OkStatus();
      }
      case Check::kDot:
        if (in.size() != 2 || out.size() != 1) return Fail(op, "needs two operands and one result");
        return OkStatus();  // checked fully where it runs (the shapes are the op's own)
      case Check::kCall: {
        const Func* callee = m_.FindFunc(op.callee);
        if (!callee) return Fail(op, "calls unknown function @" + op.callee);
        if (callee->arg_types != in || callee->result_types != out)
          return Fail(op, "types do not match @" + op.callee + "'s");
        return OkStatus();
      }
      case Check::kReturn:
        if (f && in != f->result_types)
          return Fail(op, "returns " + TypesToString(in) + " but @" + f->name + " declares " +
                              TypesToString(f->result_types));
        return OkStatus();
      case Check::kCustomCall:
        if (CustomCallSupported(op.callee)) return OkStatus();
        return UnimplementedError(m_.Where(op.loc) + ": " + CustomCallRefusal(op.callee));
      case Check::kConcatenate: {
        TPUMESH_ASSIGN_OR_RETURN(AxisAttrs concat, Wrap(op, TypedAttrs<AxisAttrs>(op)));
        const int64_t d = concat.axis;
        if (out.size() != 1 || in.empty() || d < 0 || d >= static_cast<int64_t>(out[0].dims.size()))
          return Fail(op, "bad dimension");
        int64_t total = 0;
        for (const Type& t : in) {
          if (t.dims.size() != out[0].dims.size()) return Fail(op, "operand ranks differ");
          for (size_t k = 0; k < t.dims.size(); ++k)
            if (static_cast<int64_t>(k) != d && t.dims[k] != out[0].dims[k]) return Fail(op, "operand shapes differ");
          total += t.dims[static_cast<size_t>(d)];
        }
        if (total != out[0].dims[static_cast<size_t>(d)]) return Fail(op, "result size along the dimension is wrong");
        return OkStatus();
      }
      case Check::kWhile:
      case Check::kWhereItRuns:
        return OkStatus();
    }
    return OkStatus();
  }
  // An elementwise op's operands against its result: the same shape (a
  // scalar where the op broadcasts one) and element type, except where its
  // scalar function converts or compares.
  Status CheckElementwise(const Op& op, const ScalarFn& fn) const {
    using K = ScalarFn::Kind;
    const auto& in = op.operand_types;
    const auto& out = op.result_types;
    if (out.size() != 1) return Fail(op, "needs one result");
    const Type& r = out[0];
    for (size_t i = 0; i < in.size(); ++i) {
      const bool may_be_scalar = (fn.kind == K::kSelect && i == 0) || (fn.kind == K::kClamp && i != 1);
      if (in[i].dims != r.dims && !(may_be_scalar && in[i].dims.empty()))
        return Fail(op, "operand " + std::to_string(i) + " is " + in[i].ToString() + " but the result is " +
                            r.ToString());
    }
    const size_t arity = fn.kind == K::kSelect || fn.kind == K::kClamp ? 3 : fn.kind == K::kCompare ? 2 : 0;
    if (arity && in.size() != arity) return Fail(op, "needs " + std::to_string(arity) + " operands");
    if (fn.kind == K::kCompare && r.element != ElementType::kPred) return Fail(op, "result must be i1");
    if (fn.kind == K::kSelect && in[0].element != ElementType::kPred) return Fail(op, "predicate must be i1");
    // Complex values: stablehlo.complex makes them of two reals, real and
    // imag (and abs) give their part type.
    if (fn.kind == K::kComplex) {
      auto want = ComplexOf(in[0].element);
      if (in[0].element != in[1].element || !want.ok() || r.element != *want)
        return Fail(op, "makes complex<f32> of two f32 or complex<f64> of two f64, not " + r.ToString() + " of " +
                            in[0].ToString() + " and " + in[1].ToString());
      return OkStatus();
    }
    const bool to_part = fn.kind == K::kReal || fn.kind == K::kImag || (fn.kind == K::kUnary && fn.un == Un::kAbs);
    if (to_part && r.element != PartType(in[0].element))
      return Fail(op, "of " + in[0].ToString() + " is " + std::string(ElementTypeName(PartType(in[0].element))) +
                          ", not " + r.ToString());
    if ((fn.kind == K::kReal || fn.kind == K::kImag) && !IsComplex(in[0].element) && !IsFloat(in[0].element))
      return Fail(op, "takes a complex or float operand, not " + in[0].ToString());
    const bool converts = fn.kind == K::kConvert || fn.kind == K::kCompare || to_part ||
                          (fn.kind == K::kUnary && fn.un == Un::kIsFinite);
    if (!converts) {
      const size_t first = fn.kind == K::kSelect ? 1 : 0;
      for (size_t i = first; i < in.size(); ++i)
        if (in[i].element != r.element)
          return Fail(op, "operand " + std::to_string(i) + " is " + in[i].ToString() + ", result " + r.ToString());
    }
    return OkStatus();
  }
  template <typename T>
  StatusOr<T> Wrap(const Op& op, StatusOr<T> v) const {
    if (v.ok()) return v;
    return InvalidArgumentError(m_.Where(op.loc) + ": " + v.status().message());
  }

  const Module& m_;
  const VerifyFor purpose_;
};

}  // namespace

double WindowFolds(const Op& op) {
  const OpEntry* e = EntryOf(op);
  if (!e || (e->run != Run::kReduceWindow && e->run != Run::kSelectAndScatter)) return 0;
  const auto window = TypedAttrs<WindowAttrs>(op);
  if (!window.ok()) return 0;
  double folds = 1;
  for (int64_t w : window->dims) folds *= static_cast<double>(w);
  const Type* per = e->run == Run::kSelectAndScatter ? (op.operand_types.size() > 1 ? &op.operand_types[1] : nullptr)
                                                     : (op.result_types.empty() ? nullptr : &op.result_types[0]);
  return per ? folds * static_cast<double>(per->num_elements()) : 0;
}

Status Verify(const Module& m, VerifyFor purpose) { return Verifier(m, purpose).Run(); }

}  // namespace tpumesh::hlo
