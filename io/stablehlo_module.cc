// The StableHLO text reader (io/stablehlo_module.h): a recursive-descent
// parser over the characters of the MLIR text, one function per construct of
// MLIR's grammar (https://mlir.llvm.org/docs/LangRef/) and one per pretty
// form that differs from the default "operands, key = value, : signature".
#include "io/stablehlo_module.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/input_file.h"
#include "base/printable.h"
#include "kernels/bf16.h"

namespace tpumesh::hlo {

std::string_view ElementTypeName(ElementType t) {
  switch (t) {
    case ElementType::kPred: return "i1";
    case ElementType::kI8: return "i8";
    case ElementType::kI16: return "i16";
    case ElementType::kI32: return "i32";
    case ElementType::kI64: return "i64";
    case ElementType::kU8: return "ui8";
    case ElementType::kU16: return "ui16";
    case ElementType::kU32: return "ui32";
    case ElementType::kU64: return "ui64";
    case ElementType::kF16: return "f16";
    case ElementType::kBF16: return "bf16";
    case ElementType::kF32: return "f32";
    case ElementType::kF64: return "f64";
  }
  return "?";
}

int ElementTypeBytes(ElementType t) {
  switch (t) {
    case ElementType::kPred:
    case ElementType::kI8:
    case ElementType::kU8: return 1;
    case ElementType::kI16:
    case ElementType::kU16:
    case ElementType::kF16:
    case ElementType::kBF16: return 2;
    case ElementType::kI32:
    case ElementType::kU32:
    case ElementType::kF32: return 4;
    case ElementType::kI64:
    case ElementType::kU64:
    case ElementType::kF64: return 8;
  }
  return 0;
}

bool IsFloat(ElementType t) {
  return t == ElementType::kF16 || t == ElementType::kBF16 || t == ElementType::kF32 ||
         t == ElementType::kF64;
}

bool IsUnsigned(ElementType t) {
  return t == ElementType::kU8 || t == ElementType::kU16 || t == ElementType::kU32 ||
         t == ElementType::kU64;
}

uint16_t FloatToHalf(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (a < 0x38800000u) {  // a subnormal half (or zero): scale and round once
    const float m = std::bit_cast<float>(a) * 16777216.0f;  // x 2^24: units of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(m)));
  }
  // normal: rebias the exponent, round the 13 dropped bits to nearest even
  const uint32_t lsb = (a >> 13) & 1u;
  const uint32_t r = (a + 0xfffu + lsb) >> 13;
  return static_cast<uint16_t>(sign | (r - (112u << 10)));
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) / 16777216.0f;  // m x 2^-24
    return sign ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

int64_t Type::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t Type::size_bytes() const {
  if (kind == Kind::kTuple) {
    int64_t s = 0;
    for (const Type& e : elements) s += e.size_bytes();
    return s;
  }
  if (kind == Kind::kToken) return 0;
  return num_elements() * ElementTypeBytes(element);
}

bool Type::operator==(const Type& o) const {
  return kind == o.kind && element == o.element && dims == o.dims && elements == o.elements;
}

std::string Type::ToString() const {
  if (kind == Kind::kToken) return "!stablehlo.token";
  if (kind == Kind::kTuple) {
    std::string s = "tuple<";
    for (size_t i = 0; i < elements.size(); ++i) s += (i ? ", " : "") + elements[i].ToString();
    return s + ">";
  }
  std::string s = "tensor<";
  for (int64_t d : dims) s += std::to_string(d) + "x";
  return s + std::string(ElementTypeName(element)) + ">";
}

const Attr* Attr::Find(std::string_view key) const {
  for (const auto& [k, v] : dict)
    if (k == key) return &v;
  return nullptr;
}

StatusOr<std::vector<int64_t>> Attr::Ints() const {
  if (kind == Kind::kInt) return std::vector<int64_t>{i};
  if (kind == Kind::kDense && IsFloat(type.element) == false && type.kind == Type::Kind::kTensor) {
    const int b = ElementTypeBytes(type.element);
    const int64_t n = type.num_elements();
    std::vector<int64_t> out(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) {
      const uint8_t* p = bytes.data() + (splat ? 0 : e * b);
      int64_t v = 0;
      switch (b) {
        case 1: v = IsUnsigned(type.element) || type.element == ElementType::kPred
                        ? static_cast<int64_t>(*p) : static_cast<int8_t>(*p); break;
        case 2: {
          int16_t x;
          std::memcpy(&x, p, 2);
          v = IsUnsigned(type.element) ? static_cast<int64_t>(static_cast<uint16_t>(x)) : static_cast<int64_t>(x);
          break;
        }
        case 4: {
          int32_t x;
          std::memcpy(&x, p, 4);
          v = IsUnsigned(type.element) ? static_cast<int64_t>(static_cast<uint32_t>(x)) : static_cast<int64_t>(x);
          break;
        }
        default: std::memcpy(&v, p, 8);
      }
      out[static_cast<size_t>(e)] = v;
    }
    return out;
  }
  if (kind != Kind::kList) return InvalidArgumentError("expected a list of integers");
  std::vector<int64_t> out;
  out.reserve(list.size());
  for (const Attr& a : list) {  // nested lists ([[1, 1], [0, 0]]) flatten row-major
    if (a.kind == Kind::kBool) {
      out.push_back(a.i);
      continue;
    }
    if (a.kind == Kind::kList) {
      auto inner = a.Ints();
      if (!inner.ok()) return inner.status();
      out.insert(out.end(), inner->begin(), inner->end());
      continue;
    }
    if (a.kind != Kind::kInt) return InvalidArgumentError("expected a list of integers");
    out.push_back(a.i);
  }
  return out;
}

const Attr* Op::Find(std::string_view key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

const Func* Module::FindFunc(std::string_view n) const {
  for (const Func& f : funcs)
    if (f.name == n) return &f;
  return nullptr;
}

const Attr* Module::FindAttr(std::string_view key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

std::string Module::Where(const Location& loc) const {
  return file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column);
}

namespace {

bool IsIdStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$';
}
bool IsSuffixChar(char c) {  // %name, @name, ^name, #name
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
  std::vector<std::string> scalars;
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
  std::string Ident() {  // bare-id, may be empty
    Skip();
    size_t n = 0;
    if (!IsIdStart(Peek())) return "";
    while (IsIdChar(Peek(n))) ++n;
    std::string r(s_.substr(pos_, n));
    Advance(n);
    return r;
  }
  StatusOr<std::string> Suffix(char sigil) {  // %x, @x, ^x, #x: the name after the sigil
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
  StatusOr<std::string> String() {
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
  // A number's text: [-]digits[.digits][e[+-]digits], 0x hex, or inf/nan.
  std::string NumberText() {
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
  bool AtNumber() {
    Skip();
    const char c = Peek();
    return std::isdigit(static_cast<unsigned char>(c)) ||
           ((c == '-' || c == '+') && std::isdigit(static_cast<unsigned char>(Peek(1))));
  }
  StatusOr<int64_t> Integer() {
    const std::string t = NumberText();
    if (t.empty()) return Error("expected an integer, found " + Near());
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(t.c_str(), &end, 0);
    if (errno || *end) return Error("bad integer " + Quoted(t));
    return static_cast<int64_t>(v);
  }

  // ---- types ----
  StatusOr<ElementType> ElementTypeNamed(std::string_view w) {
    static const std::map<std::string_view, ElementType> kTypes = {
        {"i1", ElementType::kPred},  {"i8", ElementType::kI8},    {"i16", ElementType::kI16},
        {"i32", ElementType::kI32},  {"i64", ElementType::kI64},  {"ui8", ElementType::kU8},
        {"ui16", ElementType::kU16}, {"ui32", ElementType::kU32}, {"ui64", ElementType::kU64},
        {"f16", ElementType::kF16},  {"bf16", ElementType::kBF16}, {"f32", ElementType::kF32},
        {"f64", ElementType::kF64},  {"si32", ElementType::kI32}, {"si64", ElementType::kI64},
        {"si8", ElementType::kI8},   {"si16", ElementType::kI16}};
    const auto it = kTypes.find(w);
    if (it == kTypes.end())
      return Error("unsupported element type " + Quoted(w) +
                   " (supported: i1, i8-i64, ui8-ui64, f16, bf16, f32, f64)");
    return it->second;
  }
  StatusOr<Type> ParseType() {
    Skip();
    TPUMESH_RETURN_IF_ERROR(Enter());
    auto r = ParseTypeInner();
    Leave();
    return r;
  }
  StatusOr<Type> ParseTypeInner() {
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
      if (el == "complex") return Error("complex element types are not supported");
      TPUMESH_ASSIGN_OR_RETURN(t.element, ElementTypeNamed(el));
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
  // "(T, T)" or "T"
  StatusOr<std::vector<Type>> TypeListMaybeParens() {
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
  Status SkipAttrDictAndLoc() {  // a result's {attrs} and loc in a func signature
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

  // ---- attributes ----
  Status AttrDict(Attr* out) {  // { key = value, unit_key, ... }
    TPUMESH_RETURN_IF_ERROR(Expect("{"));
    TPUMESH_RETURN_IF_ERROR(Enter());
    out->kind = Attr::Kind::kDict;
    if (!Consume("}")) {
      do {
        Skip();
        std::string key;
        if (Peek() == '"') {
          TPUMESH_ASSIGN_OR_RETURN(key, String());
        } else {
          key = Ident();
        }
        if (key.empty()) return Error("expected an attribute name, found " + Near());
        Attr v;
        if (Consume("=")) {
          TPUMESH_RETURN_IF_ERROR(AttrValue(&v));
        }
        out->dict.emplace_back(std::move(key), std::move(v));
      } while (Consume(","));
      TPUMESH_RETURN_IF_ERROR(Expect("}"));
    }
    Leave();
    return OkStatus();
  }
  // An optional ": type" after a scalar attribute.
  Status ScalarTypeSuffix(Attr* a) {
    if (Lookahead(":") && !Lookahead("::")) {
      const size_t at = pos_;
      const int line = line_, col = col_;
      Advance();
      Skip();
      // Only a scalar type ("1 : i64"); "dim = 0 : tensor<4xi32>" is the
      // op's signature.
      if (!(Peek() == 'i' || Peek() == 'u' || Peek() == 'f' || Peek() == 'b' || Peek() == 's') ||
          LookaheadWord("tensor") || LookaheadWord("tuple")) {
        pos_ = at;
        line_ = line;
        col_ = col;
        return OkStatus();
      }
      auto t = ParseType();
      if (!t.ok()) {  // not a type: the ':' belongs to the op
        pos_ = at;
        line_ = line;
        col_ = col;
        return OkStatus();
      }
      if (a->kind == Attr::Kind::kInt && IsFloat(t->element)) {
        a->kind = Attr::Kind::kFloat;
        a->f = static_cast<double>(a->i);
      }
    }
    return OkStatus();
  }
  Status AttrValue(Attr* out) {
    TPUMESH_RETURN_IF_ERROR(Enter());
    Status st = AttrValueInner(out);
    Leave();
    return st;
  }
  Status AttrValueInner(Attr* out) {
    Skip();
    const char c = Peek();
    if (c == '"') {
      out->kind = Attr::Kind::kString;
      TPUMESH_ASSIGN_OR_RETURN(out->s, String());
      return ScalarTypeSuffix(out);
    }
    if (c == '@') {
      out->kind = Attr::Kind::kSymbol;
      TPUMESH_ASSIGN_OR_RETURN(out->s, Suffix('@'));
      return OkStatus();
    }
    if (c == '[') {
      Advance();
      out->kind = Attr::Kind::kList;
      if (!Consume("]")) {
        do {
          Attr e;
          TPUMESH_RETURN_IF_ERROR(AttrValue(&e));
          out->list.push_back(std::move(e));
        } while (Consume(","));
        TPUMESH_RETURN_IF_ERROR(Expect("]"));
      }
      return OkStatus();
    }
    if (c == '{') return AttrDict(out);
    if (c == '<') {  // an sdy sharding or mesh written without its #sdy prefix
      return SdyAngle(out);
    }
    if (c == '#') return HashAttr(out);
    if (AtNumber()) {
      const std::string t = NumberText();
      TPUMESH_RETURN_IF_ERROR(NumberAttr(t, out));
      return ScalarTypeSuffix(out);
    }
    if (LookaheadWord("dense")) return Dense(out);
    if (LookaheadWord("dense_resource"))
      return Error("dense_resource constants (blobs kept outside the text) are not supported");
    if (LookaheadWord("array")) {  // array<i64: 1, 2>
      ConsumeWord("array");
      TPUMESH_RETURN_IF_ERROR(Expect("<"));
      const std::string el = Ident();
      if (el.empty()) return Error("expected an element type in array<...>");
      out->kind = Attr::Kind::kList;
      if (Consume(":")) {
        do {
          Attr e;
          Skip();
          if (LookaheadWord("true") || LookaheadWord("false")) {
            e.kind = Attr::Kind::kBool;
            e.i = Ident() == "true";
          } else {
            const std::string t = NumberText();
            TPUMESH_RETURN_IF_ERROR(NumberAttr(t, &e));
          }
          out->list.push_back(std::move(e));
        } while (Consume(","));
      }
      return Expect(">");
    }
    if (LookaheadWord("true") || LookaheadWord("false")) {
      out->kind = Attr::Kind::kBool;
      out->i = LookaheadWord("true");
      Ident();
      return OkStatus();
    }
    if (LookaheadWord("unit")) {
      Ident();
      out->kind = Attr::Kind::kUnit;
      return OkStatus();
    }
    if (LookaheadWord("tensor") || LookaheadWord("tuple")) {
      out->kind = Attr::Kind::kType;
      TPUMESH_ASSIGN_OR_RETURN(out->type, ParseType());
      return OkStatus();
    }
    if (Peek() == '(') {  // a function type attribute: (T) -> T
      out->kind = Attr::Kind::kType;
      TPUMESH_ASSIGN_OR_RETURN(auto ins, TypeListMaybeParens());
      if (Consume("->")) {
        TPUMESH_ASSIGN_OR_RETURN(auto outs, TypeListMaybeParens());
      }
      return OkStatus();
    }
    const std::string w = Ident();
    if (w.empty()) return Error("expected an attribute value, found " + Near());
    out->kind = Attr::Kind::kWord;
    out->s = w;
    return OkStatus();
  }
  Status NumberAttr(const std::string& t, Attr* out) {
    if (t.empty()) return Error("expected a number, found " + Near());
    const bool is_float = t.find_first_of(".eE") != std::string::npos &&
                          t.find("0x") == std::string::npos && t.find("0X") == std::string::npos;
    errno = 0;
    char* end = nullptr;
    if (is_float) {
      out->kind = Attr::Kind::kFloat;
      out->f = std::strtod(t.c_str(), &end);
    } else {
      out->kind = Attr::Kind::kInt;
      if (t[0] == '-') {
        out->i = std::strtoll(t.c_str(), &end, 0);
      } else {
        out->i = static_cast<int64_t>(std::strtoull(t.c_str(), &end, 0));
      }
    }
    if (*end || errno == ERANGE) return Error("bad number " + Quoted(t));
    return OkStatus();
  }
  // #dialect<...>, #dialect.name<...>, or an alias #name.
  Status HashAttr(Attr* out) {
    TPUMESH_ASSIGN_OR_RETURN(std::string name, Suffix('#'));
    if (!Lookahead("<")) {
      const auto it = attr_aliases_.find(name);
      if (it == attr_aliases_.end()) return Error("unknown attribute alias #" + name);
      *out = it->second;
      return OkStatus();
    }
    if (name == "stablehlo" || name == "chlo" || name == "mhlo") {  // an enum: #stablehlo<precision DEFAULT>
      TPUMESH_RETURN_IF_ERROR(Expect("<"));
      Ident();  // the enum's kind
      out->kind = Attr::Kind::kWord;
      out->s = Ident();
      if (out->s.empty()) return Error("expected an enum value, found " + Near());
      if (Lookahead(",")) return Error("enum lists are not supported");
      return Expect(">");
    }
    if (name == "stablehlo.conv" || name == "mhlo.conv") {
      TPUMESH_RETURN_IF_ERROR(Expect("<"));
      if (Lookahead("raw")) return Error("#stablehlo.conv<raw ...> is not supported");
      TPUMESH_RETURN_IF_ERROR(ConvDims(out));
      return Expect(">");
    }
    if (name == "sdy") {  // #sdy<manual_axes{"x", "y"}>
      TPUMESH_RETURN_IF_ERROR(Expect("<"));
      out->s = Ident();
      Attr axes;
      TPUMESH_RETURN_IF_ERROR(SdyAxisSet(&axes));
      out->kind = Attr::Kind::kList;
      out->list = std::move(axes.list);
      return Expect(">");
    }
    if (name == "sdy.sharding" || name == "sdy.mesh" || name == "sdy.sharding_per_value" ||
        name == "sdy.manual_axes") {
      return SdyAngle(out);
    }
    // #stablehlo.dot<k = v, ...>, #stablehlo.gather<...>, channel_handle, ...
    TPUMESH_RETURN_IF_ERROR(Expect("<"));
    TPUMESH_RETURN_IF_ERROR(Enter());
    out->kind = Attr::Kind::kDict;
    out->s = name;
    if (!Consume(">")) {
      do {
        const std::string key = Ident();
        if (key.empty()) {  // a positional value (e.g. algorithm's types): keep it unnamed
          Attr v;
          TPUMESH_RETURN_IF_ERROR(AttrValue(&v));
          out->dict.emplace_back("", std::move(v));
          continue;
        }
        Attr v;
        if (Consume("=")) TPUMESH_RETURN_IF_ERROR(AttrValue(&v));
        out->dict.emplace_back(key, std::move(v));
      } while (Consume(","));
      TPUMESH_RETURN_IF_ERROR(Expect(">"));
    }
    Leave();
    return OkStatus();
  }
  // sdy's bracketed forms, kept as a dict:
  //   <@mesh, [{"x"}, {}], replicated={"y"}> -> {mesh = @mesh, dims = [["x"], []]}
  //   <["x"=2, "y"=4]>                        -> {axes = [{"x" = 2}, {"y" = 4}]}
  //   <[<@mesh, [...]>, ...]>                 -> {list = [...]}
  Status SdyAngle(Attr* out) {
    TPUMESH_RETURN_IF_ERROR(Expect("<"));
    TPUMESH_RETURN_IF_ERROR(Enter());
    out->kind = Attr::Kind::kDict;
    out->s = "sdy";
    if (Lookahead("@")) {
      Attr mesh;
      mesh.kind = Attr::Kind::kSymbol;
      TPUMESH_ASSIGN_OR_RETURN(mesh.s, Suffix('@'));
      out->dict.emplace_back("mesh", std::move(mesh));
      TPUMESH_RETURN_IF_ERROR(Expect(","));
      Attr dims;
      dims.kind = Attr::Kind::kList;
      TPUMESH_RETURN_IF_ERROR(Expect("["));
      TPUMESH_RETURN_IF_ERROR(ListUntil("]", [&]() -> Status {
        TPUMESH_RETURN_IF_ERROR(SdyAxisSet(&dims.list.emplace_back()));
        return OkStatus();
      }));
      out->dict.emplace_back("dims", std::move(dims));
      while (Consume(",")) {
        const std::string key = Ident();
        if (key.empty()) return Error("expected a sharding field, found " + Near());
        TPUMESH_RETURN_IF_ERROR(Expect("="));
        Attr v;
        TPUMESH_RETURN_IF_ERROR(SdyAxisSet(&v));
        out->dict.emplace_back(key, std::move(v));
      }
    } else if (Consume("[")) {
      Attr items;
      items.kind = Attr::Kind::kList;
      if (!Consume("]")) {
        do {
          Attr item;
          if (Lookahead("<")) {
            TPUMESH_RETURN_IF_ERROR(SdyAngle(&item));
          } else if (Lookahead("\"")) {  // "x"=2
            item.kind = Attr::Kind::kDict;
            TPUMESH_ASSIGN_OR_RETURN(std::string axis, String());
            TPUMESH_RETURN_IF_ERROR(Expect("="));
            Attr size;
            size.kind = Attr::Kind::kInt;
            TPUMESH_ASSIGN_OR_RETURN(size.i, Integer());
            item.dict.emplace_back(axis, std::move(size));
          } else {
            TPUMESH_RETURN_IF_ERROR(AttrValue(&item));
          }
          items.list.push_back(std::move(item));
        } while (Consume(","));
        TPUMESH_RETURN_IF_ERROR(Expect("]"));
      }
      out->dict.emplace_back("list", std::move(items));
      while (Consume(",")) {  // device_ids=[...]
        const std::string key = Ident();
        if (key.empty()) return Error("expected a mesh field, found " + Near());
        TPUMESH_RETURN_IF_ERROR(Expect("="));
        Attr v;
        TPUMESH_RETURN_IF_ERROR(AttrValue(&v));
        out->dict.emplace_back(key, std::move(v));
      }
    } else {
      Attr v;
      TPUMESH_RETURN_IF_ERROR(AttrValue(&v));
      out->dict.emplace_back("value", std::move(v));
    }
    Leave();
    return Expect(">");
  }
  // {"x", "y":(1)2} or {} or {?}: the axes of one dimension, as strings.
  Status SdyAxisSet(Attr* out) {
    out->kind = Attr::Kind::kList;
    TPUMESH_RETURN_IF_ERROR(Expect("{"));
    if (!Consume("}")) {
      do {
        Skip();
        if (Consume("?")) {
          Attr open;
          open.kind = Attr::Kind::kWord;
          open.s = "?";
          out->list.push_back(std::move(open));
          continue;
        }
        Attr axis;
        axis.kind = Attr::Kind::kString;
        TPUMESH_ASSIGN_OR_RETURN(axis.s, String());
        if (Consume(":")) return Error("sdy sub-axes (\"x\":(1)2) are not supported");
        out->list.push_back(std::move(axis));
      } while (Consume(","));
      TPUMESH_RETURN_IF_ERROR(Expect("}"));
    }
    if (Lookahead("p")) {  // a priority suffix: p0
      Ident();
    }
    return OkStatus();
  }
  // [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]
  Status ConvDims(Attr* out) {
    out->kind = Attr::Kind::kDict;
    out->s = "conv";
    struct Side {
      const char* batch;    // b or o
      const char* feature;  // f or i
      const char* prefix;
    };
    auto side = [&](char first, char second, const char* a, const char* b, const char* spatial) -> Status {
      TPUMESH_RETURN_IF_ERROR(Expect("["));
      std::vector<std::pair<int64_t, int64_t>> spatials;  // (spatial index, position)
      int64_t pos = 0;
      int64_t first_at = -1, second_at = -1;
      do {
        Skip();
        if (std::isdigit(static_cast<unsigned char>(Peek()))) {
          TPUMESH_ASSIGN_OR_RETURN(int64_t k, Integer());
          spatials.emplace_back(k, pos);
        } else {
          const std::string w = Ident();
          if (w.size() == 1 && w[0] == first) first_at = pos;
          else if (w.size() == 1 && w[0] == second) second_at = pos;
          else return Error("bad convolution dimension " + Quoted(w));
        }
        ++pos;
      } while (Consume(","));
      TPUMESH_RETURN_IF_ERROR(Expect("]"));
      if (first_at < 0 || second_at < 0) return Error("convolution dimensions miss a letter");
      std::sort(spatials.begin(), spatials.end());
      Attr fa, sa, sp;
      fa.kind = sa.kind = Attr::Kind::kInt;
      fa.i = first_at;
      sa.i = second_at;
      sp.kind = Attr::Kind::kList;
      for (size_t k = 0; k < spatials.size(); ++k) {
        if (spatials[k].first != static_cast<int64_t>(k)) return Error("bad convolution spatial dimensions");
        Attr e;
        e.kind = Attr::Kind::kInt;
        e.i = spatials[k].second;
        sp.list.push_back(e);
      }
      out->dict.emplace_back(a, fa);
      out->dict.emplace_back(b, sa);
      out->dict.emplace_back(spatial, sp);
      return OkStatus();
    };
    TPUMESH_RETURN_IF_ERROR(side('b', 'f', "input_batch_dimension", "input_feature_dimension",
                                 "input_spatial_dimensions"));
    TPUMESH_RETURN_IF_ERROR(Expect("x"));
    TPUMESH_RETURN_IF_ERROR(side('i', 'o', "kernel_input_feature_dimension",
                                 "kernel_output_feature_dimension", "kernel_spatial_dimensions"));
    TPUMESH_RETURN_IF_ERROR(Expect("->"));
    return side('b', 'f', "output_batch_dimension", "output_feature_dimension",
                "output_spatial_dimensions");
  }
  // dense<...> : tensor<...>
  Status Dense(Attr* out) {
    ConsumeWord("dense");
    TPUMESH_RETURN_IF_ERROR(Expect("<"));
    DenseLiteral lit;
    Skip();
    if (Peek() == '"') {
      TPUMESH_ASSIGN_OR_RETURN(lit.hex, String());
      lit.hex_blob = true;
    } else if (Peek() != '>') {
      std::vector<int64_t> counts;
      TPUMESH_RETURN_IF_ERROR(DenseElements(&lit, 0, &counts));
      lit.shape = counts;
    }
    TPUMESH_RETURN_IF_ERROR(Expect(">"));
    TPUMESH_RETURN_IF_ERROR(Expect(":"));
    out->kind = Attr::Kind::kDense;
    TPUMESH_ASSIGN_OR_RETURN(out->type, ParseType());
    if (out->type.kind != Type::Kind::kTensor) return Error("dense<> needs a tensor type");
    return DenseBytes(lit, out);
  }
  // Nested [..] lists of scalars; counts[d] is the length of lists at depth d
  // (checked equal across the literal).
  Status DenseElements(DenseLiteral* lit, size_t depth, std::vector<int64_t>* counts) {
    TPUMESH_RETURN_IF_ERROR(Enter());
    Skip();
    if (Consume("[")) {
      int64_t n = 0;
      if (!Lookahead("]")) {
        do {
          TPUMESH_RETURN_IF_ERROR(DenseElements(lit, depth + 1, counts));
          ++n;
        } while (Consume(","));
      }
      TPUMESH_RETURN_IF_ERROR(Expect("]"));
      if (counts->size() <= depth) counts->resize(depth + 1, -1);
      if ((*counts)[depth] == -1) (*counts)[depth] = n;
      else if ((*counts)[depth] != n) return Error("ragged dense literal");
    } else {
      Skip();
      if (Peek() == '(') return Error("complex constants are not supported");
      std::string t;
      if (ConsumeWord("true")) t = "1";
      else if (ConsumeWord("false")) t = "0";
      else if (LookaheadWord("inf") || LookaheadWord("nan")) t = Ident();
      else if (Lookahead("-inf")) { Advance(4); t = "-inf"; }
      else t = NumberText();
      if (t.empty()) return Error("expected a dense element, found " + Near());
      lit->scalars.push_back(std::move(t));
    }
    Leave();
    return OkStatus();
  }
  Status DenseBytes(const DenseLiteral& lit, Attr* out) {
    const ElementType el = out->type.element;
    const int b = ElementTypeBytes(el);
    const int64_t n = out->type.num_elements();
    if (lit.hex_blob) {
      const std::string& h = lit.hex;
      if (h.size() < 2 || h[0] != '0' || (h[1] != 'x' && h[1] != 'X') || h.size() % 2)
        return Error("bad hex constant");
      const size_t nbytes = (h.size() - 2) / 2;
      if (static_cast<int64_t>(nbytes) != n * b && static_cast<int64_t>(nbytes) != b)
        return Error("hex constant has " + std::to_string(nbytes) + " bytes; " +
                     out->type.ToString() + " needs " + std::to_string(n * b));
      out->bytes.resize(nbytes);
      for (size_t i = 0; i < nbytes; ++i) {
        const char hi = h[2 + 2 * i], lo = h[3 + 2 * i];
        if (!std::isxdigit(static_cast<unsigned char>(hi)) || !std::isxdigit(static_cast<unsigned char>(lo)))
          return Error("bad hex constant");
        out->bytes[i] = static_cast<uint8_t>(std::stoi(std::string{hi, lo}, nullptr, 16));
      }
      out->splat = static_cast<int64_t>(nbytes) == b && n != 1;
      return OkStatus();
    }
    const int64_t given = static_cast<int64_t>(lit.scalars.size());
    if (given == 0 && n == 0) return OkStatus();
    if (given != 1 && given != n)
      return Error("dense literal has " + std::to_string(given) + " elements; " +
                   out->type.ToString() + " has " + std::to_string(n));
    if (given == n && !lit.shape.empty()) {
      if (lit.shape.size() != out->type.dims.size() ||
          !std::equal(lit.shape.begin(), lit.shape.end(), out->type.dims.begin()))
        return Error("dense literal's shape does not match " + out->type.ToString());
    }
    out->splat = given == 1 && n != 1;
    out->bytes.resize(static_cast<size_t>(given * b));
    for (int64_t e = 0; e < given; ++e) {
      TPUMESH_RETURN_IF_ERROR(ScalarBytes(lit.scalars[static_cast<size_t>(e)], el,
                                          out->bytes.data() + e * b));
    }
    return OkStatus();
  }
  Status ScalarBytes(const std::string& t, ElementType el, uint8_t* p) {
    const int b = ElementTypeBytes(el);
    const bool hex = t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X');
    errno = 0;
    char* end = nullptr;
    if (IsFloat(el)) {
      if (hex) {  // the bits of the value
        const uint64_t bits = std::strtoull(t.c_str(), &end, 16);
        if (*end) return Error("bad float bits " + Quoted(t));
        std::memcpy(p, &bits, static_cast<size_t>(b));
        return OkStatus();
      }
      const double d = std::strtod(t.c_str(), &end);
      if (*end) return Error("bad float " + Quoted(t));
      switch (el) {
        case ElementType::kF64: std::memcpy(p, &d, 8); break;
        case ElementType::kF32: {
          const float f = std::strtof(t.c_str(), nullptr);
          std::memcpy(p, &f, 4);
          break;
        }
        case ElementType::kBF16: {
          const kernels::bf16 h = kernels::F32ToBf16(static_cast<float>(d));
          std::memcpy(p, &h, 2);
          break;
        }
        default: {  // f16
          const uint16_t h = FloatToHalf(static_cast<float>(d));
          std::memcpy(p, &h, 2);
        }
      }
      return OkStatus();
    }
    int64_t v = 0;
    if (t == "inf" || t == "nan" || t == "-inf") return Error("non-integer " + Quoted(t) + " in an integer constant");
    if (t[0] == '-') {
      v = std::strtoll(t.c_str(), &end, 0);
    } else {
      v = static_cast<int64_t>(std::strtoull(t.c_str(), &end, 0));
    }
    if (*end || errno == ERANGE) return Error("bad integer " + Quoted(t));
    if (el == ElementType::kPred) v = v != 0;
    std::memcpy(p, &v, static_cast<size_t>(b));  // little-endian: the low bytes
    return OkStatus();
  }

  // ---- locations ----
  Status ParseLoc(LocInfo* out) {
    if (!ConsumeWord("loc")) return Error("expected loc(...)");
    TPUMESH_RETURN_IF_ERROR(Expect("("));
    TPUMESH_RETURN_IF_ERROR(LocBody(out));
    return Expect(")");
  }
  Status LocBody(LocInfo* out) {
    TPUMESH_RETURN_IF_ERROR(Enter());
    Skip();
    if (Peek() == '#') {
      TPUMESH_ASSIGN_OR_RETURN(std::string ref, Suffix('#'));
      out->refs.push_back(ref);
    } else if (Peek() == '"') {
      TPUMESH_ASSIGN_OR_RETURN(std::string str, String());
      if (Consume(":")) {  // "file":line:col
        TPUMESH_ASSIGN_OR_RETURN(int64_t ln, Integer());
        if (Consume(":")) {
          TPUMESH_RETURN_IF_ERROR(Integer().status());
          if (Consume("to")) {  // a range: to line:col or to :col
            Consume(":");
            TPUMESH_RETURN_IF_ERROR(Integer().status());
            if (Consume(":")) TPUMESH_RETURN_IF_ERROR(Integer().status());
          }
        }
        if (out->source.empty()) {
          const size_t slash = str.find_last_of('/');
          out->source = (slash == std::string::npos ? str : str.substr(slash + 1)) + ":" + std::to_string(ln);
        }
      } else {
        if (out->name.empty()) out->name = str;
        if (Consume("(")) {
          TPUMESH_RETURN_IF_ERROR(LocBody(out));
          TPUMESH_RETURN_IF_ERROR(Expect(")"));
        }
      }
    } else if (ConsumeWord("unknown")) {
    } else if (ConsumeWord("callsite")) {
      TPUMESH_RETURN_IF_ERROR(Expect("("));
      TPUMESH_RETURN_IF_ERROR(LocBody(out));
      if (!ConsumeWord("at")) return Error("expected 'at' in callsite location");
      TPUMESH_RETURN_IF_ERROR(LocBody(out));
      TPUMESH_RETURN_IF_ERROR(Expect(")"));
    } else if (ConsumeWord("fused")) {
      if (Consume("<")) {  // fused<metadata>
        Attr ignored;
        TPUMESH_RETURN_IF_ERROR(AttrValue(&ignored));
        TPUMESH_RETURN_IF_ERROR(Expect(">"));
      }
      TPUMESH_RETURN_IF_ERROR(Expect("["));
      if (!Consume("]")) {
        do {
          TPUMESH_RETURN_IF_ERROR(LocBody(out));
        } while (Consume(","));
        TPUMESH_RETURN_IF_ERROR(Expect("]"));
      }
    } else {
      return Error("bad location, found " + Near());
    }
    Leave();
    return OkStatus();
  }
  // An alias's name and source, each alias resolved once (memoised; a cycle
  // resolves to what was found before it), so fan-out is linear.
  const std::pair<std::string, std::string>& ResolveAlias(const std::string& alias, int depth) {
    if (const auto it = resolved_.find(alias); it != resolved_.end()) return it->second;
    auto& slot = resolved_[alias];  // empty while in progress: a cycle stops here
    const auto it = loc_aliases_.find(alias);
    if (it == loc_aliases_.end() || depth > 64) return slot;
    Location l;
    ResolveLoc(it->second, &l, depth + 1);
    auto& done = resolved_[alias];
    done = {l.name, l.source};
    return done;
  }
  void ResolveLoc(const LocInfo& info, Location* loc, int depth = 0) {
    if (loc->name.empty()) loc->name = info.name;
    if (loc->source.empty()) loc->source = info.source;
    for (const std::string& r : info.refs) {
      if (!loc->name.empty() && !loc->source.empty()) return;
      const auto ns = ResolveAlias(r, depth);
      if (loc->name.empty()) loc->name = ns.first;
      if (loc->source.empty()) loc->source = ns.second;
    }
  }


  // ---- values ----
  struct Scope {
    std::map<std::string, std::pair<int, int>> names;  // name -> (first id, count)
  };
  StatusOr<int> Define(const std::string& name, int count = 1) {
    Scope& sc = scopes_.back();
    if (sc.names.count(name)) return Error("value %" + name + " defined twice");
    const int id = module_.num_values;
    module_.num_values += count;
    for (int k = 0; k < count; ++k)
      module_.value_names.push_back("%" + name + (count > 1 ? "#" + std::to_string(k) : ""));
    sc.names[name] = {id, count};
    return id;
  }
  StatusOr<int> Use() {  // %name or %name#k
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

  // ---- structure ----
  Status ParseTopLevel();
  Status ParseModuleBody();
  Status ParseGenericModule();
  Status GenericFunc(const Op& op);
  Status ParseFunc();
  Status ParseRegion(Region* r, const std::vector<std::pair<std::string, Type>>* implicit_args);
  Status ParseOp(Block* block);
  Status ParseGeneric(Op* op);
  Status ParsePretty(Op* op, size_t result_count);
  Status ParseSignature(Op* op, size_t result_count, bool required);
  Status PrettyValue(const std::string& key, Op* op);
  Status ParseOpLoc(Op* op) {
    if (LookaheadWord("loc")) {
      LocInfo info;
      TPUMESH_RETURN_IF_ERROR(ParseLoc(&info));
      ResolveLoc(info, &op->loc);
    }
    return OkStatus();
  }
  Status PrescanLocAliases();
  // `%name: T [{attrs}] [loc(...)]`: a block, function or region argument.
  struct TypedArg {
    std::string name;
    Type type;
    Attr attrs;
  };
  StatusOr<TypedArg> ParseTypedArg() {
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
  Status ParseOperands(Op* op) {
    return ListUntil(")", [&]() -> Status {
      TPUMESH_ASSIGN_OR_RETURN(int v, Use());
      op->operands.push_back(v);
      return OkStatus();
    });
  }
  // `(arg, arg, ...)` of ParseTypedArg; the '(' already consumed.
  Status ParseTypedArgs(std::vector<TypedArg>* out) {
    if (Consume(")")) return OkStatus();
    do {
      TPUMESH_ASSIGN_OR_RETURN(TypedArg a, ParseTypedArg());
      out->push_back(std::move(a));
    } while (Consume(","));
    return Expect(")");
  }

  std::string_view s_;
  std::string_view file_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
  int depth_ = 0;
  Module module_;
  std::vector<Scope> scopes_;
  std::map<std::string, LocInfo> loc_aliases_;
  std::map<std::string, Attr> attr_aliases_;
  std::map<std::string, std::pair<std::string, std::string>> resolved_;
};

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
  return ParseOpLoc(op);
}

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
  auto words = std::vector<std::string>();
  if (n == "stablehlo.constant") {
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
  if (n == "stablehlo.while") {
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
  if (n == "stablehlo.reduce") {
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
  if (n == "sdy.manual_computation") {
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
  if (n == "stablehlo.convolution") {
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
  return ParseOpLoc(op);
}

}  // namespace

StatusOr<Module> ParseModule(std::string_view text, std::string_view file) {
  Parser p(text, file);
  return p.Run();
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
