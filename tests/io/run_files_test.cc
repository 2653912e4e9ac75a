// io/run_files.h: the output guard every run that writes passes first (the
// commands' refusals end to end are tests/tools/faults_cli_test.cc's).
#include "io/run_files.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh {
namespace {

using ::testing::HasSubstr;

void Touch(const std::string& path) { std::ofstream(path) << "x"; }

TEST(RunFilesTest, DistinctWritableOutputsPass) {
  const std::string dir = testing::TestTempDir();
  Touch(dir + "/in.h5");
  RunFiles f;
  f.inputs = {{"--inputs", dir + "/in.h5"}, {"--chip", ""}};
  f.outputs = {{"--outputs", dir + "/out.h5"}, {"--report", dir + "/r.json"}, {"--trace", ""}};
  EXPECT_TRUE(CheckRunFiles(f).ok());
}

TEST(RunFilesTest, AnOutputThatIsAnInputOrAnotherOutputIsRefused) {
  const std::string dir = testing::TestTempDir();
  Touch(dir + "/in.h5");
  RunFiles f;
  f.inputs = {{"--inputs", dir + "/in.h5"}};
  f.outputs = {{"--outputs", dir + "/./in.h5"}};
  Status s = CheckRunFiles(f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("the same file as --inputs (an input is never overwritten)"));
  f.outputs = {{"--outputs", dir + "/o.h5"}, {"--report", dir + "/o.h5"}};
  EXPECT_THAT(CheckRunFiles(f).message(), HasSubstr("the same file as --outputs (two outputs cannot share a file)"));
}

TEST(RunFilesTest, OutputsInsideAnInputFolderOrOnGeneratesImagesAreRefused) {
  const std::string dir = testing::TestTempDir();
  std::filesystem::create_directories(dir + "/model/unet");
  RunFiles f;
  f.input_dirs = {{"MODEL_DIR", dir + "/model"}};
  f.outputs = {{"-o", dir + "/model/unet/out.h5"}};
  EXPECT_THAT(CheckRunFiles(f).message(), HasSubstr("the folder MODEL_DIR reads"));
  RunFiles g;
  g.image_dir = dir;
  g.outputs = {{"--report", dir + "/image_01.png"}};
  EXPECT_THAT(CheckRunFiles(g).message(), HasSubstr("where generate writes image_01.png"));
  g.outputs = {{"--report", dir + "/preview.png"}};
  EXPECT_TRUE(CheckRunFiles(g).ok());  // preview.png only with --preview-every
  g.preview = true;
  EXPECT_FALSE(CheckRunFiles(g).ok());
}

TEST(RunFilesTest, AFolderIsNotAWritableOutput) {
  const std::string dir = testing::TestTempDir();
  RunFiles f;
  f.outputs = {{"--report", dir}};
  EXPECT_FALSE(CheckRunFiles(f).ok());
}

TEST(RunFilesTest, ChipInputIsTheChipFlagWhenItNamesAFile) {
  const std::string dir = testing::TestTempDir();
  Touch(dir + "/chip.json");
  EXPECT_EQ(ChipInput(dir + "/chip.json"), std::make_pair(std::string("--chip"), dir + "/chip.json"));
  EXPECT_EQ(ChipInput("v5e"), std::make_pair(std::string("--chip"), std::string()));
}

}  // namespace
}  // namespace tpumesh
