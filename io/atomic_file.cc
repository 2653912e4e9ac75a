#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <system_error>

namespace tpumesh {
namespace {

// 0 or errno.
int WriteAll(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

// "<what>: <strerror>", with a code that says what kind of failure it was.
Status ErrnoStatus(const std::string& what, int e) {
  std::string m = what + ": " + std::generic_category().message(e);
  switch (e) {
    case ENOENT:
    case ENOTDIR:
      return NotFoundError(std::move(m));
    case ENOSPC:
    case EDQUOT:
      return ResourceExhaustedError(std::move(m));
    case EIO:
      return DataLossError(std::move(m));
    default:
      return InvalidArgumentError(std::move(m));
  }
}

Status WriteFileAtomic(const std::string& path, std::string_view bytes) {
  if (path.empty()) return InvalidArgumentError("cannot write a file to an empty path");
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path p(path);
  std::string temp;
  int fd = -1, e = 0;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    temp = (p.parent_path() / ("." + p.filename().string() + ".tmp-" + std::to_string(getpid()) + "-" +
                               std::to_string(counter.fetch_add(1))))
               .string();
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      e = errno;
      if (e != EEXIST) break;
    }
  }
  if (fd < 0) return ErrnoStatus("cannot write " + path, e);
  e = WriteAll(fd, bytes);
  if (e == 0 && ::fsync(fd) != 0) e = errno;
  if (::close(fd) != 0 && e == 0 && errno != EINTR) e = errno;
  if (e == 0 && std::rename(temp.c_str(), path.c_str()) != 0) e = errno;
  if (e != 0) {
    ::unlink(temp.c_str());
    return ErrnoStatus("cannot write " + path, e);
  }
  return OkStatus();
}

}  // namespace tpumesh
