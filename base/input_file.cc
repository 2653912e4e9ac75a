#include "base/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace tpumesh {
namespace {

Status ClassifyStat(const std::string& path, const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return InvalidArgumentError(path + ": is a directory, not a file");
  if (!S_ISREG(st.st_mode))
    return InvalidArgumentError(path + ": not a regular file (a FIFO, device or socket is never read)");
  return OkStatus();
}

}  // namespace

StatusOr<int64_t> CheckInputFile(const std::string& path) {
  if (path.empty()) return InvalidArgumentError("an input file was named by an empty path");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) return NotFoundError(path + ": no such file");
    return InvalidArgumentError(path + ": cannot be read: " + std::strerror(e));
  }
  TPUMESH_RETURN_IF_ERROR(ClassifyStat(path, st));
  return static_cast<int64_t>(st.st_size);
}

StatusOr<std::string> ReadInputFile(const std::string& path, int64_t max_bytes) {
  TPUMESH_ASSIGN_OR_RETURN(InputFile f, InputFile::Open(path));
  if (f.size() > max_bytes)
    return InvalidArgumentError(path + ": " + std::to_string(f.size()) + " bytes, more than the " +
                                std::to_string(max_bytes) + " such a file may hold");
  std::string bytes(static_cast<size_t>(f.size()), '\0');
  TPUMESH_RETURN_IF_ERROR(f.ReadAt(bytes.data(), f.size(), 0));
  return bytes;
}

StatusOr<InputFile> InputFile::Open(const std::string& path) {
  TPUMESH_RETURN_IF_ERROR(CheckInputFile(path).status());
  InputFile f;
  f.path_ = path;
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (f.fd_ < 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) return NotFoundError(path + ": no such file");
    return InvalidArgumentError(path + ": cannot be read: " + std::strerror(e));
  }
  struct stat st;
  if (::fstat(f.fd_, &st) != 0) return InvalidArgumentError(path + ": cannot be read: " + std::strerror(errno));
  TPUMESH_RETURN_IF_ERROR(ClassifyStat(path, st));
  const int flags = ::fcntl(f.fd_, F_GETFL);
  if (flags < 0 || ::fcntl(f.fd_, F_SETFL, flags & ~O_NONBLOCK) != 0)
    return InvalidArgumentError(path + ": cannot be read: " + std::strerror(errno));
  f.size_ = static_cast<int64_t>(st.st_size);
  return f;
}

InputFile::InputFile(InputFile&& o) noexcept
    : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)), size_(o.size_) {}

InputFile& InputFile::operator=(InputFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    size_ = o.size_;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

int InputFile::Release() { return std::exchange(fd_, -1); }

Status InputFile::ReadAt(void* buf, int64_t n, int64_t offset) const {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, p, static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 30)), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return DataLossError(path_ + ": read failed: " + std::strerror(errno));
    if (got == 0)
      return DataLossError(path_ + ": ends before byte " + std::to_string(offset + n) + " (the file is shorter than " +
                           "it was when opened, or than it declares)");
    p += got;
    n -= got;
    offset += got;
  }
  return OkStatus();
}

}  // namespace tpumesh
