// The built-in configs parse and give the published parameter counts; their
// manifests are pinned.
#include "models/architectures.h"

#include <cstdint>
#include <string>
#include <vector>

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

// FLUX.1's published counts: the transformer 11,901,408,320 (FLUX.1-dev and
// -schnell alike but the guidance embedder's 2 Linear layers, 10,229,760),
// the T5-XXL encoder 4,762,310,656 (its shared token table counted once),
// CLIP-L's text model 123,060,480, the VAE 83,819,683 (SD's with 16 latent
// channels and no quant convs).
TEST(ArchitecturesTest, Flux) {
  for (const char* name : {"flux-dev", "flux-schnell"}) {
    auto a = BuiltinArchitecture(name);
    ASSERT_TRUE(a.ok());
    EXPECT_TRUE(a->unet.empty());
    auto te = ParseClipTextConfig(a->text_encoder, "text_encoder");
    ASSERT_TRUE(te.ok()) << te.status().ToString();
    EXPECT_EQ(CountParameters(ClipTextParams(*te)), 123060480);
    auto t5 = ParseT5EncoderConfig(a->text_encoder_2, "text_encoder_2");
    ASSERT_TRUE(t5.ok()) << t5.status().ToString();
    EXPECT_EQ(CountParameters(T5EncoderParams(*t5)), 4762310656);
    auto tr = ParseFluxTransformerConfig(a->transformer, "transformer");
    ASSERT_TRUE(tr.ok()) << tr.status().ToString();
    const bool dev = std::string(name) == "flux-dev";
    EXPECT_EQ(tr->guidance_embeds, dev);
    EXPECT_EQ(CountParameters(FluxTransformerParams(*tr)), dev ? 11901408320 : 11901408320 - 10229760) << name;
    auto v = ParseVaeConfig(a->vae, "vae");
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(CountParameters(VaeParams(*v)), 83819683);
    EXPECT_FLOAT_EQ(v->shift_factor, 0.1159f);
    EXPECT_FLOAT_EQ(v->scaling_factor, 0.3611f);
  }
  auto tiny = BuiltinArchitecture("flux-tiny");
  ASSERT_TRUE(tiny.ok());
  EXPECT_TRUE(ParseFluxTransformerConfig(tiny->transformer, "transformer").ok());
  EXPECT_TRUE(ParseT5EncoderConfig(tiny->text_encoder_2, "text_encoder_2").ok());
}

TEST(ArchitecturesTest, FluxConfigErrorsNameTheKey) {
  auto bad = ParseFluxTransformerConfig(R"({"axes_dims_rope": [16, 56, 40]})", "transformer/config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'axes_dims_rope'"), std::string::npos) << bad.status().ToString();
  auto relu = ParseT5EncoderConfig(R"({"feed_forward_proj": "relu"})", "text_encoder_2/config.json");
  ASSERT_FALSE(relu.ok());
  EXPECT_NE(relu.status().message().find("'feed_forward_proj'"), std::string::npos);
}

// Every manifest entry (order, name, shape, split) pinned by a digest, so a
// change to how the blocks are declared cannot silently reorder, rename,
// reshape or resplit a parameter (the order fixes init's random draws).
uint64_t Digest(const std::vector<ParamSpec>& manifest) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  auto mix = [&](const std::string& s) {
    for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  };
  for (const ParamSpec& p : manifest) {
    mix(p.name + "|" + mesh::ShapeToString(p.shape) + "|" + std::to_string(p.split.dim) + "," +
        std::to_string(p.split.units) + "," + std::to_string(p.split.parts) + "," + std::to_string(p.split.even) +
        "," + p.split.unit + "\n");
  }
  return h;
}

TEST(ArchitecturesTest, ManifestsArePinned) {
  struct Pinned {
    const char* arch;
    const char* component;
    size_t entries;
    uint64_t digest;
  };
  for (const Pinned& want : std::vector<Pinned>{
           {"sd15", "text_encoder", 196, 0x50d01dfae5dca777ull},
           {"sd15", "unet", 686, 0x6e5fec7eb0586c5eull},
           {"sd15", "vae", 248, 0x832fd7d3ce76fa23ull},
           {"sd21", "text_encoder", 372, 0xfbdec12d87f1855bull},
           {"sd21", "unet", 686, 0xcee9f74a0559a5baull},
           {"sd21", "vae", 248, 0x832fd7d3ce76fa23ull},
           {"sdxl", "text_encoder", 196, 0x50d01dfae5dca777ull},
           {"sdxl", "text_encoder_2", 517, 0x745b5891ce5b44f3ull},
           {"sdxl", "unet", 1680, 0x10b3b987220805acull},
           {"sdxl", "vae", 248, 0x832fd7d3ce76fa23ull},
           {"tiny", "text_encoder", 84, 0x810959a017d03510ull},
           {"tiny", "unet", 304, 0xee395508f6e8d16aull},
           {"tiny", "vae", 124, 0xd6b290dcd1a3dd37ull},
       }) {
    auto a = BuiltinArchitecture(want.arch);
    ASSERT_TRUE(a.ok());
    const std::string c = want.component;
    std::vector<ParamSpec> m;
    if (c == "text_encoder" || c == "text_encoder_2")
      m = ClipTextParams(*ParseClipTextConfig(c == "text_encoder" ? a->text_encoder : a->text_encoder_2, c));
    else if (c == "unet")
      m = UNetParams(*ParseUNetConfig(a->unet, c));
    else
      m = VaeParams(*ParseVaeConfig(a->vae, c));
    EXPECT_EQ(m.size(), want.entries) << want.arch << " " << c;
    EXPECT_EQ(Digest(m), want.digest) << want.arch << " " << c;
  }
}

TEST(ArchitecturesTest, TinyAndUnknown) {
  Counts c = Count("tiny");
  EXPECT_GT(c.unet, 0);
  EXPECT_EQ(BuiltinArchitecture("sd3").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpumesh::models
