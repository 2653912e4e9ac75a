// The StableHLO module tree (hlo/module.h): element types, types,
// attributes and the lookups on them. Reading the text is hlo/mlir_*.cc.
#include "hlo/module.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <string>

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
    case ElementType::kC64: return "complex<f32>";
    case ElementType::kC128: return "complex<f64>";
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
    case ElementType::kF64:
    case ElementType::kC64: return 8;
    case ElementType::kC128: return 16;
  }
  return 0;
}

bool IsFloat(ElementType t) {
  return t == ElementType::kF16 || t == ElementType::kBF16 || t == ElementType::kF32 ||
         t == ElementType::kF64;
}

bool IsComplex(ElementType t) { return t == ElementType::kC64 || t == ElementType::kC128; }

ElementType PartType(ElementType t) {
  if (t == ElementType::kC64) return ElementType::kF32;
  if (t == ElementType::kC128) return ElementType::kF64;
  return t;
}

StatusOr<ElementType> ComplexOf(ElementType t) {
  if (t == ElementType::kF32) return ElementType::kC64;
  if (t == ElementType::kF64) return ElementType::kC128;
  return InvalidArgumentError("complex<" + std::string(ElementTypeName(t)) + "> is not supported (f32 and f64 parts only)");
}

bool IsUnsigned(ElementType t) {
  return t == ElementType::kU8 || t == ElementType::kU16 || t == ElementType::kU32 ||
         t == ElementType::kU64;
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
  if (kind == Kind::kDense && !IsFloat(type.element) && !IsComplex(type.element) && type.kind == Type::Kind::kTensor) {
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

}  // namespace tpumesh::hlo
