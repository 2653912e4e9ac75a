// The StableHLO text reader's parser (hlo/module.h's ParseModule): a
// recursive-descent parser over the characters of the MLIR text, one function
// per construct of MLIR's grammar (https://mlir.llvm.org/docs/LangRef/) and one
// per pretty form that differs from the default "operands, key = value, :
// signature". hlo/'s internal header; its functions live by concern:
//   mlir_lexer.cc   lexemes (identifiers, strings, numbers) and types
//   mlir_attrs.cc   attributes (dicts, enums, sdy forms, dense literals) and locations
//   mlir_reader.cc  the generic form and the structure: module, funcs, regions, ops, values
//   mlir_pretty.cc  the dialects' pretty forms, turned into the generic form's attributes
#ifndef TPUMESH_HLO_MLIR_PARSER_H_
#define TPUMESH_HLO_MLIR_PARSER_H_

#include <cctype>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/printable.h"
#include "base/status.h"
#include "hlo/module.h"

namespace tpumesh::hlo::reader {

inline bool IsIdStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
inline bool IsIdChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$';
}
inline bool IsSuffixChar(char c) {  // %name, @name, ^name, #name
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$' ||
         c == '-';
}

// A parsed loc(...): its name and source, and the #loc aliases it refers to
// (resolved once the whole text is read: JAX prints them after the module).
struct LocInfo {
  std::string name, source;
  std::vector<std::string> refs;
};

