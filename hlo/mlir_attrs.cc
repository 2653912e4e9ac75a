// MLIR attribute values (dicts, lists, enums, #dialect<...>, sdy's forms,
// dense literals as bytes) and loc(...) locations with their #loc aliases.
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

#include "kernels/bf16.h"

namespace tpumesh::hlo::reader {

Status Parser::AttrDict(Attr* out) {
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

Status Parser::ScalarTypeSuffix(Attr* a) {
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

Status Parser::AttrValue(Attr* out) {
  TPUMESH_RETURN_IF_ERROR(Enter());
  Status st = AttrValueInner(out);
  Leave();
  return st;
}

Status Parser::AttrValueInner(Attr* out) {
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

Status Parser::NumberAttr(const std::string& t, Attr* out) {
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

Status Parser::HashAttr(Attr* out) {
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
  if (name == "sdy.op_sharding_rule") return OpaqueAngle(out);  // a custom call's rule: ([i, j])->([k, l]) {i=4, ...}
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

Status Parser::OpaqueAngle(Attr* out) {
  Skip();
  const size_t start = pos_;
  int open = 0;
  do {
    const char c = Peek();
    if (c == '\0') return Error("unterminated attribute <...>");
    if (c == '"') {
      TPUMESH_RETURN_IF_ERROR(String().status());
      continue;
    }
    if (c == '-' && Peek(1) == '>') {  // an arrow, not a bracket
      Advance(2);
      continue;
    }
    if (c == '<') ++open;
    if (c == '>') --open;
    Advance();
  } while (open > 0);
  out->kind = Attr::Kind::kWord;
  out->s = std::string(s_.substr(start, pos_ - start));
  return OkStatus();
}

Status Parser::SdyAngle(Attr* out) {
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

Status Parser::SdyAxisSet(Attr* out) {
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

Status Parser::ConvDims(Attr* out) {
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

Status Parser::Dense(Attr* out) {
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
  index_elements_ = true;
  auto type = ParseType();
  index_elements_ = false;
  TPUMESH_ASSIGN_OR_RETURN(out->type, std::move(type));
  if (out->type.kind != Type::Kind::kTensor) return Error("dense<> needs a tensor type");
  return DenseBytes(lit, out);
}

Status Parser::DenseElements(DenseLiteral* lit, size_t depth, std::vector<int64_t>* counts) {
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
    const bool complex = Consume("(");
    if (!lit->scalars.empty() && complex != lit->complex)
      return Error("dense literal mixes complex (re, im) and real elements");
    lit->complex = complex;
    for (int part = 0; part < (complex ? 2 : 1); ++part) {
      if (part == 1) TPUMESH_RETURN_IF_ERROR(Expect(","));
      Skip();
      std::string t;
      if (ConsumeWord("true")) t = "1";
      else if (ConsumeWord("false")) t = "0";
      else if (LookaheadWord("inf") || LookaheadWord("nan")) t = Ident();
      else if (Lookahead("-inf")) { Advance(4); t = "-inf"; }
      else t = NumberText();
      if (t.empty()) return Error("expected a dense element, found " + Near());
      lit->scalars.push_back(std::move(t));
    }
    if (complex) TPUMESH_RETURN_IF_ERROR(Expect(")"));
  }
  Leave();
  return OkStatus();
}

Status Parser::DenseBytes(const DenseLiteral& lit, Attr* out) {
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
  // A complex element is written (re, im): two scalars of its part type.
  const int parts = IsComplex(el) ? 2 : 1;
  if (!lit.scalars.empty() && lit.complex != IsComplex(el))
    return Error(std::string(lit.complex ? "complex (re, im) elements" : "real elements") + " in a dense literal of " +
                 out->type.ToString());
  const int64_t given = static_cast<int64_t>(lit.scalars.size()) / parts;
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
  const ElementType part = PartType(el);
  for (int64_t e = 0; e < given * parts; ++e) {
    TPUMESH_RETURN_IF_ERROR(ScalarBytes(lit.scalars[static_cast<size_t>(e)], part,
                                        out->bytes.data() + e * (b / parts)));
  }
  return OkStatus();
}

Status Parser::ScalarBytes(const std::string& t, ElementType el, uint8_t* p) {
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

Status Parser::ParseLoc(LocInfo* out) {
  if (!ConsumeWord("loc")) return Error("expected loc(...)");
  TPUMESH_RETURN_IF_ERROR(Expect("("));
  TPUMESH_RETURN_IF_ERROR(LocBody(out));
  return Expect(")");
}

Status Parser::LocBody(LocInfo* out) {
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

const std::pair<std::string, std::string>& Parser::ResolveAlias(const std::string& alias, int depth) {
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

void Parser::ResolveLoc(const LocInfo& info, Location* loc, int depth) {
  if (loc->name.empty()) loc->name = info.name;
  if (loc->source.empty()) loc->source = info.source;
  for (const std::string& r : info.refs) {
    if (!loc->name.empty() && !loc->source.empty()) return;
    const auto ns = ResolveAlias(r, depth);
    if (loc->name.empty()) loc->name = ns.first;
    if (loc->source.empty()) loc->source = ns.second;
  }
}

}  // namespace tpumesh::hlo::reader
