// Plain HDF5 datasets in and out, for `tpumesh eval` inputs/outputs and
// --latents / --save-latents: f32 and int32 arrays and UTF-8 string lists.
//
// Contract: readers name the file and dataset in every error (NotFound for a
// missing file or dataset, InvalidArgument for a wrong type); integer
// datasets of any width are read as int32 (values outside int32 are an
// error). Every dataset passes io/h5_dataset.h's gate first: IEEE floats
// of 2, 4 or 8 bytes (native half included) and integers of 1-8 bytes only,
// other float layouts and opaque types refused naming the HDF5 type; no
// external storage, virtual dataset, link to another file, filter but
// deflate/shuffle/fletcher32, or unwritten storage (sizes are checked
// against what the storage holds decompressed, up to 2^31 values). H5Writer checks that its path is writable when created (before
// any compute), builds the file in memory and writes it on Commit() as
// io/atomic_file.h does (checked, fsync'ed, renamed): never a partial output
// file, and a full disk is an error (ResourceExhausted), not a short file.
#ifndef TPUMESH_IO_H5IO_H_
#define TPUMESH_IO_H5IO_H_

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "mesh/array.h"

namespace tpumesh::pipeline {

bool H5HasDataset(const std::string& file, const std::string& name);
// f32 for float datasets (IEEE half, single or double) and for uint16
// tagged dtype="bfloat16" or "float16" (their values), s32 for integer
// ones.
StatusOr<mesh::Array> H5ReadArray(const std::string& file, const std::string& name);
// One-dimensional (or scalar) string datasets only; a table is refused with
// its shape.
StatusOr<std::vector<std::string>> H5ReadStrings(const std::string& file, const std::string& name);

// A numeric dataset as stored: its class ('f' float, 'i' signed, 'u'
// unsigned integer, 'c' complex: h5py's compound {r, i} of two IEEE floats,
// read and written as interleaved (re, im) pairs), element width in bytes
// (complex: 8 or 16), shape, its string attribute
// "dtype" when it has one ("bfloat16", "bool"), and its elements,
// little-endian: a native IEEE half is cls 'f', width 2, its own bits. A
// dtype tag that does not fit the elements (a native half tagged bfloat16)
// is refused. Sizes checked as H5ReadArray's.
struct H5Raw {
  char cls = 'f';
  int width = 4;
  std::vector<int64_t> dims;
  std::string dtype;
  std::vector<uint8_t> data;
};
StatusOr<H5Raw> H5ReadRaw(const std::string& file, const std::string& name);

class H5Writer {
 public:
  static StatusOr<std::unique_ptr<H5Writer>> Create(const std::string& path);
  ~H5Writer();
  Status Write(const std::string& name, const mesh::Array& a);  // f32 or s32
  // A dataset of the class and width of `raw` (its data and dims), with the
  // attribute dtype = raw.dtype when that is not empty.
  Status WriteRaw(const std::string& name, const H5Raw& raw);
  // A 1-D dataset of variable-length UTF-8 strings (what h5py writes for a
  // list of str; eval's tokenizer reads its "prompts" so).
  Status WriteStrings(const std::string& name, const std::vector<std::string>& values);
  // The finished file's bytes (the writer is closed), for a caller that
  // writes several outputs together (io/atomic_file.h WriteFilesAtomic).
  StatusOr<std::string> Finish();
  // Finish, then WriteFileAtomic to the path.
  Status Commit();
  const std::string& path() const { return path_; }

 private:
  H5Writer() = default;
  std::string path_;
  int64_t file_ = -1;
};

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_IO_H5IO_H_