// Dense literal elements before the type is known: scalars as text, with
// the literal's nesting shape.
struct DenseLiteral {
  std::vector<std::string> scalars;  // a complex element: its two parts, (re, im)
  bool complex = false;              // elements written as (re, im)
  std::vector<int64_t> shape;  // of nested lists; empty: one scalar
  bool hex_blob = false;
  std::string hex;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view file) : s_(text), file_(file) {}

  StatusOr<Module> Run();

 private:
  // ---- characters ----
  char Peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
  bool AtEnd() const { return pos_ >= s_.size(); }
  void Advance(size_t n = 1) {
    for (size_t i = 0; i < n && pos_ < s_.size(); ++i, ++pos_) {
      if (s_[pos_] == '\n') {
        ++line_;
        col_ = 1;
      } else {
        ++col_;
      }
    }
  }
  void Skip() {  // whitespace and // comments
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        Advance();
      } else if (c == '/' && Peek(1) == '/') {
        while (!AtEnd() && Peek() != '\n') Advance();
      } else {
        break;
      }
    }
  }
  bool Lookahead(std::string_view lit) {
    Skip();
    return s_.substr(pos_, lit.size()) == lit;
  }
  bool LookaheadWord(std::string_view w) {
    Skip();
    if (s_.substr(pos_, w.size()) != w) return false;
    const char after = pos_ + w.size() < s_.size() ? s_[pos_ + w.size()] : '\0';
    return !IsIdChar(after);
  }
  bool Consume(std::string_view lit) {
    if (!Lookahead(lit)) return false;
    Advance(lit.size());
    return true;
  }
  bool ConsumeWord(std::string_view w) {
    if (!LookaheadWord(w)) return false;
    Advance(w.size());
    return true;
  }
  Status Error(std::string what) const {
    return InvalidArgumentError(std::string(file_) + ":" + std::to_string(line_) + ":" +
                                std::to_string(col_) + ": " + what);
  }
  std::string Near() const {  // the text at the cursor, for messages
    std::string t(s_.substr(pos_, 24));
    const size_t nl = t.find('\n');
    if (nl != std::string::npos) t.resize(nl);
    if (t.empty()) return "the end of the file";
    return Quoted(t);
  }
  Status Expect(std::string_view lit) {
    if (Consume(lit)) return OkStatus();
    return Error("expected '" + std::string(lit) + "', found " + Near());
  }
  Location Here() const { return Location{line_, col_, "", ""}; }
  Status Enter() {
    if (++depth_ > kMaxDepth)
      return Error("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    return OkStatus();
  }
  void Leave() { --depth_; }

  // ---- lexemes ----
  std::string Ident();  // bare-id, may be empty
  StatusOr<std::string> Suffix(char sigil);  // %x, @x, ^x, #x: the name after the sigil
  StatusOr<std::string> String();
  // A number's text: [-]digits[.digits][e[+-]digits], 0x hex, or inf/nan.
  std::string NumberText();
  bool AtNumber();
  StatusOr<int64_t> Integer();

  // ---- types ----
  // The element type a word names; "complex" reads its <f32> or <f64> after it.
  StatusOr<ElementType> ElementTypeNamed(std::string_view w);
  StatusOr<Type> ParseType();
  StatusOr<Type> ParseTypeInner();
  // "(T, T)" or "T"
  StatusOr<std::vector<Type>> TypeListMaybeParens();
  Status SkipAttrDictAndLoc();  // a result's {attrs} and loc in a func signature

  // ---- attributes ----
  Status AttrDict(Attr* out);  // { key = value, unit_key, ... }
  // An optional ": type" after a scalar attribute.
  Status ScalarTypeSuffix(Attr* a);
  Status AttrValue(Attr* out);
  Status AttrValueInner(Attr* out);
  Status NumberAttr(const std::string& t, Attr* out);
  // #dialect<...>, #dialect.name<...>, or an alias #name.
  Status HashAttr(Attr* out);
  // sdy's bracketed forms, kept as a dict:
  //   <@mesh, [{"x"}, {}], replicated={"y"}> -> {mesh = @mesh, dims = [["x"], []]}
  //   <["x"=2, "y"=4]>                        -> {axes = [{"x" = 2}, {"y" = 4}]}
  //   <[<@mesh, [...]>, ...]>                 -> {list = [...]}
  Status SdyAngle(Attr* out);
  // <...> read whole, nested brackets and arrows included, and kept as its
  // text (a word): attributes nothing here interprets (sdy.op_sharding_rule).
  Status OpaqueAngle(Attr* out);
  // {"x", "y":(1)2} or {} or {?}: the axes of one dimension, as strings.
  Status SdyAxisSet(Attr* out);
  // [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]
  Status ConvDims(Attr* out);
  // dense<...> : tensor<...>
  Status Dense(Attr* out);
  // Nested [..] lists of scalars; counts[d] is the length of lists at depth d
  // (checked equal across the literal).
  Status DenseElements(DenseLiteral* lit, size_t depth, std::vector<int64_t>* counts);
  Status DenseBytes(const DenseLiteral& lit, Attr* out);
  Status ScalarBytes(const std::string& t, ElementType el, uint8_t* p);

  // ---- locations ----
  Status ParseLoc(LocInfo* out);
  Status LocBody(LocInfo* out);
  // An alias's name and source, each alias resolved once (memoised; a cycle
  // resolves to what was found before it), so fan-out is linear.
  const std::pair<std::string, std::string>& ResolveAlias(const std::string& alias, int depth);
  void ResolveLoc(const LocInfo& info, Location* loc, int depth = 0);

  // ---- values ----
  struct Scope {
    std::map<std::string, std::pair<int, int>> names;  // name -> (first id, count)
  };
  StatusOr<int> Define(const std::string& name, int count = 1);
  StatusOr<int> Use();  // %name or %name#k

  // ---- structure ----
  Status ParseTopLevel();
  Status ParseModuleBody();
  Status ParseGenericModule();
  Status GenericFunc(const Op& op);
  Status ParseFunc();
  Status ParseRegion(Region* r, const std::vector<std::pair<std::string, Type>>* implicit_args);
  Status ParseOp(Block* block);
  Status ParseGeneric(Op* op);
  // A pretty form, after its name: one function per form that differs from
  // PrettyDefault's "operands, key = value, : signature".
  Status ParsePretty(Op* op, size_t result_count);
  Status PrettyConstant(Op* op, size_t result_count);
  Status PrettyWhile(Op* op, size_t result_count);
  Status PrettyReduce(Op* op, size_t result_count);
  Status PrettyManualComputation(Op* op, size_t result_count);
  Status PrettyConvolution(Op* op, size_t result_count);
  Status PrettyDefault(Op* op, size_t result_count);
  Status ParseSignature(Op* op, size_t result_count, bool required);
  Status PrettyValue(const std::string& key, Op* op);
  Status ParseOpLoc(Op* op);
  Status PrescanLocAliases();
  // `%name: T [{attrs}] [loc(...)]`: a block, function or region argument.
  struct TypedArg {
    std::string name;
    Type type;
    Attr attrs;
  };
  StatusOr<TypedArg> ParseTypedArg();
  // `item, item, ...]` up to `close` (the opening bracket already read),
  // each item read by `item`; an empty list is just `close`.
  template <typename F>
  Status ListUntil(std::string_view close, F&& item) {
    if (Consume(close)) return OkStatus();
    do {
      TPUMESH_RETURN_IF_ERROR(item());
    } while (Consume(","));
    return Expect(close);
  }
  // `%a, %b, ...)` operands, the '(' already consumed; empty: just `)`.
  Status ParseOperands(Op* op);
  // `(arg, arg, ...)` of ParseTypedArg; the '(' already consumed.
  Status ParseTypedArgs(std::vector<TypedArg>* out);

  std::string_view s_;
  std::string_view file_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
  int depth_ = 0;
  // Inside a dense attribute's type: `index` elements read as i64 (custom
  // calls' operand_layouts = [dense<[0, 1]> : tensor<2xindex>]); tensors the
  // module computes with never have them.
  bool index_elements_ = false;
  Module module_;
  std::vector<Scope> scopes_;
  std::map<std::string, LocInfo> loc_aliases_;
  std::map<std::string, Attr> attr_aliases_;
  std::map<std::string, std::pair<std::string, std::string>> resolved_;
};

}  // namespace tpumesh::hlo::reader

#endif  // TPUMESH_HLO_MLIR_PARSER_H_
