// Reading the files a user names, safely: every input is checked to be a
// regular file before it is opened (a FIFO would block forever, a device
// such as /dev/urandom would never end), and small text inputs (configs,
// prompts, tokenizer files, chip files) are read whole only below a size
// limit, so no input can make tpumesh hang or allocate without bound.
//
// Contract: errors are one line naming the path (NotFound for a missing
// file, InvalidArgument for a directory, FIFO, device or socket, or a file
// over the limit).
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

}  // namespace tpumesh

#endif  // TPUMESH_BASE_INPUT_FILE_H_
