// The pretty forms the StableHLO, func, chlo and sdy dialects print, read
// into the generic form's attribute names (hlo/module.h says which).
#include "hlo/mlir_parser.h"

#include <cstdio>
#include <map>
#include <set>
#include <string>

namespace tpumesh::hlo::reader {

// The signature after ':' of a pretty op: "(T, T) -> T", "(T) -> (T, T)",
// "T" (every operand and result that type), "T, T" (a list: operands, or
// operands and results of the same types), "T -> T" (chlo's unary form).
Status Parser::ParseSignature(Op* op, size_t result_count, bool required) {
  if (!Consume(":")) {
    if (required) return Error("expected ':' and the op's types, found " + Near());
    return OkStatus();
  }
  std::vector<Type> lhs;
  Skip();
  if (Peek() == '(') {
    TPUMESH_ASSIGN_OR_RETURN(lhs, TypeListMaybeParens());
  } else {
    do {
      TPUMESH_ASSIGN_OR_RETURN(Type t, ParseType());
      lhs.push_back(std::move(t));
    } while (Consume(","));
  }
  const size_t n = op->operands.size();
  if (Consume("->")) {
    op->operand_types = std::move(lhs);
    TPUMESH_ASSIGN_OR_RETURN(op->result_types, TypeListMaybeParens());
    return OkStatus();
  }
  if (op->name == "stablehlo.complex" && lhs.size() == 1 && n == 2 && IsComplex(lhs[0].element)) {
    Type part = lhs[0];  // the result's type: its operands are of its part type
    part.element = PartType(part.element);
    op->operand_types.assign(n, part);
    op->result_types.assign(result_count, lhs[0]);
    return OkStatus();
  }
  if (lhs.size() == 1 && (n > 1 || result_count > 0)) {  // SameOperandsAndResultType
    op->operand_types.assign(n, lhs[0]);
    op->result_types.assign(result_count, lhs[0]);
    return OkStatus();
  }
  if (op->name == "stablehlo.select" && lhs.size() == 2 && n == 3) {
    op->operand_types = {lhs[0], lhs[1], lhs[1]};
    op->result_types.assign(result_count, lhs[1]);
    return OkStatus();
  }
  if (lhs.size() == n) {
    op->operand_types = lhs;
    if (result_count == lhs.size()) op->result_types = lhs;
    else if (result_count == 1 && n == 0) op->result_types = lhs;
    return OkStatus();
  }
  if (n == 0 && lhs.size() == result_count) {  // iota, constant
    op->result_types = lhs;
    return OkStatus();
  }
  return Error(op->name + ": " + std::to_string(lhs.size()) + " types for " + std::to_string(n) +
               " operands and " + std::to_string(result_count) + " results");
}

// A pretty form's `key = value`, renamed to the generic form's attribute.
Status Parser::PrettyValue(const std::string& key, Op* op) {
  Attr v;
  if (key == "algorithm" && Lookahead("<")) {
    // dot_general's algorithm = <lhs_precision_type = bf16, ..., allow_imprecise_accumulation = false>
    Advance();
    v.kind = Attr::Kind::kDict;
    if (!Consume(">")) {
      do {
        Skip();
        const std::string field = Ident();
        if (field.empty()) return Error("expected a field of the dot algorithm, found " + Near());
        TPUMESH_RETURN_IF_ERROR(Expect("="));
        Attr value;
        TPUMESH_RETURN_IF_ERROR(AttrValue(&value));
        v.dict.emplace_back(field, std::move(value));
      } while (Consume(","));
      TPUMESH_RETURN_IF_ERROR(Expect(">"));
    }
    op->attrs.emplace_back("algorithm", std::move(v));
    return OkStatus();
  }
  TPUMESH_RETURN_IF_ERROR(AttrValue(&v));
  const std::string& n = op->name;
  auto put = [&](std::string k, Attr a) { op->attrs.emplace_back(std::move(k), std::move(a)); };
  if ((key == "batching_dims" || key == "contracting_dims") && n == "stablehlo.dot_general") {
    if (!ConsumeWord("x")) return Error("expected 'x' in " + key);
    Attr rhs;
    TPUMESH_RETURN_IF_ERROR(AttrValue(&rhs));
    Attr* dn = nullptr;
    for (auto& [k, a] : op->attrs)
      if (k == "dot_dimension_numbers") dn = &a;
    if (!dn) {
      Attr d;
      d.kind = Attr::Kind::kDict;
      op->attrs.emplace_back("dot_dimension_numbers", std::move(d));
      dn = &op->attrs.back().second;
    }
    const std::string base = key == "batching_dims" ? "batching_dimensions" : "contracting_dimensions";
    dn->dict.emplace_back("lhs_" + base, std::move(v));
    dn->dict.emplace_back("rhs_" + base, std::move(rhs));
    return OkStatus();
  }
  if (key == "precision") return put("precision_config", std::move(v)), OkStatus();
  if (key == "format" && n == "stablehlo.reduce_precision") {  // format = e5m10
    int x = 0, m = 0;
    char tail = 0;
    if (v.kind != Attr::Kind::kWord || std::sscanf(v.s.c_str(), "e%dm%d%c", &x, &m, &tail) != 2)
      return Error("expected a format like e5m10 in stablehlo.reduce_precision");
    Attr eb, mb;
    eb.kind = mb.kind = Attr::Kind::kInt;
    eb.i = x;
    mb.i = m;
    put("exponent_bits", std::move(eb));
    put("mantissa_bits", std::move(mb));
    return OkStatus();
  }
  if (key == "dim_numbers" && n == "stablehlo.convolution") {
    return Error("internal: conv dims parsed elsewhere");
  }
  if (key == "window" && v.kind == Attr::Kind::kDict) {
    static const std::map<std::string, std::string> kWindow = {
        {"stride", "window_strides"}, {"pad", "padding"}, {"lhs_dilate", "lhs_dilation"},
        {"rhs_dilate", "rhs_dilation"}, {"reverse", "window_reversal"}};
    for (auto& [k, a] : v.dict) {
      const auto it = kWindow.find(k);
      put(it == kWindow.end() ? k : it->second, std::move(a));
    }
    return OkStatus();
  }
  static const std::map<std::string, std::map<std::string, std::string>> kRename = {
      {"stablehlo.broadcast_in_dim", {{"dims", "broadcast_dimensions"}}},
      {"stablehlo.transpose", {{"dims", "permutation"}}},
      {"stablehlo.reverse", {{"dims", "dimensions"}}},
      {"stablehlo.reduce", {{"dimensions", "dimensions"}}},
      {"stablehlo.iota", {{"dim", "iota_dimension"}}},
      {"stablehlo.concatenate", {{"dim", "dimension"}}},
      {"stablehlo.dynamic_slice", {{"sizes", "slice_sizes"}}},
      {"stablehlo.pad", {{"low", "edge_padding_low"}, {"high", "edge_padding_high"}, {"interior", "interior_padding"}}},
      {"stablehlo.get_tuple_element", {{"index", "index"}}},
      {"stablehlo.fft", {{"type", "fft_type"}, {"length", "fft_length"}}},
  };
  std::string name = key;
  if (const auto it = kRename.find(n); it != kRename.end()) {
    if (const auto jt = it->second.find(key); jt != it->second.end()) name = jt->second;
  }
  put(std::move(name), std::move(v));
  return OkStatus();
}

Status Parser::ParsePretty(Op* op, size_t result_count) {
  const std::string& n = op->name;
  if (n == "stablehlo.constant") return PrettyConstant(op, result_count);
  if (n == "stablehlo.while") return PrettyWhile(op, result_count);
  if (n == "stablehlo.reduce") return PrettyReduce(op, result_count);
  if (n == "sdy.manual_computation") return PrettyManualComputation(op, result_count);
  if (n == "stablehlo.convolution") return PrettyConvolution(op, result_count);
  return PrettyDefault(op, result_count);
}

// [{attrs}] dense<...> : T
Status Parser::PrettyConstant(Op* op, size_t result_count) {
  if (Lookahead("{")) {
    Attr attrs;
    TPUMESH_RETURN_IF_ERROR(AttrDict(&attrs));
    for (auto& kv : attrs.dict) op->attrs.push_back(std::move(kv));
  }
  Attr value;
  TPUMESH_RETURN_IF_ERROR(AttrValue(&value));
  if (value.kind != Attr::Kind::kDense) return Error("stablehlo.constant needs a dense<...> value");
  op->result_types.assign(result_count ? 1 : 0, value.type);
  op->attrs.emplace_back("value", std::move(value));
  return ParseOpLoc(op);
}

Status Parser::PrettyWhile(Op* op, size_t result_count) {
  // while(%iterArg = %a, ...) : T, T [attributes {...}] cond { } do { }
  std::vector<std::pair<std::string, Type>> iter;
  TPUMESH_RETURN_IF_ERROR(Expect("("));
  std::vector<std::string> names;
  if (!Consume(")")) {
    do {
      TPUMESH_ASSIGN_OR_RETURN(std::string name, Suffix('%'));
      TPUMESH_RETURN_IF_ERROR(Expect("="));
      TPUMESH_ASSIGN_OR_RETURN(int v, Use());
      names.push_back(name);
      op->operands.push_back(v);
    } while (Consume(","));
    TPUMESH_RETURN_IF_ERROR(Expect(")"));
  }
  TPUMESH_RETURN_IF_ERROR(ParseSignature(op, result_count, !names.empty()));
  if (ConsumeWord("attributes")) {
    Attr attrs;
    TPUMESH_RETURN_IF_ERROR(AttrDict(&attrs));
    for (auto& kv : attrs.dict) op->attrs.push_back(std::move(kv));
  }
  for (size_t k = 0; k < names.size(); ++k) iter.emplace_back(names[k], op->operand_types[k]);
  if (!ConsumeWord("cond")) return Error("expected 'cond' in stablehlo.while, found " + Near());
  TPUMESH_RETURN_IF_ERROR(ParseRegion(&op->regions.emplace_back(), &iter));
  if (!ConsumeWord("do")) return Error("expected 'do' in stablehlo.while, found " + Near());
  TPUMESH_RETURN_IF_ERROR(ParseRegion(&op->regions.emplace_back(), &iter));
  return ParseOpLoc(op);
}

Status Parser::PrettyReduce(Op* op, size_t result_count) {
  // reduce(%a init: %i), (%b init: %j) [applies OP] across dimensions = [..]
  //   : sig [reducer(%l0: T, %r0: T) (%l1: T, %r1: T) { ... }]
  std::vector<int> inputs, inits;
  do {
    TPUMESH_RETURN_IF_ERROR(Expect("("));
    TPUMESH_ASSIGN_OR_RETURN(int a, Use());
    if (!ConsumeWord("init")) return Error("expected 'init:' in stablehlo.reduce");
    TPUMESH_RETURN_IF_ERROR(Expect(":"));
    TPUMESH_ASSIGN_OR_RETURN(int b, Use());
    TPUMESH_RETURN_IF_ERROR(Expect(")"));
    inputs.push_back(a);
    inits.push_back(b);
  } while (Consume(","));
  op->operands = inputs;
  op->operands.insert(op->operands.end(), inits.begin(), inits.end());
  std::string applies;
  if (ConsumeWord("applies")) {
    applies = Ident();
    if (applies.empty()) return Error("expected an op after 'applies'");
  }
  if (!ConsumeWord("across")) return Error("expected 'across' in stablehlo.reduce, found " + Near());
  if (!ConsumeWord("dimensions")) return Error("expected 'dimensions' in stablehlo.reduce");
  TPUMESH_RETURN_IF_ERROR(Expect("="));
  TPUMESH_RETURN_IF_ERROR(PrettyValue("dimensions", op));
  if (Lookahead("{")) {
    Attr attrs;
    TPUMESH_RETURN_IF_ERROR(AttrDict(&attrs));
    for (auto& kv : attrs.dict) op->attrs.push_back(std::move(kv));
  }
  TPUMESH_RETURN_IF_ERROR(ParseSignature(op, result_count, true));
  const size_t k = inputs.size();
  if (!applies.empty()) {
    if (k != 1) return Error("'applies' with more than one input");
    // The body a pretty 'applies' stands for: ^bb0(%l, %r): %o = OP %l, %r; return %o.
    if (op->operand_types.size() != 2) return Error("stablehlo.reduce needs two operand types");
    Region& r = op->regions.emplace_back();
    Block& b = r.blocks.emplace_back();
    Type scalar = op->operand_types[1];
    scopes_.emplace_back();
    const std::string tag = "__applies" + std::to_string(module_.num_values);
    TPUMESH_ASSIGN_OR_RETURN(int l, Define(tag + "l"));
    TPUMESH_ASSIGN_OR_RETURN(int rr, Define(tag + "r"));
    TPUMESH_ASSIGN_OR_RETURN(int o, Define(tag + "o"));
    scopes_.pop_back();
    b.args = {l, rr};
    b.arg_types = {scalar, scalar};
    Op body;
    body.name = applies;
    body.operands = {l, rr};
    body.operand_types = {scalar, scalar};
    body.results = {o};
    body.result_types = {scalar};
    body.loc = op->loc;
    Op ret;
    ret.name = "stablehlo.return";
    ret.operands = {o};
    ret.operand_types = {scalar};
    ret.loc = op->loc;
    b.ops.reserve(2);
    b.ops.push_back(std::move(body));
    b.ops.push_back(std::move(ret));
    return ParseOpLoc(op);
  }
  if (!ConsumeWord("reducer")) return Error("expected 'reducer' or 'applies' in stablehlo.reduce");
  // (%l_i: T, %r_i: T) per input; block args are l_0..l_{k-1}, r_0..r_{k-1}.
  std::vector<std::pair<std::string, Type>> lhs, rhs;
  for (size_t i = 0; i < k; ++i) {
    TPUMESH_RETURN_IF_ERROR(Expect("("));
    for (int side = 0; side < 2; ++side) {
      if (side) TPUMESH_RETURN_IF_ERROR(Expect(","));
      TPUMESH_ASSIGN_OR_RETURN(TypedArg a, ParseTypedArg());
      (side ? rhs : lhs).emplace_back(std::move(a.name), std::move(a.type));
    }
    TPUMESH_RETURN_IF_ERROR(Expect(")"));
  }
  lhs.insert(lhs.end(), rhs.begin(), rhs.end());
  TPUMESH_RETURN_IF_ERROR(ParseRegion(&op->regions.emplace_back(), &lhs));
  return ParseOpLoc(op);
}

Status Parser::PrettyManualComputation(Op* op, size_t result_count) {
  // (%a, ...) in_shardings=[...] out_shardings=[...] manual_axes={"x"}
  //   (%arg: T, ...) { ... } : (T) -> T
  TPUMESH_RETURN_IF_ERROR(Expect("("));
  TPUMESH_RETURN_IF_ERROR(ParseOperands(op));
  while (true) {
    Skip();
    if (Peek() == '(') break;
    const std::string key = Ident();
    if (key.empty()) return Error("expected a field of sdy.manual_computation, found " + Near());
    TPUMESH_RETURN_IF_ERROR(Expect("="));
    Attr v;
    if (key == "manual_axes") {
      TPUMESH_RETURN_IF_ERROR(SdyAxisSet(&v));
    } else if (Lookahead("[")) {  // [<@mesh, ...>, ...]
      Advance();
      v.kind = Attr::Kind::kList;
      TPUMESH_RETURN_IF_ERROR(ListUntil("]", [&]() -> Status { return SdyAngle(&v.list.emplace_back()); }));
    } else {
      TPUMESH_RETURN_IF_ERROR(AttrValue(&v));
    }
    op->attrs.emplace_back(key, std::move(v));
  }
  std::vector<std::pair<std::string, Type>> args;
  TPUMESH_RETURN_IF_ERROR(Expect("("));
  std::vector<TypedArg> typed;
  TPUMESH_RETURN_IF_ERROR(ParseTypedArgs(&typed));
  for (TypedArg& a : typed) args.emplace_back(std::move(a.name), std::move(a.type));
  TPUMESH_RETURN_IF_ERROR(ParseRegion(&op->regions.emplace_back(), &args));
  TPUMESH_RETURN_IF_ERROR(ParseSignature(op, result_count, true));
  return ParseOpLoc(op);
}

Status Parser::PrettyConvolution(Op* op, size_t result_count) {
  // convolution(%a, %b) dim_numbers = ..., window = {...} {attrs} : sig
  TPUMESH_RETURN_IF_ERROR(Expect("("));
  TPUMESH_RETURN_IF_ERROR(ParseOperands(op));
  while (!Lookahead(":")) {
    if (Lookahead("{")) {
      Attr attrs;
      TPUMESH_RETURN_IF_ERROR(AttrDict(&attrs));
      for (auto& kv : attrs.dict) op->attrs.push_back(std::move(kv));
      continue;
    }
    const std::string key = Ident();
    if (key.empty()) return Error("expected a field of stablehlo.convolution, found " + Near());
    TPUMESH_RETURN_IF_ERROR(Expect("="));
    if (key == "dim_numbers") {
      Attr d;
      TPUMESH_RETURN_IF_ERROR(ConvDims(&d));
      op->attrs.emplace_back("dimension_numbers", std::move(d));
    } else {
      TPUMESH_RETURN_IF_ERROR(PrettyValue(key, op));
    }
    Consume(",");
  }
  TPUMESH_RETURN_IF_ERROR(ParseSignature(op, result_count, true));
  return ParseOpLoc(op);
}

Status Parser::PrettyDefault(Op* op, size_t result_count) {
  const std::string& n = op->name;
  std::vector<std::string> words;
  // The default pretty form: [words] [@callee] [(]operands[)] [, key = value]...
  // [slice spec] [{attrs}] [: signature] [loc].
  bool any_operand_group = false;
  while (true) {
    Skip();
    const char c = Peek();
    if (c == ':' || c == '\0' || c == '}') break;
    if (LookaheadWord("loc")) break;
    if (c == '%') {
      // A value at the start of the next op's line ("%5 = ...") ends this op
      // when this op takes no operand here: look for '=' after the name.
      size_t k = 1;
      while (IsSuffixChar(Peek(k))) ++k;
      size_t m = k;
      if (Peek(m) == ':') {  // %0:2 =
        ++m;
        while (std::isdigit(static_cast<unsigned char>(Peek(m)))) ++m;
      }
      while (Peek(m) == ' ') ++m;
      if (Peek(m) == '=' && Peek(m + 1) != '=') break;
      TPUMESH_ASSIGN_OR_RETURN(int v, Use());
      op->operands.push_back(v);
      Consume(",");
      continue;
    }
    if (c == '@') {
      TPUMESH_ASSIGN_OR_RETURN(op->callee, Suffix('@'));
      continue;
    }
    if (c == '"' && n == "stablehlo.composite" && op->operands.empty() && !op->Find("name")) {
      Attr name;  // stablehlo.composite "chlo.mulhi" %a, %b {decomposition = @f, ...}
      name.kind = Attr::Kind::kString;
      TPUMESH_ASSIGN_OR_RETURN(name.s, String());
      op->attrs.emplace_back("name", std::move(name));
      continue;
    }
    if (c == '(') {
      if (any_operand_group) return Error("unexpected '(' in " + n);
      any_operand_group = true;
      Advance();
      if (!Consume(")")) {
        do {  // operands, and keyword attributes among them (chlo.top_k(%x, k = 2))
          Skip();
          if (IsIdStart(Peek())) {
            const std::string key = Ident();
            TPUMESH_RETURN_IF_ERROR(Expect("="));
            TPUMESH_RETURN_IF_ERROR(PrettyValue(key, op));
            continue;
          }
          TPUMESH_ASSIGN_OR_RETURN(int v, Use());
          op->operands.push_back(v);
        } while (Consume(","));
        TPUMESH_RETURN_IF_ERROR(Expect(")"));
      }
      Consume(",");
      continue;
    }
    if (c == '[') {  // a slice spec: [0:2, 1:4:2]
      if (n != "stablehlo.slice") return Error("unexpected '[' in " + n);
      Advance();
      Attr starts, limits, strides;
      starts.kind = limits.kind = strides.kind = Attr::Kind::kList;
      if (!Consume("]")) {
        do {
          Attr a, b, st;
          a.kind = b.kind = st.kind = Attr::Kind::kInt;
          TPUMESH_ASSIGN_OR_RETURN(a.i, Integer());
          TPUMESH_RETURN_IF_ERROR(Expect(":"));
          TPUMESH_ASSIGN_OR_RETURN(b.i, Integer());
          st.i = 1;
          if (Consume(":")) {
            TPUMESH_ASSIGN_OR_RETURN(st.i, Integer());
          }
          starts.list.push_back(a);
          limits.list.push_back(b);
          strides.list.push_back(st);
        } while (Consume(","));
        TPUMESH_RETURN_IF_ERROR(Expect("]"));
      }
      op->attrs.emplace_back("start_indices", std::move(starts));
      op->attrs.emplace_back("limit_indices", std::move(limits));
      op->attrs.emplace_back("strides", std::move(strides));
      continue;
    }
    if (c == '{') {
      Attr attrs;
      TPUMESH_RETURN_IF_ERROR(AttrDict(&attrs));
      for (auto& kv : attrs.dict) op->attrs.push_back(std::move(kv));
      continue;
    }
    if (c == '<') {  // sdy.sharding_constraint %x <@mesh, [...]>
      Attr s;
      TPUMESH_RETURN_IF_ERROR(SdyAngle(&s));
      op->attrs.emplace_back("sharding", std::move(s));
      continue;
    }
    if (c == ',') {
      Advance();
      continue;
    }
    if (IsIdStart(c)) {
      const size_t at = pos_;
      const int line = line_, col = col_;
      const std::string w = Ident();
      if (Consume("=")) {
        TPUMESH_RETURN_IF_ERROR(PrettyValue(w, op));
        continue;
      }
      // A bare word: a pretty enum (compare's GT, FLOAT) or the next op's
      // name when this op has nothing more (stablehlo.return, func.return).
      if (w.find('.') != std::string::npos || w == "return" || w == "call") {
        pos_ = at;
        line_ = line;
        col_ = col;
        break;
      }
      words.push_back(w);
      continue;
    }
    return Error("unexpected " + Near() + " in " + n);
  }
  // Words: compare's direction and type; others keep them by position.
  if (!words.empty()) {
    if (n == "stablehlo.compare") {
      Attr dir;
      dir.kind = Attr::Kind::kWord;
      dir.s = words[0];
      op->attrs.emplace_back("comparison_direction", dir);
      if (words.size() > 1) {
        Attr ty;
        ty.kind = Attr::Kind::kWord;
        ty.s = words[1];
        op->attrs.emplace_back("compare_type", ty);
      }
    } else {
      Attr list;
      list.kind = Attr::Kind::kList;
      for (const std::string& w : words) {
        Attr a;
        a.kind = Attr::Kind::kWord;
        a.s = w;
        list.list.push_back(a);
      }
      op->attrs.emplace_back("words", std::move(list));
    }
  }
  const bool is_return = n == "func.return" || n == "stablehlo.return" || n == "sdy.return";
  TPUMESH_RETURN_IF_ERROR(ParseSignature(op, result_count, !(is_return && op->operands.empty())));
  if (n == "func.call") {
    if (op->callee.empty()) return Error("func.call without a callee");
  }
  if (n == "stablehlo.composite") {
    const Attr* d = op->Find("decomposition");
    if (!d || d->kind != Attr::Kind::kSymbol) return Error("stablehlo.composite without decomposition = @function");
    op->callee = d->s;
  }
  return ParseOpLoc(op);
}

}  // namespace tpumesh::hlo::reader
