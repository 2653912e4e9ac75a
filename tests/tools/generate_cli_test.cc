// `tpumesh generate` as a user runs it: files written, the same PNG bytes on
// any device count, one clear line for bad input, Ctrl-C leaving only whole
// files.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/h5io.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using tpumesh::testing::ListDir;
using tpumesh::testing::RunTpumesh;

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}


TEST(GenerateCliTest, WritesImagesGridAndLatents) {
  const std::string dir = tpumesh::testing::TestTempDir();
  auto r = RunTpumesh("generate -p 'a red fox in the snow' -n 'blurry' --devices 2 --steps 3 --scheduler ddim -o " +
                      dir + "/out --save-latents " + dir + "/lat.h5");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("compiled in"));
  EXPECT_THAT(r.out, HasSubstr("images/s"));
  EXPECT_THAT(r.err, HasSubstr("3/3 UNet steps"));
  // The embedded default knows a few words, and says which of the prompts' it does not.
  EXPECT_THAT(r.err, HasSubstr("tpumesh generate: note: 'fox', 'in', 'the', 'snow', 'blurry' not in the model's "
                               "vocabulary; it was trained on: a on background red green blue yellow white black "
                               "circle square triangle\n"));
  EXPECT_EQ(ListDir(dir + "/out"), (std::vector<std::string>{"grid.png", "image_00.png", "image_01.png"}));
  auto init = tpumesh::pipeline::H5ReadArray(dir + "/lat.h5", "latents");
  ASSERT_TRUE(init.ok());
  EXPECT_EQ(init->shape(), (tpumesh::mesh::Shape{2, 4, 16, 16}));  // its images are 32x32
  auto steps = tpumesh::pipeline::H5ReadArray(dir + "/lat.h5", "latents_after_step");
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(steps->shape(), (tpumesh::mesh::Shape{3, 2, 4, 16, 16}));
  auto known = RunTpumesh("generate -p 'A white Triangle on a black background' --devices 1 --steps 1 -o " + dir +
                          "/known");
  ASSERT_EQ(known.code, 0) << known.err;
  EXPECT_THAT(known.err, Not(HasSubstr("vocabulary")));

  // Starting from the saved latents reproduces the images.
  auto again = RunTpumesh("generate -p 'a red fox in the snow' -n 'blurry' --devices 1 --batch-per-device 2 --steps 3 "
                          "--scheduler ddim -q --latents " + dir + "/lat.h5 -o " + dir + "/again");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_TRUE(again.err.empty()) << again.err;
  for (const char* f : {"/image_00.png", "/image_01.png", "/grid.png"})
    EXPECT_EQ(Bytes(dir + "/again" + f), Bytes(dir + "/out" + f)) << f;
}

// Image i is the same bytes on 1, 2, 4 and 8 devices.
TEST(GenerateCliTest, SamePngBytesOnAnyDeviceCount) {
  const std::string dir = tpumesh::testing::TestTempDir();
  std::vector<std::string> first;
  for (int devices : {8, 4, 2, 1}) {
    const std::string out = dir + "/d" + std::to_string(devices);
    auto r = RunTpumesh("generate -q -p 'a lighthouse at dusk' --steps 2 --seed 3 --devices " +
                        std::to_string(devices) + " --batch-per-device " + std::to_string(8 / devices) + " -o " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<std::string> bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(Bytes(out + "/image_0" + std::to_string(i) + ".png"));
    bytes.push_back(Bytes(out + "/grid.png"));
    if (first.empty()) {
      first = bytes;
      EXPECT_NE(first[0], first[1]);
    } else {
      for (size_t i = 0; i < bytes.size(); ++i) EXPECT_EQ(bytes[i], first[i]) << "file " << i << ", " << devices << " devices";
    }
  }
}

TEST(GenerateCliTest, BadInputIsOneLineNonZeroAndWritesNothing) {
  const std::string dir = tpumesh::testing::TestTempDir();
  std::ofstream(dir + "/a-file") << "x";
  struct Case {
    std::string args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"-p a -p b -p c --devices 2", "3 prompts for a batch of 2 images"},
           {"-p a --devices 2 --height 62", "--height 62 is not a multiple of 4"},
           {"-p a --devices 2 --steps 0", "--steps must be >= 1"},
           {"-p a --devices 2 --scheduler heun2", "unknown scheduler 'heun2'"},
           {"-p a --devices 2 --model " + dir + "/missing.h5", "missing.h5"},
           {"-p a --devices 2 --latents " + dir + "/missing.h5", "--latents"},
           {"-p a --devices 2 --precision fast", "precision"},
           {"--devices 2", "needs a prompt"},
           {"-p a --devices 2 --original-size 1024", "--original-size '1024': expected W,H"},
           {"-p a --devices 2 --crops-coords-top-left 1,-2", "--crops-coords-top-left '1,-2': expected X,Y"},
           {"-p a --devices 2 --target-size 0,64", "--target-size '0,64': expected W,H"},
           {"-p a --devices 2 --original-size 64,64", "condition SDXL models only"},
           {"-p a --devices 2 --guidance nan", "--guidance must be a finite number"},
       }) {
    auto r = RunTpumesh("generate " + c.args + " -o " + dir + "/out");
    EXPECT_EQ(r.code, 1) << c.args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr("tpumesh: error: ")) << c.args;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << "\n" << r.err;
    EXPECT_TRUE(ListDir(dir + "/out").empty()) << c.args;
  }
  auto r = RunTpumesh("generate -p a --devices 2 -o " + dir + "/a-file");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("a-file"));
}

