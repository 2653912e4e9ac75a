// The built-in configs parse and give the published parameter counts.
#include "models/architectures.h"

#include "gtest/gtest.h"
#include "models/configs.h"

namespace tpumesh::models {
namespace {

struct Counts {
  int64_t text_encoder, text_encoder_2, unet, vae;
};

Counts Count(const std::string& name) {
  auto a = BuiltinArchitecture(name);
  EXPECT_TRUE(a.ok());
  Counts c{};
  auto te = ParseClipTextConfig(a->text_encoder, name + "/text_encoder");
  EXPECT_TRUE(te.ok()) << te.status().ToString();
  c.text_encoder = CountParameters(ClipTextParams(*te));
  if (!a->text_encoder_2.empty()) {
    auto te2 = ParseClipTextConfig(a->text_encoder_2, name + "/text_encoder_2");
    EXPECT_TRUE(te2.ok()) << te2.status().ToString();
    c.text_encoder_2 = CountParameters(ClipTextParams(*te2));
  }
  auto u = ParseUNetConfig(a->unet, name + "/unet");
  EXPECT_TRUE(u.ok()) << u.status().ToString();
  c.unet = CountParameters(UNetParams(*u));
  auto v = ParseVaeConfig(a->vae, name + "/vae");
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  c.vae = CountParameters(VaeParams(*v));
  return c;
}

// Published counts (sum of the diffusers / transformers modules' parameters).
TEST(ArchitecturesTest, Sd15) {
  Counts c = Count("sd15");
  EXPECT_EQ(c.unet, 859520964);
  EXPECT_EQ(c.vae, 83653863);
  EXPECT_EQ(c.text_encoder, 123060480);
}

TEST(ArchitecturesTest, Sd21) {
  Counts c = Count("sd21");
  EXPECT_EQ(c.unet, 865910724);
  EXPECT_EQ(c.vae, 83653863);
  EXPECT_EQ(c.text_encoder, 340387840);
}

TEST(ArchitecturesTest, Sdxl) {
  Counts c = Count("sdxl");
  EXPECT_EQ(c.unet, 2567463684);
  EXPECT_EQ(c.vae, 83653863);
  EXPECT_EQ(c.text_encoder, 123060480);
  EXPECT_EQ(c.text_encoder_2, 694659840);
}

TEST(ArchitecturesTest, TinyAndUnknown) {
  Counts c = Count("tiny");
  EXPECT_GT(c.unet, 0);
  EXPECT_EQ(BuiltinArchitecture("sd3").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpumesh::models
