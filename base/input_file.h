// Reading the files a user names, safely: every input is checked to be a
// regular file before it is opened (a FIFO would block forever, a device
// such as /dev/urandom would never end), and small text inputs (configs,
// prompts, tokenizer files, chip files) are read whole only below a size
// limit, so no input can make tpumesh hang or allocate without bound.
//
// Every reader of a user's file goes through this header: InputFile::Open
// for readers that take a descriptor or a FILE* (PNG, safetensors, digests),
// CheckInputFile right before a library that opens a path itself (HDF5).
//
// Contract: errors are one line naming the path (NotFound for a missing
// file, InvalidArgument for a directory, FIFO, device or socket, or a file
// over the limit). Nothing here blocks: a FIFO is refused before any open,
// and InputFile opens with O_NONBLOCK and checks the descriptor it got.
#ifndef TPUMESH_BASE_INPUT_FILE_H_
#define TPUMESH_BASE_INPUT_FILE_H_

#include <cstdint>
#include <string>

#include "base/status.h"

namespace tpumesh {

// 64 MiB: more than any config, vocabulary, merges or prompts file.
inline constexpr int64_t kMaxTextFileBytes = int64_t{64} << 20;

// `path` is an existing regular file; returns its size in bytes.
StatusOr<int64_t> CheckInputFile(const std::string& path);
// CheckInputFile, then the whole file if it holds at most max_bytes.
StatusOr<std::string> ReadInputFile(const std::string& path, int64_t max_bytes = kMaxTextFileBytes);

// A regular file open for reading. Open checks the path (CheckInputFile),
// opens it non-blocking and close-on-exec, checks with fstat that the
// descriptor is the regular file it checked (a FIFO or device swapped in
// between is refused, never read), then makes it blocking.
class InputFile {
 public:
  static StatusOr<InputFile> Open(const std::string& path);

  InputFile(InputFile&& o) noexcept;
  InputFile& operator=(InputFile&& o) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  int fd() const { return fd_; }
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Reads exactly n bytes at `offset` (pread; DataLoss naming the path when
  // the file is shorter or a read fails).
  Status ReadAt(void* buf, int64_t n, int64_t offset) const;
  // Gives the descriptor up: the caller closes it (e.g. through fdopen).
  int Release();

 private:
  InputFile() = default;
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

}  // namespace tpumesh

#endif  // TPUMESH_BASE_INPUT_FILE_H_
