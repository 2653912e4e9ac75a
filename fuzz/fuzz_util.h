// Helpers for the libFuzzer targets: the input as a file (an anonymous
// in-memory file, so readers that take a path run their whole path).
#ifndef TPUMESH_FUZZ_FUZZ_UTIL_H_
#define TPUMESH_FUZZ_FUZZ_UTIL_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace tpumesh::fuzz {

// An in-memory file holding `data`; its path while the object lives.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = memfd_create("tpumesh-fuzz", MFD_CLOEXEC);
    size_t done = 0;
    while (fd_ >= 0 && done < size) {
      const ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() {
    if (fd_ >= 0) close(fd_);
  }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace tpumesh::fuzz

#endif  // TPUMESH_FUZZ_FUZZ_UTIL_H_
