// The MLIR text read into a Module: the structure (module, funcs, regions,
// values in scope) and the generic op form; ParseModule and ReadModuleFile.
#include "hlo/mlir_parser.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "base/input_file.h"
#include "hlo/attrs.h"
#include "hlo/ops.h"

namespace tpumesh::hlo::reader {

StatusOr<int> Parser::Define(const std::string& name, int count) {
  Scope& sc = scopes_.back();
  if (sc.names.count(name)) return Error("value %" + name + " defined twice");
  const int id = module_.num_values;
  module_.num_values += count;
  for (int k = 0; k < count; ++k)
    module_.value_names.push_back("%" + name + (count > 1 ? "#" + std::to_string(k) : ""));
  sc.names[name] = {id, count};
  return id;
}

StatusOr<int> Parser::Use() {
  const Location at = Here();
  TPUMESH_ASSIGN_OR_RETURN(std::string name, Suffix('%'));
  int index = 0;
  bool indexed = false;
  if (Peek() == '#') {
    Advance();
    TPUMESH_ASSIGN_OR_RETURN(int64_t k, Integer());
    index = static_cast<int>(std::clamp<int64_t>(k, -1, 1 << 30));
    indexed = true;
  }
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    const auto f = it->names.find(name);
    if (f == it->names.end()) continue;
    if (index < 0 || index >= f->second.second)
      return InvalidArgumentError(module_.Where(at) + ": %" + name + " has " +
                                  std::to_string(f->second.second) + " results, no #" +
                                  std::to_string(index));
    if (!indexed && f->second.second > 1)
      return InvalidArgumentError(module_.Where(at) + ": %" + name + " has " +
                                  std::to_string(f->second.second) +
                                  " results: use %" + name + "#k");
    return f->second.first + index;
  }
  return InvalidArgumentError(module_.Where(at) + ": use of undefined value %" + name);
}

Status Parser::ParseOpLoc(Op* op) {
  if (LookaheadWord("loc")) {
    LocInfo info;
    TPUMESH_RETURN_IF_ERROR(ParseLoc(&info));
    ResolveLoc(info, &op->loc);
  }
  return OkStatus();
}

StatusOr<Parser::TypedArg> Parser::ParseTypedArg() {
  TypedArg a;
  a.attrs.kind = Attr::Kind::kDict;
  TPUMESH_ASSIGN_OR_RETURN(a.name, Suffix('%'));
  TPUMESH_RETURN_IF_ERROR(Expect(":"));
  TPUMESH_ASSIGN_OR_RETURN(a.type, ParseType());
  if (Lookahead("{")) TPUMESH_RETURN_IF_ERROR(AttrDict(&a.attrs));
  if (LookaheadWord("loc")) {
    LocInfo ignored;
    TPUMESH_RETURN_IF_ERROR(ParseLoc(&ignored));
  }
  return a;
}

Status Parser::ParseOperands(Op* op) {
  return ListUntil(")", [&]() -> Status {
    TPUMESH_ASSIGN_OR_RETURN(int v, Use());
    op->operands.push_back(v);
    return OkStatus();
  });
}

Status Parser::ParseTypedArgs(std::vector<TypedArg>* out) {
  if (Consume(")")) return OkStatus();
  do {
    TPUMESH_ASSIGN_OR_RETURN(TypedArg a, ParseTypedArg());
    out->push_back(std::move(a));
  } while (Consume(","));
  return Expect(")");
}

StatusOr<Module> Parser::Run() {
  module_.file = std::string(file_);
  if (static_cast<int64_t>(s_.size()) > kMaxTextBytes)
    return InvalidArgumentError(std::string(file_) + ": larger than 1 GiB of text");
  scopes_.emplace_back();
  TPUMESH_RETURN_IF_ERROR(PrescanLocAliases());
  TPUMESH_RETURN_IF_ERROR(ParseTopLevel());
  if (module_.funcs.empty()) return InvalidArgumentError(std::string(file_) + ":1:1: no func.func in the module");
  return std::move(module_);
}

