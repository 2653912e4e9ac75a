// Configs parse as diffusers writes them; the parameter manifests equal real
// checkpoints name for name and shape for shape.
#include "models/configs.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/golden.h"
#include "nlohmann/json.hpp"

namespace tpumesh::models {
namespace {

using ::testing::HasSubstr;

const std::string kRef = std::string(TPUMESH_SOURCE_DIR) + "/../shared/refdata/tiny-sd-a";

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// name -> shape from a safetensors header.
std::map<std::string, mesh::Shape> CheckpointShapes(const std::string& path) {
  const std::string bytes = Slurp(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  auto j = nlohmann::json::parse(bytes.substr(8, n));
  std::map<std::string, mesh::Shape> out;
  for (auto& [k, v] : j.items())
    if (k != "__metadata__") out[k] = v["shape"].get<mesh::Shape>();
  return out;
}

void ExpectSame(const std::vector<ParamSpec>& manifest, const std::map<std::string, mesh::Shape>& ckpt) {
  std::map<std::string, mesh::Shape> got;
  for (const auto& p : manifest) {
    EXPECT_TRUE(got.emplace(p.name, p.shape).second) << "duplicate " << p.name;
  }
  for (const auto& [name, shape] : ckpt) {
    auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << "manifest lacks " << name;
      continue;
    }
    EXPECT_EQ(it->second, shape) << name;
  }
  for (const auto& [name, shape] : got) EXPECT_TRUE(ckpt.count(name)) << "checkpoint lacks " << name;
}

class RefdataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TPUMESH_REQUIRE_REFDATA(kRef + "/unet/config.json");
  }
};

TEST_F(RefdataTest, UNetManifestMatchesCheckpoint) {
  auto c = ParseUNetConfig(Slurp(kRef + "/unet/config.json"), "unet/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_attention_heads, (std::vector<int>{8, 8}));  // attention_head_dim read as heads
  ExpectSame(UNetParams(*c), CheckpointShapes(kRef + "/unet/diffusion_pytorch_model.safetensors"));
}

TEST_F(RefdataTest, VaeManifestMatchesCheckpoint) {
  auto c = ParseVaeConfig(Slurp(kRef + "/vae/config.json"), "vae/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scale_factor(), 2);
  ExpectSame(VaeParams(*c), CheckpointShapes(kRef + "/vae/diffusion_pytorch_model.safetensors"));
}

TEST_F(RefdataTest, ClipManifestMatchesCheckpoint) {
  auto c = ParseClipTextConfig(Slurp(kRef + "/text_encoder/config.json"), "text_encoder/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->hidden_act, Activation::kQuickGelu);
  ExpectSame(ClipTextParams(*c), CheckpointShapes(kRef + "/text_encoder/model.safetensors"));
}

TEST(ConfigTest, UnsupportedValuesNameTheKey) {
  const std::string base = R"({"_class_name":"UNet2DConditionModel","block_out_channels":[32,64],
    "down_block_types":["DownBlock2D","CrossAttnDownBlock2D"],"up_block_types":["CrossAttnUpBlock2D","UpBlock2D"],
    "attention_head_dim":8,"cross_attention_dim":32)";
  ASSERT_TRUE(ParseUNetConfig(base + "}", "u.json").ok());
  struct Case {
    std::string extra;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {R"(,"act_fn":"mish")", "u.json: 'act_fn' = \"mish\" is not supported (supported: silu)"},
           {R"(,"time_embedding_type":"fourier")", "'time_embedding_type' = \"fourier\" is not supported"},
           {R"(,"class_embed_type":"timestep")", "'class_embed_type' = \"timestep\" is not supported (only null)"},
           {R"(,"attention_head_dim":[8])", "'attention_head_dim' must be an integer or a list of 2 integers"},
           {R"(,"attention_head_dim":7)", "(heads) 7 must divide the block's 32 channels"},
           {R"(,"norm_num_groups":24)", "entry 32 is not divisible by norm_num_groups 24"},
           {R"(,"layers_per_block":"two")", "'layers_per_block' must be an integer"},
       }) {
    auto r = ParseUNetConfig(base + c.extra + "}", "u.json");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.extra;
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.extra;
  }
  EXPECT_THAT(ParseUNetConfig(R"({"block_out_channels":[32],"down_block_types":["SimpleCrossAttnDownBlock2D"],
      "up_block_types":["UpBlock2D"]})", "u.json").status().message(),
              HasSubstr("'SimpleCrossAttnDownBlock2D' is not supported"));
  EXPECT_THAT(ParseUNetConfig("{", "u.json").status().message(), HasSubstr("u.json: not valid JSON"));
  EXPECT_THAT(ParseVaeConfig(R"({"_class_name":"AutoencoderTiny"})", "v.json").status().message(),
              HasSubstr("_class_name \"AutoencoderTiny\" is not AutoencoderKL"));
  EXPECT_THAT(ParseClipTextConfig(R"({"hidden_act":"relu"})", "t.json").status().message(),
              HasSubstr("'hidden_act' = \"relu\" is not supported"));
}

}  // namespace
}  // namespace tpumesh::models
