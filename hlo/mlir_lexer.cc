// MLIR lexemes (identifiers, sigil names, strings, numbers) and types.
#include "hlo/mlir_parser.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

namespace tpumesh::hlo::reader {

std::string Parser::Ident() {
  Skip();
  size_t n = 0;
  if (!IsIdStart(Peek())) return "";
  while (IsIdChar(Peek(n))) ++n;
  std::string r(s_.substr(pos_, n));
  Advance(n);
  return r;
}

StatusOr<std::string> Parser::Suffix(char sigil) {
  Skip();
  if (Peek() != sigil) return Error(std::string("expected '") + sigil + "', found " + Near());
  Advance();
  if (Peek() == '"') return String();
  size_t n = 0;
  while (IsSuffixChar(Peek(n))) ++n;
  if (n == 0) return Error(std::string("expected a name after '") + sigil + "'");
  std::string r(s_.substr(pos_, n));
  Advance(n);
  return r;
}

StatusOr<std::string> Parser::String() {
  Skip();
  if (Peek() != '"') return Error("expected a string, found " + Near());
  Advance();
  std::string out;
  while (true) {
    if (AtEnd()) return Error("unterminated string");
    const char c = Peek();
    if (c == '"') {
      Advance();
      return out;
    }
    if (c == '\n') return Error("unterminated string");
    if (c == '\\') {
      const char e = Peek(1);
      if (e == '"' || e == '\\') {
        out += e;
        Advance(2);
      } else if (e == 'n') {
        out += '\n';
        Advance(2);
      } else if (e == 't') {
        out += '\t';
        Advance(2);
      } else if (std::isxdigit(static_cast<unsigned char>(e)) &&
                 std::isxdigit(static_cast<unsigned char>(Peek(2)))) {
        out += static_cast<char>(std::stoi(std::string(s_.substr(pos_ + 1, 2)), nullptr, 16));
        Advance(3);
      } else {
        return Error("bad escape in a string");
      }
      continue;
    }
    out += c;
    Advance();
  }
}

std::string Parser::NumberText() {
  Skip();
  size_t n = 0;
  if (Peek() == '-' || Peek() == '+') ++n;
  if (Peek(n) == '0' && (Peek(n + 1) == 'x' || Peek(n + 1) == 'X')) {
    n += 2;
    while (std::isxdigit(static_cast<unsigned char>(Peek(n)))) ++n;
  } else {
    const size_t digits_from = n;
    while (std::isdigit(static_cast<unsigned char>(Peek(n)))) ++n;
    if (n == digits_from) return "";
    if (Peek(n) == '.') {
      ++n;
      while (std::isdigit(static_cast<unsigned char>(Peek(n)))) ++n;
    }
    if (Peek(n) == 'e' || Peek(n) == 'E') {
      size_t m = n + 1;
      if (Peek(m) == '+' || Peek(m) == '-') ++m;
      if (std::isdigit(static_cast<unsigned char>(Peek(m)))) {
        n = m;
        while (std::isdigit(static_cast<unsigned char>(Peek(n)))) ++n;
      }
    }
  }
  std::string r(s_.substr(pos_, n));
  Advance(n);
  return r;
}

bool Parser::AtNumber() {
  Skip();
  const char c = Peek();
  return std::isdigit(static_cast<unsigned char>(c)) ||
         ((c == '-' || c == '+') && std::isdigit(static_cast<unsigned char>(Peek(1))));
}

StatusOr<int64_t> Parser::Integer() {
  const std::string t = NumberText();
  if (t.empty()) return Error("expected an integer, found " + Near());
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(t.c_str(), &end, 0);
  if (errno || *end) return Error("bad integer " + Quoted(t));
  return static_cast<int64_t>(v);
}

StatusOr<ElementType> Parser::ElementTypeNamed(std::string_view w) {
  static const std::map<std::string_view, ElementType> kTypes = {
      {"i1", ElementType::kPred},  {"i8", ElementType::kI8},    {"i16", ElementType::kI16},
      {"i32", ElementType::kI32},  {"i64", ElementType::kI64},  {"ui8", ElementType::kU8},
      {"ui16", ElementType::kU16}, {"ui32", ElementType::kU32}, {"ui64", ElementType::kU64},
      {"f16", ElementType::kF16},  {"bf16", ElementType::kBF16}, {"f32", ElementType::kF32},
      {"f64", ElementType::kF64},  {"si32", ElementType::kI32}, {"si64", ElementType::kI64},
      {"si8", ElementType::kI8},   {"si16", ElementType::kI16}};
  if (w == "complex") {  // complex<f32>, complex<f64>: the word is read, its parts follow
    TPUMESH_RETURN_IF_ERROR(Expect("<"));
    const std::string part = Ident();
    const auto p = kTypes.find(part);
    if (p == kTypes.end() || (p->second != ElementType::kF32 && p->second != ElementType::kF64))
      return Error("unsupported element type complex<" + part + "> (supported: complex<f32>, complex<f64>)");
    TPUMESH_RETURN_IF_ERROR(Expect(">"));
    return p->second == ElementType::kF32 ? ElementType::kC64 : ElementType::kC128;
  }
  const auto it = kTypes.find(w);
  if (it == kTypes.end())
    return Error("unsupported element type " + Quoted(w) +
                 " (supported: i1, i8-i64, ui8-ui64, f16, bf16, f32, f64, complex<f32>, complex<f64>)");
  return it->second;
}

StatusOr<Type> Parser::ParseType() {
  Skip();
  TPUMESH_RETURN_IF_ERROR(Enter());
  auto r = ParseTypeInner();
  Leave();
  return r;
}

StatusOr<Type> Parser::ParseTypeInner() {
  Type t;
  if (Consume("!stablehlo.token")) {
    t.kind = Type::Kind::kToken;
    return t;
  }
  if (ConsumeWord("tuple")) {
    t.kind = Type::Kind::kTuple;
    TPUMESH_RETURN_IF_ERROR(Expect("<"));
    if (!Consume(">")) {
      do {
        TPUMESH_ASSIGN_OR_RETURN(Type e, ParseType());
        t.elements.push_back(std::move(e));
      } while (Consume(","));
      TPUMESH_RETURN_IF_ERROR(Expect(">"));
    }
    return t;
  }
  if (ConsumeWord("tensor")) {
    TPUMESH_RETURN_IF_ERROR(Expect("<"));
    Skip();
    // dims: (digits|?) 'x' ... then the element type
    int64_t elements = 1;
    while (true) {
      Skip();
      if (Peek() == '?') return Error("dynamic shapes (tensor<?x...>) are not supported");
      if (!std::isdigit(static_cast<unsigned char>(Peek()))) break;
      size_t n = 0;
      while (std::isdigit(static_cast<unsigned char>(Peek(n)))) ++n;
      if (Peek(n) != 'x') break;  // a type like i64 never starts with a digit
      const std::string digits(s_.substr(pos_, n));
      if (n > 15) return Error("tensor dimension " + digits + " is too large");
      const int64_t d = std::stoll(digits);
      if (d > 0 && elements > kMaxElements / d)
        return Error("tensor type with more than 2^40 elements");
      elements *= d;
      t.dims.push_back(d);
      if (static_cast<int>(t.dims.size()) > kMaxRank)
        return Error("tensor rank above " + std::to_string(kMaxRank));
      Advance(n + 1);
    }
    if (t.dims.size() && elements == 0) {
      // zero-size tensors are fine
    }
    const std::string el = Ident();
    if (el.empty()) return Error("expected an element type, found " + Near());
    if (el == "index" && index_elements_) {
      t.element = ElementType::kI64;  // layouts' dense<...> : tensor<3xindex>
    } else {
      TPUMESH_ASSIGN_OR_RETURN(t.element, ElementTypeNamed(el));
    }
    if (Consume(",")) return Error("tensor encodings (bounds, sparsity) are not supported");
    TPUMESH_RETURN_IF_ERROR(Expect(">"));
    return t;
  }
  const size_t at = pos_;
  const std::string w = Ident();
  if (w.empty()) return Error("expected a type, found " + Near());
  auto el = ElementTypeNamed(w);
  if (el.ok()) {  // a bare scalar type: a rank-0 tensor for our purposes
    t.element = *el;
    return t;
  }
  if (w == "index") {
    t.element = ElementType::kI64;
    return t;
  }
  pos_ = at;
  return el.status();
}

StatusOr<std::vector<Type>> Parser::TypeListMaybeParens() {
  std::vector<Type> out;
  if (Consume("(")) {
    if (Consume(")")) return out;
    do {
      TPUMESH_ASSIGN_OR_RETURN(Type t, ParseType());
      TPUMESH_RETURN_IF_ERROR(SkipAttrDictAndLoc());
      out.push_back(std::move(t));
    } while (Consume(","));
    TPUMESH_RETURN_IF_ERROR(Expect(")"));
    return out;
  }
  TPUMESH_ASSIGN_OR_RETURN(Type t, ParseType());
  out.push_back(std::move(t));
  return out;
}

Status Parser::SkipAttrDictAndLoc() {
  if (Lookahead("{")) {
    Attr ignored;
    TPUMESH_RETURN_IF_ERROR(AttrDict(&ignored));
  }
  if (LookaheadWord("loc")) {
    LocInfo ignored;
    TPUMESH_RETURN_IF_ERROR(ParseLoc(&ignored));
  }
  return OkStatus();
}

}  // namespace tpumesh::hlo::reader