// JAX prints the #loc aliases after the module that uses them: read every
// line that starts with "#name = loc(" first, so an op's location resolves
// as it is read.
Status Parser::PrescanLocAliases() {
  size_t at = 0;
  int line = 1;
  while (at < s_.size()) {
    const size_t end = std::min(s_.find('\n', at), s_.size());
    if (s_[at] == '#' && s_.substr(at, end - at).find(" = loc(") != std::string_view::npos) {
      pos_ = at;
      line_ = line;
      col_ = 1;
      TPUMESH_ASSIGN_OR_RETURN(std::string name, Suffix('#'));
      TPUMESH_RETURN_IF_ERROR(Expect("="));
      LocInfo info;
      TPUMESH_RETURN_IF_ERROR(ParseLoc(&info));
      loc_aliases_[name] = std::move(info);
    }
    at = end + 1;
    ++line;
  }
  pos_ = 0;
  line_ = 1;
  col_ = 1;
  if (s_.substr(0, 3) == "\xEF\xBB\xBF") Advance(3);
  return OkStatus();
}

Status Parser::ParseTopLevel() {
  bool in_module = false;
  bool seen_module = false;
  while (true) {
    Skip();
    if (AtEnd()) break;
    if (Peek() == '#') {  // #alias = ...
      TPUMESH_ASSIGN_OR_RETURN(std::string name, Suffix('#'));
      TPUMESH_RETURN_IF_ERROR(Expect("="));
      if (LookaheadWord("loc")) {
        LocInfo info;
        TPUMESH_RETURN_IF_ERROR(ParseLoc(&info));
        loc_aliases_[name] = std::move(info);
      } else {
        Attr a;
        TPUMESH_RETURN_IF_ERROR(AttrValue(&a));
        attr_aliases_[name] = std::move(a);
      }
      continue;
    }
    if (Lookahead("\"builtin.module\"")) {
      if (seen_module) return Error("a second module");
      seen_module = true;
      TPUMESH_RETURN_IF_ERROR(ParseGenericModule());
      continue;
    }
    if (ConsumeWord("module")) {
      if (seen_module) return Error("a second module");
      seen_module = true;
      if (Lookahead("@")) {
        TPUMESH_ASSIGN_OR_RETURN(module_.name, Suffix('@'));
      }
      if (ConsumeWord("attributes")) {
        Attr d;
        TPUMESH_RETURN_IF_ERROR(AttrDict(&d));
        module_.attrs = std::move(d.dict);
      }
      TPUMESH_RETURN_IF_ERROR(Expect("{"));
      in_module = true;
      TPUMESH_RETURN_IF_ERROR(ParseModuleBody());
      TPUMESH_RETURN_IF_ERROR(Expect("}"));
      Skip();
      if (LookaheadWord("loc")) {
        LocInfo ignored;
        TPUMESH_RETURN_IF_ERROR(ParseLoc(&ignored));
      }
      continue;
    }
    if (LookaheadWord("func.func") || LookaheadWord("func")) {
      if (seen_module && !in_module) return Error("func.func after the module");
      TPUMESH_RETURN_IF_ERROR(ParseFunc());
      continue;
    }
    return Error("expected 'module', 'func.func' or a #alias, found " + Near());
  }
  return OkStatus();
}

