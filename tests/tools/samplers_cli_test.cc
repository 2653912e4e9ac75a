// `tpumesh generate` with the samplers and sigma schedules of
// schedulers/schedulers.h (docs/cli.md, Samplers) on the embedded default
// model: each runs and writes its images, the options change the run, and
// what stays unimplemented is one line, exit 1, nothing written.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
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

TEST(SamplersCliTest, HelpListsEveryName) {
  auto r = RunTpumesh("generate --help");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("pndm | ddim | lms | euler | euler_a | dpmpp_2m | heun | dpmpp_2m_sde | dpmpp_2s_a"));
}

// Each sampler and schedule runs; the UNet is called as often as diffusers
// calls it (Heun 2N - 1), and each option changes the images.
TEST(SamplersCliTest, EverySamplerAndScheduleRuns) {
  const std::string dir = tpumesh::testing::TestTempDir();
  struct Case {
    std::string name, args;
    int calls;
  };
  const std::string karras = " --scheduler-opt use_karras_sigmas=true";
  const std::string expo = " --scheduler-opt use_exponential_sigmas=true";
  const std::string beta = " --scheduler-opt use_beta_sigmas=true";
  std::vector<Case> cases = {
      {"heun", "--scheduler heun", 5},
      {"dpmpp_2m_sde", "--scheduler dpmpp_2m_sde", 3},
      {"dpmpp_2s_a", "--scheduler dpmpp_2s_a", 3},
      {"dpmpp_2m", "--scheduler dpmpp_2m", 3},
  };
  for (const std::string name : {"euler", "euler_a", "lms", "dpmpp_2m", "heun", "dpmpp_2m_sde", "dpmpp_2s_a"}) {
    const int calls = name == std::string("heun") ? 5 : 3;
    cases.push_back({name + "_karras", "--scheduler " + name + karras, calls});
    cases.push_back({name + "_expo", "--scheduler " + name + expo, calls});
    cases.push_back({name + "_beta", "--scheduler " + name + beta, calls});
  }
  cases.push_back({"euler", "--scheduler euler", 3});
  cases.push_back({"euler_karras_bounds", "--scheduler euler" + karras +
                                              " --scheduler-opt sigma_min=0.1 --scheduler-opt sigma_max=10", 3});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const std::string out = dir + "/" + c.name;
    auto r = RunTpumesh("generate -p 'a red circle' --devices 2 --steps 3 --seed 5 " + c.args + " -o " + out +
                        " --save-latents " + out + ".h5");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr(std::to_string(c.calls) + "/" + std::to_string(c.calls) + " UNet steps"));
    EXPECT_EQ(ListDir(out), (std::vector<std::string>{"grid.png", "image_00.png", "image_01.png"}));
    auto steps = tpumesh::pipeline::H5ReadArray(out + ".h5", "latents_after_step");
    ASSERT_TRUE(steps.ok()) << steps.status().ToString();
    EXPECT_EQ(steps->shape()[0], c.calls);
  }
  // The options take effect: each schedule gives other images than the
  // scheduler's own, and every sampler's differ.
  for (const std::string name : {"euler", "dpmpp_2m", "heun"}) {
    const std::string own = Bytes(dir + "/" + name + "/image_00.png");
    EXPECT_NE(own, Bytes(dir + "/" + name + "_karras/image_00.png")) << name;
    EXPECT_NE(own, Bytes(dir + "/" + name + "_expo/image_00.png")) << name;
    EXPECT_NE(own, Bytes(dir + "/" + name + "_beta/image_00.png")) << name;
  }
  EXPECT_NE(Bytes(dir + "/euler_karras/image_00.png"), Bytes(dir + "/euler_karras_bounds/image_00.png"));
  EXPECT_NE(Bytes(dir + "/dpmpp_2m/image_00.png"), Bytes(dir + "/dpmpp_2m_sde/image_00.png"));
  EXPECT_NE(Bytes(dir + "/dpmpp_2m_sde/image_00.png"), Bytes(dir + "/dpmpp_2s_a/image_00.png"));
}

TEST(SamplersCliTest, UnimplementedKeysAreOneLine) {
  const std::string dir = tpumesh::testing::TestTempDir();
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"--scheduler euler --scheduler-opt interpolation_type=log_linear",
            "euler: interpolation_type \"log_linear\" is not implemented"},
           {"--scheduler dpmpp_2m --scheduler-opt algorithm_type=sde-dpmsolver --scheduler-opt solver_order=3 "
            "--scheduler-opt final_sigmas_type=sigma_min",
            "dpmpp_2m: solver_order 3 is not implemented (with algorithm_type \"sde-dpmsolver\""},
           {"--scheduler dpmpp_2s_a --scheduler-opt thresholding=true", "dpmpp_2s_a: thresholding true"},
           {"--scheduler lms --scheduler-opt use_karras_sigmas=true --scheduler-opt use_exponential_sigmas=true",
            "only one of use_karras_sigmas, use_exponential_sigmas and use_beta_sigmas"},
           {"--scheduler heun --scheduler-opt use_beta_sigmas=true --scheduler-opt use_karras_sigmas=true",
            "heun: only one of"},
           {"--scheduler euler --scheduler-opt sigma_min=0", "sigma_min 0 must be null or above 0"},
           {"--scheduler heun --scheduler-opt use_karras_sigmas=maybe", "use_karras_sigmas \"maybe\""},
       }) {
    SCOPED_TRACE(c.args);
    auto r = RunTpumesh("generate -q -p a --devices 1 --steps 2 " + c.args + " -o " + dir + "/out");
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(dir + "/out"));
  }
}

}  // namespace
