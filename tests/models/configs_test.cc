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
           {R"(,"act_fn":"mish")", "u.json: 'act_fn' = 'mish' is not supported (supported: silu)"},
           {R"(,"time_embedding_type":"fourier")", "'time_embedding_type' = 'fourier' is not supported"},
           {R"(,"class_embed_type":"timestep")", "'class_embed_type' = 'timestep' is not supported (only null)"},
           {R"(,"num_attention_heads":[8])", "'num_attention_heads' must be an integer or a list of 2 integers"},
           {R"(,"num_attention_heads":7)", "(heads) 7 must divide the block's 32 channels"},
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
              HasSubstr("_class_name 'AutoencoderTiny' is not AutoencoderKL"));
  EXPECT_THAT(ParseClipTextConfig(R"({"hidden_act":"relu"})", "t.json").status().message(),
              HasSubstr("'hidden_act' = 'relu' is not supported"));
}

// Every number that sizes a layer has a range, and a value outside it names
// the file, the key and the range; before, a VAE's norm_num_groups 0 divided
// by zero, a count of 2^24 layers built a manifest of hundreds of millions
// of entries, and a kernel of 2^24 overflowed the parameter count.
TEST(ConfigTest, EveryShapingFieldHasARange) {
  const nlohmann::json unet = nlohmann::json::parse(R"({"_class_name":"UNet2DConditionModel",
    "block_out_channels":[32,64],"down_block_types":["DownBlock2D","CrossAttnDownBlock2D"],
    "up_block_types":["CrossAttnUpBlock2D","UpBlock2D"],"attention_head_dim":8,"cross_attention_dim":32})");
  const nlohmann::json vae = nlohmann::json::parse(R"({"_class_name":"AutoencoderKL","block_out_channels":[32,64]})");
  const nlohmann::json clip = nlohmann::json::parse(R"({"hidden_size":32,"num_attention_heads":4})");
  ASSERT_TRUE(ParseUNetConfig(unet.dump(), "unet/config.json").ok());
  ASSERT_TRUE(ParseVaeConfig(vae.dump(), "vae/config.json").ok());
  ASSERT_TRUE(ParseClipTextConfig(clip.dump(), "text_encoder/config.json").ok());
  struct Case {
    const char* file;
    nlohmann::json patch;
    std::string message;
  };
  const std::string n24 = "16777216";
  for (const Case& c : std::vector<Case>{
           {"unet", {{"sample_size", -8}}, "unet/config.json: 'sample_size' is -8, must be from 1 to 16384"},
           {"unet", {{"sample_size", 1 << 24}}, "'sample_size' is 16777216, must be from 1 to 16384"},
           {"unet", {{"in_channels", 0}}, "'in_channels' is 0, must be from 1 to " + n24},
           {"unet", {{"out_channels", 1 << 25}}, "'out_channels' is 33554432, must be from 1 to " + n24},
           {"unet", {{"layers_per_block", 1 << 24}}, "'layers_per_block' is 16777216, must be from 1 to 1024"},
           {"unet", {{"transformer_layers_per_block", {1, 5000}}}, "'transformer_layers_per_block' entry 1 is 5000"},
           {"unet", {{"cross_attention_dim", {32, 0}}}, "'cross_attention_dim' entry 1 is 0, must be from 1"},
           {"unet", {{"attention_head_dim", -1}}, "'attention_head_dim' entry 0 is -1, must be from 1"},
           {"unet", {{"norm_num_groups", 0}}, "'norm_num_groups' is 0, must be from 1"},
           {"unet", {{"time_embedding_dim", -4}}, "'time_embedding_dim' is -4, must be from 0 to " + n24},
           {"unet", {{"conv_in_kernel", 1 << 24}}, "'conv_in_kernel' is 16777216, must be from 1 to 31"},
           {"unet", {{"conv_out_kernel", -3}}, "'conv_out_kernel' is -3, must be from 1 to 31"},
           {"unet", {{"downsample_padding", -1}}, "'downsample_padding' is -1, must be from 0 to 31"},
           {"unet", {{"norm_eps", 0}}, "'norm_eps' must be above 0"},
           {"unet",
            {{"block_out_channels", std::vector<int>(17, 32)},
             {"down_block_types", std::vector<std::string>(17, "DownBlock2D")},
             {"up_block_types", std::vector<std::string>(17, "UpBlock2D")}},
            "'block_out_channels' has 17 entries, must have 1 to 16"},
           {"vae", {{"norm_num_groups", 0}}, "vae/config.json: 'norm_num_groups' is 0, must be from 1"},
           {"vae", {{"latent_channels", 0}}, "'latent_channels' is 0, must be from 1 to " + n24},
           {"vae", {{"in_channels", -3}}, "'in_channels' is -3, must be from 1"},
           {"vae", {{"out_channels", 0}}, "'out_channels' is 0, must be from 1"},
           {"vae", {{"layers_per_block", 2000}}, "'layers_per_block' is 2000, must be from 1 to 1024"},
           {"vae", {{"sample_size", 0}}, "'sample_size' is 0, must be from 1 to " + n24},
           {"text_encoder", {{"num_hidden_layers", 1 << 24}}, "'num_hidden_layers' is 16777216, must be from 1 to 1024"},
           {"text_encoder", {{"vocab_size", 0}}, "text_encoder/config.json: 'vocab_size' is 0, must be from 1"},
           {"text_encoder", {{"layer_norm_eps", -1}}, "'layer_norm_eps' must be above 0"},
           {"text_encoder", {{"architectures", {"CLIPTextModelWithProjection"}}, {"projection_dim", -2}},
            "'projection_dim' must be >= 1 with a projection"},
       }) {
    const std::string origin = std::string(c.file) + "/config.json";
    nlohmann::json j = std::string(c.file) == "unet" ? unet : std::string(c.file) == "vae" ? vae : clip;
    j.merge_patch(c.patch);
    const Status st = std::string(c.file) == "unet"  ? ParseUNetConfig(j.dump(), origin).status()
                      : std::string(c.file) == "vae" ? ParseVaeConfig(j.dump(), origin).status()
                                                     : ParseClipTextConfig(j.dump(), origin).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.patch.dump();
    EXPECT_THAT(st.message(), HasSubstr(c.message)) << c.patch.dump();
  }
}

}  // namespace
}  // namespace tpumesh::models
