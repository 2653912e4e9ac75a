// SafetensorsFile: a reader for the safetensors format (8-byte little-endian
// header length, a JSON header mapping tensor names to dtype, shape and a
// byte range of the data section, then the data) that treats the file as
// hostile.
//
// Contract: Open() checks everything before any tensor is read: the header
// length against the file size (and a 100 MiB cap, as the reference
// implementation), that the header is one JSON object without duplicate
// keys, each entry's dtype, shape and offsets (with overflow checks), that
// each range's length equals its shape times its dtype size, and that the
// ranges tile the data section exactly (sorted, no gap, no overlap), as the
// reference implementation requires. Any failure is one InvalidArgument /
// DataLoss naming the file and the first problem. Reads stream one tensor at
// a time (pread), so loading a model never holds the whole file in memory.
#ifndef TPUMESH_IO_SAFETENSORS_H_
#define TPUMESH_IO_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/input_file.h"
#include "base/status.h"
#include "mesh/array.h"

namespace tpumesh::pipeline {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;       // as in the file: "F32", "F16", "BF16", "I64", ...
  mesh::Shape shape;
  uint64_t begin = 0;      // byte range within the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  static StatusOr<SafetensorsFile> Open(const std::string& path);
  // Parses and checks a header (the JSON text) for a data section of
  // `data_size` bytes; Open() uses it, tests call it directly.
  static StatusOr<std::vector<SafetensorsEntry>> ParseHeader(
      const std::string& header, uint64_t data_size, const std::string& origin,
      std::map<std::string, std::string>* metadata);

  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;

  const std::string& path() const { return path_; }
  // In file order of their data.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsEntry* Find(const std::string& name) const;

  // Reads a floating-point tensor (F32, F16 or BF16) into a host array of
  // `dtype` (f32 or bf16; f32 -> bf16 rounds to nearest even). NotFound for
  // a missing name, Unimplemented for a non-float dtype, DataLoss if the file
  // shrank since Open.
  StatusOr<mesh::Array> Read(const std::string& name, mesh::DType dtype) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::optional<InputFile> file_;  // base/input_file.h: never a FIFO or device
  uint64_t data_offset_ = 0;  // 8 + header length
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_IO_SAFETENSORS_H_