// "builtin.module"() <{sym_name = "m"}> ({ "func.func"() <{...}> ({...}) ...
// }) {attrs} : () -> ()
Status Parser::ParseGenericModule() {
  Block top;
  TPUMESH_RETURN_IF_ERROR(ParseOp(&top));
  Op& m = top.ops.back();
  if (const Attr* n = m.Find("sym_name"); n && n->kind == Attr::Kind::kString) module_.name = n->s;
  for (auto& [k, v] : m.attrs)
    if (k != "sym_name") module_.attrs.emplace_back(k, v);
  if (m.regions.size() != 1 || m.regions[0].blocks.size() != 1)
    return InvalidArgumentError(module_.Where(m.loc) + ": builtin.module needs one region");
  for (Op& op : m.regions[0].blocks[0].ops) {
    if (op.name == "func.func") {
      TPUMESH_RETURN_IF_ERROR(GenericFunc(op));
    } else if (op.name == "sdy.mesh") {
      if (const Attr* n = op.Find("sym_name"); n && n->kind == Attr::Kind::kString) op.callee = n->s;
      module_.ops.push_back(std::move(op));
    } else {
      return InvalidArgumentError(module_.Where(op.loc) + ": unexpected " + Quoted(op.name) +
                                  " in the module (expected func.func or sdy.mesh)");
    }
  }
  return OkStatus();
}

// A generic "func.func"() <{sym_name, sym_visibility, arg_attrs, res_attrs,
// function_type}> ({^bb0(args): ...}) read as a Func.
Status Parser::GenericFunc(const Op& op) {
  Func f;
  f.loc = op.loc;
  const Attr* name = op.Find("sym_name");
  if (!name || name->kind != Attr::Kind::kString)
    return InvalidArgumentError(module_.Where(op.loc) + ": func.func without sym_name");
  f.name = name->s;
  for (const Func& g : module_.funcs)
    if (g.name == f.name) return InvalidArgumentError(module_.Where(op.loc) + ": function @" + f.name + " defined twice");
  if (const Attr* v = op.Find("sym_visibility"); v && v->kind == Attr::Kind::kString) f.is_public = v->s != "private";
  if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1)
    return InvalidArgumentError(module_.Where(op.loc) + ": function @" + f.name + " needs one body");
  f.body = op.regions[0];
  const Block& entry = f.body.blocks[0];
  f.arg_types = entry.arg_types;
  const Attr* aa = op.Find("arg_attrs");
  for (size_t k = 0; k < entry.args.size(); ++k) {
    Attr d;
    d.kind = Attr::Kind::kDict;
    if (aa && aa->kind == Attr::Kind::kList && k < aa->list.size()) d = aa->list[k];
    f.arg_attrs.push_back(std::move(d));
  }
  if (entry.ops.empty() || entry.ops.back().name != "func.return")
    return InvalidArgumentError(module_.Where(op.loc) + ": function @" + f.name + " does not end with return");
  f.result_types = entry.ops.back().operand_types;
  const Attr* ra = op.Find("res_attrs");
  for (size_t k = 0; k < f.result_types.size(); ++k) {
    Attr d;
    d.kind = Attr::Kind::kDict;
    if (ra && ra->kind == Attr::Kind::kList && k < ra->list.size()) d = ra->list[k];
    f.result_attrs.push_back(std::move(d));
  }
  module_.funcs.push_back(std::move(f));
  return OkStatus();
}

Status Parser::ParseModuleBody() {
  while (true) {
    Skip();
    if (Peek() == '}' || AtEnd()) return OkStatus();
    if (LookaheadWord("func.func")) {
      TPUMESH_RETURN_IF_ERROR(ParseFunc());
      continue;
    }
    if (LookaheadWord("sdy.mesh")) {
      Op op;
      op.loc = Here();
      ConsumeWord("sdy.mesh");
      op.name = "sdy.mesh";
      TPUMESH_ASSIGN_OR_RETURN(op.callee, Suffix('@'));
      TPUMESH_RETURN_IF_ERROR(Expect("="));
      Attr mesh;
      TPUMESH_RETURN_IF_ERROR(AttrValue(&mesh));
      op.attrs.emplace_back("mesh", std::move(mesh));
      if (Lookahead("{")) {
        Attr attrs;
        TPUMESH_RETURN_IF_ERROR(AttrDict(&attrs));
        for (auto& kv : attrs.dict) op.attrs.push_back(std::move(kv));
      }
      TPUMESH_RETURN_IF_ERROR(ParseOpLoc(&op));
      module_.ops.push_back(std::move(op));
      continue;
    }
    return Error("expected func.func or sdy.mesh in the module, found " + Near());
  }
}

