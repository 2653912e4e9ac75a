#include "pipeline/init_model.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/model_file.h"
#include "models/architectures.h"
#include "models/configs.h"
#include "io/h5io.h"
#include "io/model_file.h"
#include "tests/testing/golden.h"
#include "tests/testing/temp_dir.h"
#include "text/tokenizer.h"

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

// SDXL's tokenizer_2 derived from a tokenizer folder pads with "!" and
// splits "!" out of prompts: on tiny-sdxl-b's tokenizer/ it gives exactly the
// ids transformers gave with that model's real tokenizer_2 folder.
TEST(InitModelTest, SdxlTokenizer2FromTokenizerMatchesTransformers) {
  const std::string ref = std::string(TPUMESH_TEST_DATA_DIR) + "/tiny-sdxl-b";
  std::vector<std::pair<std::string, std::string>> texts;
  for (const char* f : {"vocab.json", "merges.txt", "special_tokens_map.json", "tokenizer_config.json"}) {
    std::ifstream in(ref + "/tokenizer/" + f);
    std::stringstream ss;
    ss << in.rdbuf();
    texts.emplace_back(std::string("tokenizer/") + f, ss.str());
  }
  auto t2 = SdxlTokenizer2Texts(texts);
  ASSERT_TRUE(t2.ok()) << t2.status().ToString();
  std::map<std::string, std::string> m(t2->begin(), t2->end());
  ClipTokenizerTexts tt{m["tokenizer_2/vocab.json"], m["tokenizer_2/merges.txt"],
                        m["tokenizer_2/special_tokens_map.json"], m["tokenizer_2/tokenizer_config.json"]};
  auto tok = ClipTokenizer::FromStrings(tt, "tokenizer_2");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::string golden = ref + "/golden.h5";
  const mesh::Array want = tpumesh::testing::ReadDataset(golden, "tokenizer_2/input_ids");
  auto prompts = H5ReadStrings(golden, "tokenizer/prompts");
  ASSERT_TRUE(prompts.ok()) << prompts.status().ToString();
  ASSERT_EQ(static_cast<int64_t>(prompts->size()), want.dim(0));
  for (size_t i = 0; i < prompts->size(); ++i) {
    auto ids = tok->EncodePadded((*prompts)[i], 77);
    ASSERT_TRUE(ids.ok());
    for (int j = 0; j < 77; ++j) ASSERT_EQ((*ids)[j], want.data<int32_t>()[i * 77 + j]) << "prompt " << i << " id " << j;
  }
}

}  // namespace
}  // namespace tpumesh::pipeline
