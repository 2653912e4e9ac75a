#include "pipeline/init_model.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/model_file.h"
#include "models/architectures.h"
#include "models/configs.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string Dir() {
  return tpumesh::testing::TestTempDir();
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(InitModelTest, TinyHasEveryParameterAndTheEmbeddedTokenizer) {
  InitOptions o;
  o.output = Dir() + "/tiny.h5";
  auto s = InitModel(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->has_tokenizer);
  auto f = ModelFile::Open(o.output);
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(*(*f)->ReadText("tokenizer/vocab.json"), HasSubstr("<|endoftext|>"));
  auto arch = models::BuiltinArchitecture("tiny");
  auto unet = models::ParseUNetConfig(arch->unet, "unet");
  for (const auto& p : models::UNetParams(*unet)) {
    auto info = (*f)->Info("unet", p.name);
    ASSERT_TRUE(info.ok()) << p.name;
    EXPECT_EQ(info->shape, p.shape) << p.name;
  }
  // Norm scales 1, biases 0, conv weights ~ N(0, 1/fan_in).
  auto norm = (*f)->ReadTensor("unet", "conv_norm_out.weight", mesh::DType::kF32);
  for (float v : norm->ToVector<float>()) EXPECT_EQ(v, 1.0f);
  auto bias = (*f)->ReadTensor("unet", "conv_in.bias", mesh::DType::kF32);
  for (float v : bias->ToVector<float>()) EXPECT_EQ(v, 0.0f);
  auto w = (*f)->ReadTensor("unet", "up_blocks.0.resnets.0.conv1.weight", mesh::DType::kF32);
  const int64_t fan_in = w->num_elements() / w->dim(0);
  double sum = 0, sum2 = 0;
  for (float v : w->ToVector<float>()) {
    sum += v;
    sum2 += double(v) * v;
  }
  const double n = static_cast<double>(w->num_elements());
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sum2 / n) * std::sqrt(double(fan_in)), 1.0, 0.05);
}

TEST(InitModelTest, SameSeedSameBytesOtherSeedOtherWeights) {
  InitOptions a, b, c;
  a.output = Dir() + "/a.h5";
  b.output = Dir() + "/b.h5";
  c.output = Dir() + "/c.h5";
  c.seed = 7;
  a.dtype = b.dtype = c.dtype = mesh::DType::kBF16;
  ASSERT_TRUE(InitModel(a).ok());
  ASSERT_TRUE(InitModel(b).ok());
  ASSERT_TRUE(InitModel(c).ok());
  EXPECT_EQ(Bytes(a.output), Bytes(b.output));
  EXPECT_NE(Bytes(a.output), Bytes(c.output));
}

TEST(InitModelTest, BadOptions) {
  InitOptions o;
  o.output = Dir() + "/bad.h5";
  o.arch = "sd9";
  EXPECT_THAT(InitModel(o).status().message(), HasSubstr("unknown architecture 'sd9'"));
  o.arch = "tiny";
  o.tokenizer_dir = Dir() + "/no-such-tokenizer";
  EXPECT_THAT(InitModel(o).status().message(), HasSubstr("vocab.json: missing"));
  EXPECT_FALSE(fs::exists(o.output));
}

}  // namespace
}  // namespace tpumesh::pipeline
