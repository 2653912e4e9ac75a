// io/atomic_file.h: several files written as one transaction, short
// temporaries, and the output check.
#include "io/atomic_file.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh {
namespace {

namespace fs = std::filesystem;
using ::tpumesh::testing::ListDir;

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The second rename fails (its target is a folder that is not empty), after
// the first one replaced an existing file and before the third: the first is
// rolled back to its old bytes, the third never appears, no temporary stays.
TEST(AtomicFileTest, AFailedRenameRollsBackTheOnesDone) {
  const std::string dir = ::tpumesh::testing::TestTempDir();
  std::ofstream(dir + "/a.json") << "old a";
  fs::create_directories(dir + "/b.json/inside");
  const Status s = WriteFilesAtomic({{dir + "/a.json", "new a"}, {dir + "/b.json", "new b"}, {dir + "/c.csv", "new c"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot write " + dir + "/b.json"), std::string::npos) << s.message();
  EXPECT_EQ(Read(dir + "/a.json"), "old a");
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"a.json", "b.json"}));
}

// A file that did not exist before the commit is removed again.
TEST(AtomicFileTest, AFailedRenameRemovesNewFilesOfTheSet) {
  const std::string dir = ::tpumesh::testing::TestTempDir();
  fs::create_directories(dir + "/b.json/inside");
  EXPECT_FALSE(WriteFilesAtomic({{dir + "/a.json", "new a"}, {dir + "/b.json", "new b"}}).ok());
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"b.json"}));
}

// A target that is a symlink is restored as the symlink, its file untouched.
TEST(AtomicFileTest, AFailedRenameRestoresASymlinkTarget) {
  const std::string dir = ::tpumesh::testing::TestTempDir();
  std::ofstream(dir + "/x.json") << "x";
  fs::create_symlink("x.json", dir + "/a.json");
  fs::create_directories(dir + "/b.json/inside");
  EXPECT_FALSE(WriteFilesAtomic({{dir + "/a.json", "new a"}, {dir + "/b.json", "new b"}}).ok());
  ASSERT_TRUE(fs::is_symlink(dir + "/a.json"));
  EXPECT_EQ(fs::read_symlink(dir + "/a.json"), "x.json");
  EXPECT_EQ(Read(dir + "/x.json"), "x");
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"a.json", "b.json", "x.json"}));
}

TEST(AtomicFileTest, ASetReplacesEveryFileAndLeavesNoTemporary) {
  const std::string dir = ::tpumesh::testing::TestTempDir();
  std::ofstream(dir + "/a.json") << "old a";
  ASSERT_TRUE(WriteFilesAtomic({{dir + "/a.json", "new a"}, {dir + "/b.json", "new b"}}).ok());
  EXPECT_EQ(Read(dir + "/a.json"), "new a");
  EXPECT_EQ(Read(dir + "/b.json"), "new b");
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"a.json", "b.json"}));
}

// A temporary's name does not grow with the target's: a 255-byte name (the
// most a directory entry holds here) is written; 256 bytes are refused
// before anything is written, naming the limit.
TEST(AtomicFileTest, LongestNamesAreWrittenAndLongerOnesRefusedUpFront) {
  const std::string dir = ::tpumesh::testing::TestTempDir();
  const std::string longest = dir + "/" + std::string(250, 'r') + ".json";
  EXPECT_LE(TemporaryPathBeside(longest).size(), dir.size() + 40);
  EXPECT_TRUE(CheckWritable(longest, "--report").ok());
  EXPECT_TRUE(WriteFileAtomic(longest, "x").ok());
  const Status s = CheckWritable(dir + "/" + std::string(251, 'r') + ".json", "--report");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("a name of 256 bytes, more than the 255 this folder takes"), std::string::npos)
      << s.message();
  EXPECT_EQ(ListDir(dir).size(), 1u);
}

}  // namespace
// SIGTERM while another thread is inside a CommitSection (a set of outputs
// being renamed into place): the handler waits for the commit to close, so
// the new file is whole in place and no temporary is left; before, it
// unlinked the temporaries mid-commit (a mixed set, or a preview renamed
// back after it was removed).
TEST(AtomicFileTest, ASignalWaitsForAnOpenCommit) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string target = dir + "/out.txt", temp = dir + "/.tpumesh-commit-test";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    InstallTempFileCleanup();
    std::ofstream(temp) << "new";
    RegisterTempFile(temp);
    std::thread committer([&] {
      const CommitSection commit;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the signal arrives meanwhile
      if (std::rename(temp.c_str(), target.c_str()) == 0) UnregisterTempFile(temp);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    kill(getpid(), SIGTERM);  // handled on this thread: it waits for the commit
    committer.join();
    _exit(0);  // not reached: the handler ends the process with SIGTERM
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  std::ifstream in(target);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "new");
  EXPECT_FALSE(std::filesystem::exists(temp));
}

}  // namespace tpumesh