// An SDXL diffusers folder converted and run from the command line: the
// family's defaults (guidance 5.0, the UNet's size), the size-conditioning
// flags, and the plan built once over --runs.
TEST(GenerateCliTest, SdxlConvertedAndRunWithItsDefaultsAndFlags) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string model = dir + "/sdxl.h5";
  auto c = RunTpumesh(std::string("convert ") + TPUMESH_SOURCE_DIR + "/tests/data/tiny-sdxl-b -o " + model + " -q");
  ASSERT_EQ(c.code, 0) << c.err;
  auto r = RunTpumesh("generate --model " + model +
                      " -p 'a red fox' --devices 2 --steps 2 --runs 2 --original-size 1024,768"
                      " --crops-coords-top-left 0,16 --target-size 640,896 -o " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("(StableDiffusionXLPipeline)"));
  EXPECT_THAT(r.out, HasSubstr("compiled in"));
  EXPECT_THAT(r.out, HasSubstr("64x64, 2 steps = 2 UNet calls, euler, guidance 5.00"));
  EXPECT_THAT(r.out, HasSubstr("run 2:"));
  EXPECT_THAT(r.out, HasSubstr("(plan cached)"));
  EXPECT_EQ(ListDir(dir + "/out").size(), 3u);  // 2 images + grid
  // The same on SD: refused, nothing written.
  auto sd = RunTpumesh("generate -p a --devices 1 --target-size 64,64 -o " + dir + "/sd");
  EXPECT_EQ(sd.code, 1);
  EXPECT_THAT(sd.err, HasSubstr("this is a sd model"));
  EXPECT_TRUE(ListDir(dir + "/sd").empty());
}

// SIGINT mid-run: a non-zero exit, a message, and no image files (the PNGs
// are written only after the run, each atomically).
TEST(GenerateCliTest, CtrlCStopsCleanly) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string out = dir + "/out", err = dir + "/err.txt";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FILE* f = freopen(err.c_str(), "w", stderr);
    (void)f;
    execl(TPUMESH_BIN, TPUMESH_BIN, "generate", "-p", "a long run", "--steps", "500", "-o", out.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until the run has started (its header line), then a little more.
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(err);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (s.find("tpumesh generate:") != std::string::npos) break;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
  std::ifstream in(err);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(s, HasSubstr("interrupted"));
  EXPECT_TRUE(ListDir(out).empty());
}

// --preview-every and signals: once the run has written OUT/preview.png,
// SIGTERM (the signal handler) and SIGINT (the graceful stop) remove it with
// the rest of the run's outputs and the folder the run made; a preview.png the run never wrote (a
// user's file) is never removed.
TEST(GenerateCliTest, PreviewGoesWithAnInterruptedRunAndAUsersPreviewStays) {
  auto run_and_signal = [](const std::string& out, const char* every, int sig, bool wait_for_preview) {
    const pid_t pid = fork();
    if (pid == 0) {
      FILE* f = freopen("/dev/null", "w", stderr);
      (void)f;
      execl(TPUMESH_BIN, TPUMESH_BIN, "generate", "-p", "a long run", "--steps", "500", "--preview-every", every, "-o",
            out.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    bool seen = false;
    for (int i = 0; i < 600 && !seen; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      // The run has started its steps once its progress shows in the folder
      // (a preview) or, without one, after a second.
      seen = wait_for_preview ? fs::exists(out + "/preview.png") : i >= 20;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    return seen;
  };
  for (const int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(sig);
    const std::string out = tpumesh::testing::TestTempDir() + "/out" + std::to_string(sig);
    EXPECT_TRUE(run_and_signal(out, "1", sig, /*wait_for_preview=*/true));
    // The folder the run made goes too (SIGTERM left it empty once).
    EXPECT_FALSE(fs::exists(out)) << ::testing::PrintToString(ListDir(out));
  }
  // A user's preview.png in the folder, a run interrupted before it wrote
  // one (every 1000 steps): the file stays as it was.
  const std::string out = tpumesh::testing::TestTempDir() + "/mine";
  fs::create_directories(out);
  fs::copy_file(std::string(TPUMESH_SOURCE_DIR) + "/tests/data/png/rgb.png", out + "/preview.png");
  EXPECT_TRUE(run_and_signal(out, "1000", SIGINT, /*wait_for_preview=*/false));
  EXPECT_EQ(fs::file_size(out + "/preview.png"), fs::file_size(std::string(TPUMESH_SOURCE_DIR) + "/tests/data/png/rgb.png"));
}

}  // namespace
