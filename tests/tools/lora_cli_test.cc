// --lora as a user runs it (pipeline/lora.h): generate and eval on the tiny
// SDXL with LoRAs from tests/data/lora; every bad --lora one line on
// stderr naming the file (and the key), exit 1, nothing written.
#include <algorithm>
#include <cmath>
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
using tpumesh::testing::RunTpumesh;

const std::string kData = std::string(TPUMESH_SOURCE_DIR) + "/tests/data/";

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// tests/data/tiny-sdxl-b converted once per test process.
std::string SdxlModel() {
  static const std::string path = [] {
    const std::string p = tpumesh::testing::ProcessTempDir() + "/lora-tiny-sdxl-b.h5";
    auto r = RunTpumesh("convert " + kData + "tiny-sdxl-b -o " + p);
    EXPECT_EQ(r.code, 0) << r.err;
    return p;
  }();
  return path;
}

const std::string kGenerate = " -p 'a fox' --height 48 --width 64 --steps 2 --devices 2 -q";

TEST(LoraCliTest, GenerateRecordsTheLorasInThePngs) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string kohya = kData + "lora/sdxl_kohya.safetensors", peft = kData + "lora/sdxl_peft.safetensors";
  auto r = RunTpumesh("generate --model " + SdxlModel() + kGenerate + " --lora " + kohya + ":0.5 --lora " + peft +
                      " -o " + dir + "/with");
  ASSERT_EQ(r.code, 0) << r.err;
  auto plain = RunTpumesh("generate --model " + SdxlModel() + kGenerate + " -o " + dir + "/without");
  ASSERT_EQ(plain.code, 0) << plain.err;
  for (const char* png : {"/image_00.png", "/image_01.png", "/grid.png"})
    EXPECT_THAT(Bytes(dir + "/with" + png), HasSubstr("LoRA: sdxl_kohya.safetensors:0.5, sdxl_peft.safetensors:1"))
        << png;
  EXPECT_THAT(Bytes(dir + "/without/image_00.png"), ::testing::Not(HasSubstr("LoRA:")));
  EXPECT_NE(Bytes(dir + "/with/image_00.png"), Bytes(dir + "/without/image_00.png"));
  // Without -q the run says which LoRAs it fused.
  auto loud = RunTpumesh("generate --model " + SdxlModel() + " -p 'a fox' --height 48 --width 64 --steps 1 --devices 1 "
                         "--lora " + kohya + ":0.5 -o " + dir + "/loud");
  ASSERT_EQ(loud.code, 0) << loud.err;
  EXPECT_THAT(loud.err, HasSubstr("LoRA sdxl_kohya.safetensors:0.5"));
}

TEST(LoraCliTest, EvalFusesTheLoraIntoTheTextEncoder) {
  const std::string dir = tpumesh::testing::TestTempDir();
  {
    auto w = tpumesh::pipeline::H5Writer::Create(dir + "/in.h5");
    ASSERT_TRUE(w.ok());
    auto ids = tpumesh::mesh::Array::Host(tpumesh::mesh::DType::kI32, {1, 77});
    for (int i = 0; i < 77; ++i) ids.mutable_data<int32_t>()[i] = i < 5 ? 300 + i : 999;
    ASSERT_TRUE((*w)->Write("input_ids", ids).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  const std::string base = "eval --model " + SdxlModel() + " --component text_encoder --input " + dir + "/in.h5";
  auto plain = RunTpumesh(base + " --output " + dir + "/plain.h5");
  auto with = RunTpumesh(base + " --output " + dir + "/with.h5 --lora " + kData + "lora/sdxl_kohya.safetensors:1.5");
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(with.code, 0) << with.err;
  auto a = tpumesh::pipeline::H5ReadArray(dir + "/plain.h5", "last_hidden_state");
  auto b = tpumesh::pipeline::H5ReadArray(dir + "/with.h5", "last_hidden_state");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->shape(), b->shape());
  double diff = 0;
  for (int64_t i = 0; i < a->num_elements(); ++i)
    diff = std::max(diff, std::fabs(double(a->data<float>()[i]) - b->data<float>()[i]));
  EXPECT_GT(diff, 1e-3);
}

TEST(LoraCliTest, BadLoraIsOneLineExitOneNothingWritten) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string text = dir + "/notes.safetensors";
  std::ofstream(text) << "not a LoRA\n";
  struct Bad {
    std::string lora, want;
  };
  const std::vector<Bad> bads = {
      // An SD LoRA on SDXL: the shapes do not fit.
      {kData + "lora/sd_kohya.safetensors", "--lora " + kData + "lora/sd_kohya.safetensors: key lora_te_"},
      {kData + "lora/sdxl_kohya.safetensors:strong", "'strong' is not a scale"},
      {kData + "lora/sdxl_kohya.safetensors:nan", "'nan' is not a scale"},
      {text, "--lora " + text + ": not a LoRA safetensors file"},
      {dir + "/absent.safetensors", "absent.safetensors"},
      {SdxlModel(), "--lora " + SdxlModel() + ": not a LoRA safetensors file"},
  };
  for (const Bad& b : bads) {
    const std::string out = dir + "/out";
    auto r = RunTpumesh("generate --model " + SdxlModel() + kGenerate + " --lora '" + b.lora + "' -o " + out);
    EXPECT_EQ(r.code, 1) << b.lora;
    EXPECT_THAT(r.err, HasSubstr(b.want)) << b.lora;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out)) << b.lora;
    auto e = RunTpumesh("eval --model " + SdxlModel() + " --component text_encoder --input " + dir +
                        "/none.h5 --output " + dir + "/out.h5 --lora '" + b.lora + "'");
    EXPECT_EQ(e.code, 1) << b.lora;
    EXPECT_THAT(e.err, HasSubstr(b.want)) << b.lora;
    EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
    EXPECT_FALSE(fs::exists(dir + "/out.h5")) << b.lora;
  }
}

}  // namespace