Status Parser::ParseFunc() {
  Func& f = module_.funcs.emplace_back();
  f.loc = Here();
  if (!ConsumeWord("func.func")) ConsumeWord("func");
  if (ConsumeWord("public")) f.is_public = true;
  else if (ConsumeWord("private")) f.is_public = false;
  TPUMESH_ASSIGN_OR_RETURN(f.name, Suffix('@'));
  for (size_t k = 0; k + 1 < module_.funcs.size(); ++k)
    if (module_.funcs[k].name == f.name) return Error("function @" + f.name + " defined twice");
  scopes_.emplace_back();
  TPUMESH_RETURN_IF_ERROR(Expect("("));
  Block& entry = f.body.blocks.emplace_back();
  std::vector<TypedArg> args;
  TPUMESH_RETURN_IF_ERROR(ParseTypedArgs(&args));
  for (TypedArg& a : args) {
    TPUMESH_ASSIGN_OR_RETURN(int id, Define(a.name));
    entry.args.push_back(id);
    entry.arg_types.push_back(a.type);
    f.arg_types.push_back(std::move(a.type));
    f.arg_attrs.push_back(std::move(a.attrs));
  }
  if (Consume("->")) {
    if (Consume("(")) {
      if (!Consume(")")) {
        do {
          TPUMESH_ASSIGN_OR_RETURN(Type t, ParseType());
          Attr attrs;
          attrs.kind = Attr::Kind::kDict;
          if (Lookahead("{")) TPUMESH_RETURN_IF_ERROR(AttrDict(&attrs));
          f.result_types.push_back(std::move(t));
          f.result_attrs.push_back(std::move(attrs));
        } while (Consume(","));
        TPUMESH_RETURN_IF_ERROR(Expect(")"));
      }
    } else {
      TPUMESH_ASSIGN_OR_RETURN(Type t, ParseType());
      f.result_types.push_back(std::move(t));
      f.result_attrs.emplace_back().kind = Attr::Kind::kDict;
    }
  }
  if (ConsumeWord("attributes")) {
    Attr ignored;
    TPUMESH_RETURN_IF_ERROR(AttrDict(&ignored));
  }
  if (!Lookahead("{")) return Error("function @" + f.name + " has no body (declarations are not supported)");
  Advance();
  while (true) {
    Skip();
    if (AtEnd()) return Error("unterminated function @" + f.name);
    if (Peek() == '}') break;
    TPUMESH_RETURN_IF_ERROR(ParseOp(&entry));
  }
  Advance();
  if (LookaheadWord("loc")) {
    LocInfo info;
    TPUMESH_RETURN_IF_ERROR(ParseLoc(&info));
  }
  scopes_.pop_back();
  if (entry.ops.empty() || (entry.ops.back().name != "func.return" && entry.ops.back().name != "return"))
    return InvalidArgumentError(module_.Where(f.loc) + ": function @" + f.name + " does not end with return");
  return OkStatus();
}

