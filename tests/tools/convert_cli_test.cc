// `tpumesh convert CKPT.safetensors`: the command around pipeline/
// single_file.h — a single file converts and the model generates; a pickle,
// a folder with single-file flags and an unknown layout are one line, exit 1,
// nothing written.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace {

using ::testing::HasSubstr;
using tpumesh::testing::RunTpumesh;
namespace fs = std::filesystem;

const std::string kData = std::string(TPUMESH_SOURCE_DIR) + "/tests/data/single-file";

std::string Dir(const std::string& name) {
  const std::string d = tpumesh::testing::TestTempDir() + "/convert_cli_" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// One line on stderr, exit 1, and nothing in the folder but what was there.
void ExpectRefused(const tpumesh::testing::CliResult& r, const std::string& dir, size_t files_before,
                   const std::string& message) {
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(message));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator())), files_before);
}

TEST(ConvertCliTest, SingleFileConvertsAndGenerates) {
  const std::string dir = Dir("ok");
  auto r = RunTpumesh("convert " + kData + "/sdxl.safetensors --config " + kData + "/sdxl -o " + dir + "/m.h5 -q");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("wrote " + dir + "/m.h5: "));
  EXPECT_THAT(r.out, HasSubstr("tensors of the checkpoint unused"));
  auto g = RunTpumesh("generate --model " + dir + "/m.h5 --devices 1 --steps 2 --prompt cat -o " + dir + "/img");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_TRUE(fs::exists(dir + "/img/image_00.png"));
}

TEST(ConvertCliTest, BadInputIsOneLineAndNothingWritten) {
  const std::string dir = Dir("bad");
  std::ofstream(dir + "/model.ckpt") << "PK";
  std::ofstream(dir + "/unknown.safetensors", std::ios::binary)
      << std::string("\x10\0\0\0\0\0\0\0", 8) << R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  const size_t n = 2;
  ExpectRefused(RunTpumesh("convert " + dir + "/model.ckpt -o " + dir + "/m.h5"), dir, n, "a pickle checkpoint");
  ExpectRefused(RunTpumesh("convert " + dir + "/missing.pt -o " + dir + "/m.h5"), dir, n, "a pickle checkpoint");
  ExpectRefused(RunTpumesh("convert " + kData + "/sd1 --arch sd15 -o " + dir + "/m.h5"), dir, n,
                "--arch: only for a single-file checkpoint");
  ExpectRefused(RunTpumesh("convert " + kData + "/sd1.safetensors --arch sdxl -o " + dir + "/m.h5"), dir, n,
                "--arch sdxl: ");
  ExpectRefused(RunTpumesh("convert " + dir + "/nothing -o " + dir + "/m.h5"), dir, n,
                "not a directory nor a regular file");
}

TEST(ConvertCliTest, HelpSaysWhereTheTokenizerComesFrom) {
  auto r = RunTpumesh("convert --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("OpenAI CLIP vocabulary built into tpumesh"));
  EXPECT_THAT(r.out, HasSubstr("--prediction-type"));
}

}  // namespace
