#include "base/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace tpumesh {

StatusOr<int64_t> CheckInputFile(const std::string& path) {
  if (path.empty()) return InvalidArgumentError("an input file was named by an empty path");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) return NotFoundError(path + ": no such file");
    return InvalidArgumentError(path + ": cannot be read: " + std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) return InvalidArgumentError(path + ": is a directory, not a file");
  if (!S_ISREG(st.st_mode))
    return InvalidArgumentError(path + ": not a regular file (a FIFO, device or socket is never read)");
  return static_cast<int64_t>(st.st_size);
}

StatusOr<std::string> ReadInputFile(const std::string& path, int64_t max_bytes) {
  TPUMESH_ASSIGN_OR_RETURN(int64_t size, CheckInputFile(path));
  if (size > max_bytes)
    return InvalidArgumentError(path + ": " + std::to_string(size) + " bytes, more than the " +
                                std::to_string(max_bytes) + " such a file may hold");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return InvalidArgumentError(path + ": cannot be read: " + std::strerror(errno));
  std::string bytes(static_cast<size_t>(size), '\0');
  const size_t got = std::fread(bytes.data(), 1, bytes.size(), f.get());
  if (got != bytes.size() || std::ferror(f.get()))
    return DataLossError(path + ": read " + std::to_string(got) + " of " + std::to_string(size) + " bytes");
  return bytes;
}

}  // namespace tpumesh