// { [^bb0(%a: T, ...):] ops }  — implicit_args: the names a pretty form binds
// (while's iterArgs).
Status Parser::ParseRegion(Region* r, const std::vector<std::pair<std::string, Type>>* implicit_args) {
  TPUMESH_RETURN_IF_ERROR(Expect("{"));
  TPUMESH_RETURN_IF_ERROR(Enter());
  scopes_.emplace_back();
  Block& b = r->blocks.emplace_back();
  if (implicit_args) {
    for (const auto& [name, type] : *implicit_args) {
      TPUMESH_ASSIGN_OR_RETURN(int id, Define(name));
      b.args.push_back(id);
      b.arg_types.push_back(type);
    }
  }
  Skip();
  if (Peek() == '^') {
    TPUMESH_RETURN_IF_ERROR(Suffix('^').status());
    if (Consume("(")) {
      std::vector<TypedArg> args;
      TPUMESH_RETURN_IF_ERROR(ParseTypedArgs(&args));
      for (TypedArg& a : args) {
        TPUMESH_ASSIGN_OR_RETURN(int id, Define(a.name));
        b.args.push_back(id);
        b.arg_types.push_back(std::move(a.type));
      }
    }
    TPUMESH_RETURN_IF_ERROR(Expect(":"));
  }
  while (true) {
    Skip();
    if (AtEnd()) return Error("unterminated region");
    if (Peek() == '}') break;
    if (Peek() == '^') return Error("regions with more than one block are not supported");
    TPUMESH_RETURN_IF_ERROR(ParseOp(&b));
  }
  Advance();
  scopes_.pop_back();
  Leave();
  return OkStatus();
}

Status Parser::ParseOp(Block* block) {
  Op& op = block->ops.emplace_back();
  op.loc = Here();
  // results
  std::vector<std::pair<std::string, int>> result_names;  // name, count
  Skip();
  if (Peek() == '%') {
    do {
      TPUMESH_ASSIGN_OR_RETURN(std::string name, Suffix('%'));
      int count = 1;
      if (Peek() == ':') {
        Advance();
        TPUMESH_ASSIGN_OR_RETURN(int64_t c, Integer());
        if (c < 1 || c > 4096) return Error("bad result count");
        count = static_cast<int>(c);
      }
      result_names.emplace_back(name, count);
    } while (Consume(","));
    TPUMESH_RETURN_IF_ERROR(Expect("="));
  }
  size_t result_count = 0;
  for (const auto& r : result_names) result_count += static_cast<size_t>(r.second);
  Skip();
  const Location name_at = Here();
  if (Peek() == '"') {
    TPUMESH_ASSIGN_OR_RETURN(op.name, String());
    TPUMESH_RETURN_IF_ERROR(ParseGeneric(&op));
  } else {
    op.name = Ident();
    if (op.name.empty()) return Error("expected an op, found " + Near());
    if (op.name == "return") op.name = "func.return";
    if (op.name == "call") op.name = "func.call";
    TPUMESH_RETURN_IF_ERROR(ParsePretty(&op, result_count));
  }
  op.loc.line = name_at.line;
  op.loc.column = name_at.column;
  if (op.result_types.size() != result_count)
    return InvalidArgumentError(module_.Where(op.loc) + ": " + op.name + " has " +
                                std::to_string(result_count) + " result names but " +
                                std::to_string(op.result_types.size()) + " result types");
  if (op.operand_types.size() != op.operands.size())
    return InvalidArgumentError(module_.Where(op.loc) + ": " + op.name + " has " +
                                std::to_string(op.operands.size()) + " operands but " +
                                std::to_string(op.operand_types.size()) + " operand types");
  for (const auto& [name, count] : result_names) {
    TPUMESH_ASSIGN_OR_RETURN(int id, Define(name, count));
    for (int k = 0; k < count; ++k) op.results.push_back(id + k);
  }
  return OkStatus();
}

