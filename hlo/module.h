// A StableHLO module as JAX prints it (`jax.jit(f).lower(...).as_text()`),
// read from its MLIR text into a tree: functions, their ops in order, each
// op's operands, results, types, attributes and regions, and where it is in
// the file, and each op's entry in the op registry (hlo/ops.h). Running and
// pricing the module is hlo/program.h. The reader is hlo/mlir_parser.h.
//
// Both MLIR forms are read: the generic form ("stablehlo.add"(%a, %b)
// <{props}> ({regions}) {attrs} : (T, T) -> T) and the pretty forms the
// StableHLO, func, chlo and sdy dialects print for their ops. A pretty form
// is turned into the generic form's attribute names as it is read, so the
// interpreter sees one spelling: `dot_general %a, %b, contracting_dims = [1]
// x [0]` becomes dot_dimension_numbers = {lhs_contracting_dimensions = [1],
// rhs_contracting_dimensions = [0]}; `compare GT, %a, %b, FLOAT` becomes
// comparison_direction = GT, compare_type = FLOAT; and so on
// (docs/stablehlo.md lists them).
//
// Contract: ParseModule never crashes on any input and returns
// InvalidArgument "FILE:LINE:COL: what" for text it cannot read (the place
// is in the MLIR text, 1-based). It checks syntax and SSA structure (every
// value defined once before its use, in scope; result counts match the
// types), not op semantics: that is hlo/'s verifier. Bounds: the text is at
// most kMaxTextBytes, nesting at most kMaxDepth, a tensor type at most
// kMaxElements elements and rank kMaxRank; past them, one error naming the
// bound.
#ifndef TPUMESH_HLO_MODULE_H_
#define TPUMESH_HLO_MODULE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kernels/bf16.h"

namespace tpumesh::hlo {

inline constexpr int64_t kMaxTextBytes = int64_t{1} << 30;  // 1 GiB of text
inline constexpr int kMaxDepth = 256;                       // brackets, regions
inline constexpr int64_t kMaxElements = int64_t{1} << 40;   // per tensor type
inline constexpr int kMaxRank = 16;

// kC64 and kC128 are complex<f32> and complex<f64>: an element is its real
// part then its imaginary part (as XLA, numpy and std::complex lay it out).
enum class ElementType : uint8_t {
  kPred, kI8, kI16, kI32, kI64, kU8, kU16, kU32, kU64, kF16, kBF16, kF32, kF64, kC64, kC128
};
// MLIR's spelling: "i1", "i32", "ui32", "bf16", "f32", "complex<f32>", ...
std::string_view ElementTypeName(ElementType t);
int ElementTypeBytes(ElementType t);  // kPred: 1 (a byte per element, as XLA)
bool IsFloat(ElementType t);     // real floats; complex types are not
bool IsComplex(ElementType t);
// The type of a complex type's parts (kC64 -> kF32, kC128 -> kF64); a real
// type itself.
ElementType PartType(ElementType t);
// The complex type with parts of `t` (kF32 -> kC64, kF64 -> kC128), or
// InvalidArgument for any other type.
StatusOr<ElementType> ComplexOf(ElementType t);
bool IsUnsigned(ElementType t);  // kPred is neither signed nor unsigned
// IEEE half precision <-> f32 (kernels/bf16.h: round to nearest even, NaN
// stays NaN).
using kernels::FloatToHalf;
using kernels::HalfToFloat;

struct Type {
  enum class Kind : uint8_t { kTensor, kTuple, kToken };
  Kind kind = Kind::kTensor;
  ElementType element = ElementType::kF32;
  std::vector<int64_t> dims;   // tensor; rank 0: a scalar
  std::vector<Type> elements;  // tuple
  int64_t num_elements() const;
  int64_t size_bytes() const;
  bool operator==(const Type& o) const;
  std::string ToString() const;  // "tensor<2x3xf32>"
};

// An attribute value. Lists hold ints, floats, words or nested lists
// ([1, 2], array<i64: 1, 2>, [[0, 1], [2, 3]]); a dict holds named values
// ({a = 1}, #stablehlo.dot<lhs_batching_dimensions = [0], ...>); a word is a
// bare identifier or an enum (#stablehlo<comparison_direction GT> -> "GT");
// dense holds the elements of dense<...> : tensor<...> as little-endian bytes
// of its element type (a splat holds one element).
struct Attr {
  enum class Kind : uint8_t { kUnit, kInt, kFloat, kBool, kString, kSymbol, kWord, kList, kDict, kDense, kType };
  Kind kind = Kind::kUnit;
  int64_t i = 0;
  double f = 0;
  std::string s;  // string, symbol (without @), word; the text of an opaque attribute
  std::vector<Attr> list;
  std::vector<std::pair<std::string, Attr>> dict;
  Type type;  // dense's tensor type, or a type attribute
  std::vector<uint8_t> bytes;  // dense's elements
  bool splat = false;

