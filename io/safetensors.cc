#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "kernels/bf16.h"
#include "nlohmann/json.hpp"

namespace tpumesh::pipeline {
namespace {

constexpr uint64_t kMaxHeader = uint64_t{100} << 20;

// Bytes per element of a safetensors dtype, 0 if unknown.
uint64_t DTypeBytes(const std::string& d) {
  if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E5M2" || d == "F8_E4M3") return 1;
  if (d == "U16" || d == "I16" || d == "F16" || d == "BF16") return 2;
  if (d == "U32" || d == "I32" || d == "F32") return 4;
  if (d == "U64" || d == "I64" || d == "F64") return 8;
  return 0;
}

// The keys of a JSON document's top-level object, and the first one named
// twice (nlohmann's SAX interface: every event, nothing kept but the keys).
struct TopLevelKeys {
  using json = nlohmann::json;
  std::set<std::string> seen;
  std::string duplicate;
  int depth = 0;
  bool ok = true;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return ++depth, true; }
  bool end_object() { return --depth, true; }
  bool start_array(std::size_t) { return ++depth, true; }
  bool end_array() { return --depth, true; }
  bool key(json::string_t& k) {
    if (depth == 1 && !seen.insert(k).second && duplicate.empty()) duplicate = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception&) { return ok = false; }
};

}  // namespace

StatusOr<std::vector<SafetensorsEntry>> SafetensorsFile::ParseHeader(
    const std::string& header, uint64_t data_size, const std::string& origin,
    std::map<std::string, std::string>* metadata) {
  auto bad = [&](const std::string& why) { return InvalidArgumentError(origin + ": " + why); };
  if (header.empty() || header[0] != '{') return bad("header does not start with '{'");
  // Reject duplicate top-level keys: a hostile file could otherwise show one
  // tensor to a checker and another to a reader. A SAX pass of its own
  // (linear: nlohmann's callback parser rescans each object as it closes,
  // quadratic in the number of tensors).
  TopLevelKeys keys;
  if (!nlohmann::json::sax_parse(header, &keys) || !keys.ok) return bad("header is not valid JSON");
  const std::string& duplicate = keys.duplicate;
  nlohmann::json j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("header is not valid JSON");
  if (!j.is_object()) return bad("header is not a JSON object");
  if (!duplicate.empty()) return bad("header names '" + duplicate + "' twice");

  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) return bad("__metadata__ is not an object");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) return bad("__metadata__['" + k + "'] is not a string");
        if (metadata) (*metadata)[k] = s.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!v.is_object()) return bad(where + " is not an object");
    for (const auto& [k, unused] : v.items()) {
      if (k != "dtype" && k != "shape" && k != "data_offsets") return bad(where + " has unknown field '" + k + "'");
    }
    if (!v.contains("dtype") || !v["dtype"].is_string()) return bad(where + " has no string dtype");
    if (!v.contains("shape") || !v["shape"].is_array()) return bad(where + " has no shape array");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      return bad(where + " needs data_offsets [begin, end]");
    SafetensorsEntry e;
    e.name = name;
    e.dtype = v["dtype"].get<std::string>();
    const uint64_t elem = DTypeBytes(e.dtype);
    if (elem == 0) return bad(where + " has unknown dtype '" + e.dtype + "'");
    uint64_t count = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) return bad(where + " has a shape entry that is not a non-negative integer");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > (uint64_t{1} << 40) || (dim != 0 && count > std::numeric_limits<uint64_t>::max() / 16 / dim))
        return bad(where + " has a shape too large");
      count *= dim;
      e.shape.push_back(static_cast<int64_t>(dim));
    }
    for (const auto& o : v["data_offsets"]) {
      if (!o.is_number_unsigned()) return bad(where + " has data_offsets that are not non-negative integers");
    }
    e.begin = v["data_offsets"][0].get<uint64_t>();
    e.end = v["data_offsets"][1].get<uint64_t>();
    if (e.begin > e.end) return bad(where + " has data_offsets with begin > end");
    if (e.end > data_size)
      return bad(where + " ends at byte " + std::to_string(e.end) + " but the data section has " +
                 std::to_string(data_size) + " bytes (truncated file?)");
    if (e.end - e.begin != count * elem)
      return bad(where + ": shape " + mesh::ShapeToString(e.shape) + " of " + e.dtype + " needs " +
                 std::to_string(count * elem) + " bytes but data_offsets span " +
                 std::to_string(e.end - e.begin));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t expected = 0;
  for (const auto& e : entries) {
    if (e.begin != expected) {
      return bad("tensor '" + e.name + "' starts at byte " + std::to_string(e.begin) +
                 (e.begin < expected ? " inside the previous tensor (overlap)" : " after a gap") +
                 "; expected " + std::to_string(expected));
    }
    expected = e.end;
  }
  if (expected != data_size)
    return bad("the tensors cover " + std::to_string(expected) + " of the " +
               std::to_string(data_size) + " data bytes");
  return entries;
}

StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  TPUMESH_ASSIGN_OR_RETURN(InputFile in, InputFile::Open(path));
  const InputFile& file = f.file_.emplace(std::move(in));
  const uint64_t size = static_cast<uint64_t>(file.size());
  if (size < 8) return InvalidArgumentError(path + ": " + std::to_string(size) + " bytes is too short for a safetensors file");
  unsigned char len_bytes[8];
  TPUMESH_RETURN_IF_ERROR(file.ReadAt(len_bytes, 8, 0));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  // A length no header has, and no JSON after it: another kind of file (a
  // PNG, a pickle) rather than a damaged safetensors one.
  if (n > kMaxHeader || n > size - 8) {
    unsigned char first = 0;
    if (size > 8) TPUMESH_RETURN_IF_ERROR(file.ReadAt(&first, 1, 8));
    if (first != '{')
      return InvalidArgumentError(path + ": not a safetensors file (no JSON header after the 8-byte length)");
  }
  if (n > kMaxHeader) return InvalidArgumentError(path + ": header length " + std::to_string(n) + " exceeds the 100 MiB limit");
  if (n > size - 8)
    return InvalidArgumentError(path + ": header length " + std::to_string(n) + " runs past the end of the " +
                                std::to_string(size) + "-byte file");
  std::string header(n, '\0');
  TPUMESH_RETURN_IF_ERROR(file.ReadAt(header.data(), static_cast<int64_t>(n), 8));
  f.data_offset_ = 8 + n;
  TPUMESH_ASSIGN_OR_RETURN(f.entries_, ParseHeader(header, size - 8 - n, path, &f.metadata_));
  for (size_t i = 0; i < f.entries_.size(); ++i) f.index_[f.entries_[i].name] = i;
  return f;
}

const SafetensorsEntry* SafetensorsFile::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

StatusOr<mesh::Array> SafetensorsFile::Read(const std::string& name, mesh::DType dtype) const {
  const SafetensorsEntry* e = Find(name);
  if (e == nullptr) return NotFoundError(path_ + ": no tensor named '" + name + "'");
  if (dtype != mesh::DType::kF32 && dtype != mesh::DType::kBF16)
    return UnimplementedError("reading into " + std::string(mesh::DTypeName(dtype)));
  if (e->dtype != "F32" && e->dtype != "F16" && e->dtype != "BF16")
    return UnimplementedError(path_ + ": tensor '" + name + "' has dtype " + e->dtype +
                              "; only F32, F16 and BF16 are read");
  const int64_t bytes = static_cast<int64_t>(e->end - e->begin);
  const int64_t at = static_cast<int64_t>(data_offset_ + e->begin);
  mesh::Array out = mesh::Array::Host(dtype, e->shape);
  const int64_t n = out.num_elements();
  if (e->dtype == "F32" && dtype == mesh::DType::kF32) {
    TPUMESH_RETURN_IF_ERROR(file_->ReadAt(out.mutable_raw(), bytes, at));
    return out;
  }
  if (e->dtype == "BF16" && dtype == mesh::DType::kBF16) {
    TPUMESH_RETURN_IF_ERROR(file_->ReadAt(out.mutable_raw(), bytes, at));
    return out;
  }
  std::vector<unsigned char> raw(static_cast<size_t>(bytes));
  TPUMESH_RETURN_IF_ERROR(file_->ReadAt(raw.data(), bytes, at));
  for (int64_t i = 0; i < n; ++i) {
    float v;
    if (e->dtype == "F32") {
      std::memcpy(&v, raw.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      v = e->dtype == "F16" ? kernels::HalfToFloat(h) : kernels::Bf16ToF32(kernels::bf16{h});
    }
    if (dtype == mesh::DType::kF32) out.mutable_data<float>()[i] = v;
    else out.mutable_data<kernels::bf16>()[i] = kernels::F32ToBf16(v);
  }
  return out;
}

}  // namespace tpumesh::pipeline
