// A scratch folder of the running test's own. ctest runs every test of a
// binary as its own process, in parallel, and they all share TempDir(); a
// folder named by suite, test and pid keeps their files apart. ListDir shows
// what a test left in one.
#ifndef TPUMESH_TESTS_TESTING_TEMP_DIR_H_
#define TPUMESH_TESTS_TESTING_TEMP_DIR_H_

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tpumesh::testing {

inline std::string TestTempDir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string d = ::testing::TempDir() + "/tpumesh_" +
                  (info ? std::string(info->test_suite_name()) + "." + info->name() : "global") + "." +
                  std::to_string(getpid());
  std::filesystem::create_directories(d);
  return d;
}

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