  // Declared here and defaulted below, where Attr is complete (libstdc++'s
  // pair<string, Attr> needs that under clang).
  Attr();
  Attr(const Attr&);
  Attr(Attr&&) noexcept;
  Attr& operator=(const Attr&);
  Attr& operator=(Attr&&) noexcept;
  ~Attr();

  const Attr* Find(std::string_view key) const;  // dict member, or null
  // A list of integers (or an int, as a one-element list) -> its values.
  StatusOr<std::vector<int64_t>> Ints() const;
};

inline Attr::Attr() = default;
inline Attr::Attr(const Attr&) = default;
inline Attr::Attr(Attr&&) noexcept = default;
inline Attr& Attr::operator=(const Attr&) = default;
inline Attr& Attr::operator=(Attr&&) noexcept = default;
inline Attr::~Attr() = default;

// Where something is: its line and column in the MLIR text, and the name
// JAX gave the op in its debug location (loc("jit(f)/dot_general"(...)),
// resolved through #loc aliases), with the Python file and line when given.
struct Location {
  int line = 0, column = 0;
  std::string name;         // "" when the op has none
  std::string source;       // "model.py:12" when known
};

struct Region;
struct OpEntry;  // hlo/ops.h
struct OpAttrs;  // hlo/attrs.h

struct Op {
  std::string name;                // "stablehlo.add", "func.return", "chlo.erf_inv"
  std::vector<int> results;        // value ids
  std::vector<int> operands;       // value ids
  std::vector<Type> result_types;
  std::vector<Type> operand_types;
  std::vector<std::pair<std::string, Attr>> attrs;  // properties and attributes, one list
  std::vector<Region> regions;
  std::string callee;              // func.call, custom_call's call_target_name
  Location loc;
  // The op's registry entry (hlo/ops.h), resolved by ParseModule; null for
  // an op hlo/ does not support (Verify refuses it).
  const OpEntry* entry = nullptr;
  // Its typed attributes (hlo/attrs.h), resolved by ParseModule for a
  // supported op; shared by copies of the module.
  std::shared_ptr<const OpAttrs> typed;

  const Attr* Find(std::string_view key) const;
};

struct Block {
  std::vector<int> args;
  std::vector<Type> arg_types;
  std::vector<Op> ops;
};

struct Region {
  std::vector<Block> blocks;  // StableHLO's regions have one block
};

struct Func {
  std::string name;  // without @
  bool is_public = true;
  std::vector<Type> arg_types;
  std::vector<Attr> arg_attrs;  // a dict per argument (mhlo.sharding, sdy.sharding, ...)
  std::vector<Type> result_types;
  std::vector<Attr> result_attrs;
  Region body;
  Location loc;
};

struct Module {
  std::string file;    // for messages
  std::string name;    // @jit_f
  std::vector<std::pair<std::string, Attr>> attrs;  // mhlo.num_replicas, ...
  std::vector<Func> funcs;
  std::vector<Op> ops;  // other top-level ops (sdy.mesh)
  int num_values = 0;   // value ids are 0 .. num_values-1, module-wide
  std::vector<std::string> value_names;  // "%arg0", "%3" (for messages)

  const Func* FindFunc(std::string_view name) const;
  const Attr* FindAttr(std::string_view key) const;
  // "FILE:LINE:COL" of a location.
  std::string Where(const Location& loc) const;
};

// Reads `text`; `file` names it in messages.
StatusOr<Module> ParseModule(std::string_view text, std::string_view file);
// Reads the file at `path` (kMaxTextBytes at most).
StatusOr<Module> ReadModuleFile(const std::string& path);

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_MODULE_H_