// "name"(%a, %b) <{props}> ({regions}) {attrs} : (T, T) -> T loc(...)
Status Parser::ParseGeneric(Op* op) {
  TPUMESH_RETURN_IF_ERROR(Expect("("));
  TPUMESH_RETURN_IF_ERROR(ParseOperands(op));
  if (Lookahead("[")) return Error("successor blocks are not supported");
  if (Consume("<{")) {
    pos_ -= 1;  // back onto the '{' of the property dict
    --col_;
    Attr props;
    TPUMESH_RETURN_IF_ERROR(AttrDict(&props));
    TPUMESH_RETURN_IF_ERROR(Expect(">"));
    for (auto& kv : props.dict) op->attrs.push_back(std::move(kv));
  }
  if (Lookahead("(")) {
    Advance();
    if (!Consume(")")) {
      do {
        Region& r = op->regions.emplace_back();
        TPUMESH_RETURN_IF_ERROR(ParseRegion(&r, nullptr));
      } while (Consume(","));
      TPUMESH_RETURN_IF_ERROR(Expect(")"));
    }
  }
  if (Lookahead("{")) {
    Attr attrs;
    TPUMESH_RETURN_IF_ERROR(AttrDict(&attrs));
    for (auto& kv : attrs.dict) op->attrs.push_back(std::move(kv));
  }
  TPUMESH_RETURN_IF_ERROR(Expect(":"));
  TPUMESH_ASSIGN_OR_RETURN(op->operand_types, TypeListMaybeParens());
  TPUMESH_RETURN_IF_ERROR(Expect("->"));
  TPUMESH_ASSIGN_OR_RETURN(op->result_types, TypeListMaybeParens());
  if (const Attr* c = op->Find("call_target_name"); c && c->kind == Attr::Kind::kString) op->callee = c->s;
  if (const Attr* c = op->Find("callee"); c && c->kind == Attr::Kind::kSymbol) op->callee = c->s;
  if (const Attr* c = op->Find("decomposition"); c && c->kind == Attr::Kind::kSymbol && op->name == "stablehlo.composite")
    op->callee = c->s;
  return ParseOpLoc(op);
}

}  // namespace tpumesh::hlo::reader

