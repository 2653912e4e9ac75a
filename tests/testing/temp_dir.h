// A scratch folder of the running test's own. ctest runs every test of a
// binary as its own process, in parallel, and they all share TempDir(); a
// folder named by suite, test and pid keeps their files apart;
// ProcessTempDir() holds what a process makes once for all its tests. The
// folders a process made are removed when it exits with every test passed (a
// failure leaves them to look at; a later process with the same pid starts
// them afresh). ListDir shows what a test left in one.
#ifndef TPUMESH_TESTS_TESTING_TEMP_DIR_H_
#define TPUMESH_TESTS_TESTING_TEMP_DIR_H_

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tpumesh::testing {

namespace internal {
// Makes TempDir()/tpumesh_<name>.<pid> and removes it when the process exits
// with every test passed.
inline std::string MadeTempDir(const std::string& name) {
  // Made after GoogleTest's UnitTest (asked for first), so destroyed before it.
  struct Made {
    std::vector<std::string> dirs;
    ~Made() {
      if (!::testing::UnitTest::GetInstance()->Passed()) return;
      std::error_code ec;
      for (const std::string& d : dirs) std::filesystem::remove_all(d, ec);
    }
  };
  ::testing::UnitTest::GetInstance();
  static Made made;
  std::string flat = name;  // a parameterised suite's name holds '/'
  std::replace(flat.begin(), flat.end(), '/', '_');
  const std::string d = ::testing::TempDir() + "/tpumesh_" + flat + "." + std::to_string(getpid());
  if (std::find(made.dirs.begin(), made.dirs.end(), d) == made.dirs.end()) {
    // New to this process: whatever is there was left by a failed process
    // that had the same pid (pids wrap at 32768 on many hosts).
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
    made.dirs.push_back(d);
  }
  std::filesystem::create_directories(d);
  return d;
}
}  // namespace internal

// The running test's own folder.
inline std::string TestTempDir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return internal::MadeTempDir(info ? std::string(info->test_suite_name()) + "." + info->name() : "global");
}

// A folder the tests of this process share (files made once per process).
inline std::string ProcessTempDir() { return internal::MadeTempDir("shared"); }

// The names in `dir` (hidden ones too), sorted; empty when it does not exist.
inline std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  if (!std::filesystem::exists(dir)) return names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tpumesh::testing

#endif  // TPUMESH_TESTS_TESTING_TEMP_DIR_H_
