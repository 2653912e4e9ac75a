// Runs the tpumesh binary (TPUMESH_BIN) as a user would, for the CLI tests.
#ifndef TPUMESH_TESTS_TESTING_CLI_H_
#define TPUMESH_TESTS_TESTING_CLI_H_

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::testing {

// Whether this test (and so the tpumesh it runs, built alike) is under
// AddressSanitizer: its shadow memory needs terabytes of address space, so
// `ulimit -v` cannot bound such a run, and its allocator aborts on a request
// past its maximum where malloc returns null.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAddressSanitizer = true;
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif

// `ulimit -v KIB; ` for a shell command line, or nothing under
// AddressSanitizer (above).
inline std::string AddressSpaceLimit(int64_t kib) {
  return kUnderAddressSanitizer ? std::string() : "ulimit -v " + std::to_string(kib) + "; ";
}

struct CliResult {
  int code;
  std::string out;  // stdout
  std::string err;  // stderr
};

// `args` goes through the shell (quote as in one). file_size_limit > 0: the
// run may write no file larger than that many bytes (RLIMIT_FSIZE, rounded
// down to 512-byte blocks), as `prlimit --fsize` sets it: SIGXFSZ is left at
// its default (the binary ignores it itself, so every write past the limit
// fails with EFBIG, as writes on a full disk fail with ENOSPC). A crash
// (signal) gives code -1.
inline CliResult RunTpumesh(const std::string& args, int64_t file_size_limit = 0) {
  // A file of its own per call: ctest runs the tests of a binary as parallel
  // processes that share TempDir().
  std::string err_file = ::testing::TempDir() + "/tpumesh_cli_stderr_XXXXXX";
  const int fd = mkstemp(err_file.data());
  if (fd >= 0) close(fd);
  const std::string limit =
      file_size_limit > 0 ? "ulimit -f " + std::to_string(file_size_limit / 512) + "; exec " : "";
  const std::string cmd = limit + std::string(TPUMESH_BIN) + " " + args + " 2>" + err_file;
  CliResult r{-1, "", ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (FILE* f = fopen(err_file.c_str(), "r")) {
    while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) r.err.append(buf.data(), n);
    fclose(f);
  }
  std::remove(err_file.c_str());
  return r;
}

// `tpumesh init`'s tiny model (seed 0, f32), written once per test process
// into its shared folder, for the CLI tests that need a model file.
inline std::string TinyModelFile() {
  static const std::string path = [] {
    const std::string p = ProcessTempDir() + "/tiny.h5";
    EXPECT_EQ(RunTpumesh("init -q -o " + p).code, 0);
    return p;
  }();
  return path;
}

}  // namespace tpumesh::testing

#endif  // TPUMESH_TESTS_TESTING_CLI_H_
