// The tpumesh model file: one HDF5 file holding everything a run needs —
// each component's config, the tokenizer's vocab and merges, the scheduler
// config, and every parameter as a dataset named as in the diffusers
// checkpoint (e.g. unet/down_blocks.0.resnets.0.conv1.weight). Layout and
// conventions: docs/formats.md.
//
// Contract:
// - ModelFileWriter writes to a temporary file beside the target and renames
//   it into place only on Commit(); a writer destroyed before Commit (an
//   error, Ctrl-C unwinding) removes the temporary file. There is never a
//   partial model file at the target path.
// - Every HDF5 write and dataset close is checked, and the finished file is
//   fsync'ed before the rename: a full disk is an error naming the file
//   (ResourceExhausted or DataLoss), never a short model file.
// - Tensors are written one at a time and read one at a time: converting or
//   loading never holds two copies of the whole model.
// - f32 is stored as IEEE f32 little-endian; bf16 as uint16 with the
//   attribute dtype="bfloat16" (h5py reads it as uint16; view as bfloat16).
// - Not thread-safe (Debian's HDF5 is the serial build): use from one thread.
#ifndef TPUMESH_IO_MODEL_FILE_H_
#define TPUMESH_IO_MODEL_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "mesh/array.h"

namespace tpumesh::pipeline {

// Call first in a program's main, before any other HDF5 call: HDF5 then
// installs no exit handler. Its handler closes files still open at exit, and
// for a file whose close failed (a full disk) Debian's HDF5 1.10 crashes in
// it; every file tpumesh opens is closed by its owner, so none is needed.
void DisableHdf5ExitHandler();

inline constexpr char kModelFormat[] = "tpumesh-model";
inline constexpr int kModelFormatVersion = 1;
// How many times smaller than its shape a compressed dataset may be stored
// (tpumesh writes none; h5py's gzip may): a bound no real weights come near,
// so a small file cannot declare a huge model.
inline constexpr int kMaxCompression = 64;
// How many times the whole file's bytes one compressed dataset may hold
// decompressed: deflate's largest ratio (1032:1), so a dataset that real
// gzip wrote is never refused for compressing well (zeros, a sparse tensor);
// its written chunks must still hold every byte it declares.
inline constexpr int kMaxDecompression = 1032;
// An optional text dataset: a model's training record (`tpumesh convert`
// copies a diffusers folder's file of that name): JSON with the data, the
// settings and the "vocabulary" the model was trained on.
inline constexpr char kTrainingMetadata[] = "tpumesh_training.json";

class ModelFileWriter {
 public:
  static StatusOr<std::unique_ptr<ModelFileWriter>> Create(const std::string& path);
  ~ModelFileWriter();
  ModelFileWriter(const ModelFileWriter&) = delete;
  ModelFileWriter& operator=(const ModelFileWriter&) = delete;

  // A UTF-8 text dataset, e.g. ("unet/config.json", json_text).
  Status WriteText(const std::string& dataset, const std::string& text);
  // component/name <- a, stored as `store_as` (f32 or bf16).
  Status WriteTensor(const std::string& component, const std::string& name, const mesh::Array& a,
                     mesh::DType store_as);
  // Closes the file and renames it into place.
  Status Commit();

 private:
  ModelFileWriter() = default;
  Status EnsureGroup(const std::string& group);
  std::string path_, temp_path_;
  int64_t file_ = -1;  // hid_t
  bool committed_ = false;
};

struct TensorInfo {
  mesh::Shape shape;
  mesh::DType stored = mesh::DType::kF32;
};

class ModelFile {
 public:
  // NotFound for a missing file; InvalidArgument for a file that is not HDF5
  // or not a tpumesh model (the format attribute).
  // Also InvalidArgument for a format_version other than
  // kModelFormatVersion, naming both.
  static StatusOr<std::unique_ptr<ModelFile>> Open(const std::string& path);
  // The same from a model file's bytes in memory (HDF5's core driver; no
  // file is written); `name` stands for the path in messages.
  static StatusOr<std::unique_ptr<ModelFile>> OpenImage(std::string_view bytes, const std::string& name);
  ~ModelFile();
  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;

  const std::string& path() const { return path_; }
  bool Has(const std::string& dataset) const;
  StatusOr<std::string> ReadText(const std::string& dataset) const;
  // Parameter names of a component ("unet"), sorted; text datasets excluded.
  StatusOr<std::vector<std::string>> TensorNames(const std::string& component) const;
  // InvalidArgument when the dataset declares more bytes than its storage
  // holds (a forged shape, or unwritten chunks; decompressed for a
  // compressed dataset, io/h5_dataset.h H5HeldBytes) or than the whole file
  // holds (kMaxDecompression times more for a compressed one): checked
  // before any read allocates for it. Also for external storage, a virtual
  // dataset, a link to another file, or elements neither f32 nor bf16.
  StatusOr<TensorInfo> Info(const std::string& component, const std::string& name) const;
  // The file's size in bytes (the image's, for OpenImage): no parameters a
  // file declares can take more than this as stored.
  int64_t size_bytes() const;
  // Reads component/name converted to `as` (f32 or bf16). NotFound names the
  // file and the dataset.
  StatusOr<mesh::Array> ReadTensor(const std::string& component, const std::string& name,
                                   mesh::DType as) const;

 private:
  ModelFile() = default;
  Status CheckFormat() const;
  // The dataset opened through io/h5_dataset.h's gate (no external storage,
  // virtual dataset or link to another file), its hid_t; the caller closes.
  StatusOr<int64_t> OpenDataset(const std::string& dataset, const std::string& not_found) const;
  std::string path_;
  int64_t file_ = -1;  // hid_t
};

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_IO_MODEL_FILE_H_