namespace tpumesh::hlo {

namespace {

// JAX's CPU lowering of lax.linalg.triangular_solve: custom_call
// @lapack_{s,d,c,z}trsm_ffi(a, b) with LAPACK's flags as characters in
// mhlo.backend_config (side L/R, uplo L/U, trans_x N/T/C, diag N/U), read as
// the stablehlo.triangular_solve it computes (the operand layouts are
// XLA's, not the values'). Any other custom call, or one of these with
// other operands or flags, is left as it is (refused by Verify).
void TrsmAsTriangularSolve(Op& op) {
  static const char* kTargets[] = {"lapack_strsm_ffi", "lapack_dtrsm_ffi", "lapack_ctrsm_ffi", "lapack_ztrsm_ffi"};
  if (op.name != "stablehlo.custom_call" || op.operands.size() != 2 ||
      std::find(std::begin(kTargets), std::end(kTargets), op.callee) == std::end(kTargets))
    return;
  const Attr* config = op.Find("mhlo.backend_config");
  if (!config || config->kind != Attr::Kind::kDict) return;
  auto flag = [&](const char* key, const char* allowed) -> char {
    const Attr* a = config->Find(key);
    if (!a || a->kind != Attr::Kind::kInt || a->i <= 0 || a->i > 127) return 0;
    const char c = static_cast<char>(a->i);
    return std::string_view(allowed).find(c) == std::string_view::npos ? 0 : c;
  };
  const char side = flag("side", "LR"), uplo = flag("uplo", "LU"), trans = flag("trans_x", "NTC"),
             diag = flag("diag", "NU");
  if (!side || !uplo || !trans || !diag) return;
  auto boolean = [](bool v) {
    Attr a;
    a.kind = Attr::Kind::kBool;
    a.i = v;
    return a;
  };
  Attr transpose;
  transpose.kind = Attr::Kind::kWord;
  transpose.s = trans == 'N' ? "NO_TRANSPOSE" : trans == 'T' ? "TRANSPOSE" : "ADJOINT";
  op.name = "stablehlo.triangular_solve";
  op.callee.clear();
  op.attrs = {{"left_side", boolean(side == 'L')},
              {"lower", boolean(uplo == 'L')},
              {"unit_diagonal", boolean(diag == 'U')},
              {"transpose_a", transpose}};
}

// jaxlib 0.4's portable artifacts carry the chlo ops VHLO has no version of
// as custom calls @mhlo.<op> with the op's attributes in mhlo.attributes
// (lax.erf: @mhlo.erf; lax.top_k: @mhlo.topk {k, largest = true}): read
// back as the chlo op when hlo/ has it. Anything else is left as it is.
void MhloCustomCallAsChlo(Op& op) {
  if (op.name != "stablehlo.custom_call" || op.callee.rfind("mhlo.", 0) != 0) return;
  std::string name = "chlo." + op.callee.substr(5);
  if (name == "chlo.topk") name = "chlo.top_k";
  if (!FindOp(name)) return;
  std::vector<std::pair<std::string, Attr>> attrs;
  if (const Attr* a = op.Find("mhlo.attributes"); a && a->kind == Attr::Kind::kDict) attrs = a->dict;
  if (name == "chlo.top_k") {  // chlo.top_k is the largest k
    bool largest = true;
    for (auto& [k, v] : attrs)
      if (k == "largest") largest = v.kind == Attr::Kind::kBool && v.i != 0;
    if (!largest) return;
    std::erase_if(attrs, [](const auto& kv) { return kv.first == "largest"; });
  }
  op.name = name;
  op.callee.clear();
  op.attrs = std::move(attrs);
}

// stablehlo.broadcast %x, sizes = [...] (jax 0.4's eager pmap writes it):
// the sizes prepended to x's shape, read as the broadcast_in_dim it is
// (x's dimensions the result's last ones).
void BroadcastAsBroadcastInDim(Op& op) {
  if (op.name != "stablehlo.broadcast" || op.operand_types.size() != 1 || op.result_types.size() != 1) return;
  const size_t rank = op.operand_types[0].dims.size(), out_rank = op.result_types[0].dims.size();
  if (out_rank < rank) return;
  Attr dims;
  dims.kind = Attr::Kind::kList;
  for (size_t k = 0; k < rank; ++k) {
    Attr d;
    d.kind = Attr::Kind::kInt;
    d.i = static_cast<int64_t>(out_rank - rank + k);
    dims.list.push_back(d);
  }
  op.name = "stablehlo.broadcast_in_dim";
  op.attrs = {{"broadcast_dimensions", std::move(dims)}};
}

// Each op's registry entry and typed attributes, once, so that nothing
// looks an op or an attribute up by name while the module runs.
void ResolveEntries(std::vector<Op>& ops) {
  for (Op& op : ops) {
    TrsmAsTriangularSolve(op);
    MhloCustomCallAsChlo(op);
    BroadcastAsBroadcastInDim(op);
    op.entry = FindOp(op.name);
    if (op.entry) op.typed = ResolveAttrs(op);
    for (Region& r : op.regions)
      for (Block& b : r.blocks) ResolveEntries(b.ops);
  }
}

}  // namespace

StatusOr<Module> ParseModule(std::string_view text, std::string_view file) {
  reader::Parser p(text, file);
  TPUMESH_ASSIGN_OR_RETURN(Module m, p.Run());
  for (Func& f : m.funcs)
    for (Block& b : f.body.blocks) ResolveEntries(b.ops);
  ResolveEntries(m.ops);
  return m;
}

StatusOr<Module> ReadModuleFile(const std::string& path) {
  // A regular file only: a FIFO or device would block or never end.
  TPUMESH_RETURN_IF_ERROR(CheckInputFile(path).status());
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(Quoted(path) + ": cannot open: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return InvalidArgumentError(Quoted(path) + ": cannot read its size");
  if (size > kMaxTextBytes) return InvalidArgumentError(Quoted(path) + ": larger than 1 GiB of text");
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), size)) return DataLossError(Quoted(path) + ": read failed");
  return ParseModule(text, path);
}

}  // namespace tpumesh::hlo
