// pipeline/request_text.h: a request as flags or the Python module give it,
// parsed once, each error naming the flag as the CLI spells it.
#include "pipeline/request_text.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::HasSubstr;

TEST(RequestTextTest, ParsesTheFlagsIntoTheRequest) {
  RequestFlags f;
  f.request.steps = 3;
  f.guidance = 6.5f;
  f.precision = "highest";
  f.scheduler_opts = {"prediction_type=v_prediction"};
  f.original_size = "1024,768";        // W,H
  f.crops_coords_top_left = "16,8";    // X,Y
  auto r = ParseRequestFlags(f);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->steps, 3);
  EXPECT_EQ(r->guidance, 6.5f);
  ASSERT_EQ(r->scheduler_overrides.size(), 1u);
  EXPECT_EQ(r->scheduler_overrides[0].first, "prediction_type");
  EXPECT_EQ(r->scheduler_overrides[0].second, "v_prediction");
  EXPECT_EQ(r->sizes.original_size[0], 768);  // diffusers' (h, w)
  EXPECT_EQ(r->sizes.original_size[1], 1024);
  EXPECT_EQ(r->sizes.crops_coords_top_left[0], 8);  // (top, left)
  EXPECT_EQ(r->sizes.crops_coords_top_left[1], 16);
}

TEST(RequestTextTest, ErrorsNameTheFlag) {
  RequestFlags f;
  f.guidance = 1001;
  EXPECT_THAT(ParseRequestFlags(f).status().message(), HasSubstr("--guidance must be a finite number, " + GuidanceRange()));
  f.guidance.reset();
  f.scheduler_opts = {"=x"};
  EXPECT_THAT(ParseRequestFlags(f).status().message(), HasSubstr("--scheduler-opt '=x': expected KEY=VALUE"));
  f.scheduler_opts.clear();
  f.target_size = "0,5";
  EXPECT_THAT(ParseRequestFlags(f).status().message(), HasSubstr("--target-size '0,5': expected W,H"));
  ImageInputFlags images;
  images.init_images = {"/no/such/image.png"};
  GenerateRequest r;
  EXPECT_THAT(ReadImageInputs(images, &r).message(), HasSubstr("--init-image"));
}

TEST(RequestTextTest, SeedsAreWholeNumbersUpTo2To64) {
  EXPECT_EQ(*ParseSeed("0"), 0u);
  EXPECT_EQ(*ParseSeed("18446744073709551615"), 18446744073709551615ull);
  for (const char* bad : {"", "-1", "18446744073709551616", "1e3", " 1"})
    EXPECT_THAT(ParseSeed(bad).status().message(), HasSubstr("--seed")) << bad;
}

TEST(RequestTextTest, LorasAreParsedInOrder) {
  auto specs = ParseLoraFlags({"/no/such/a.safetensors:0.5", "/no/such/b.safetensors"});
  ASSERT_TRUE(specs.ok()) << specs.status().message();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].path, "/no/such/a.safetensors");
  EXPECT_EQ((*specs)[0].scale, 0.5);
  EXPECT_EQ((*specs)[1].scale, 1.0);
  EXPECT_FALSE(ParseLoraFlags({"a.safetensors:x"}).ok());
}

}  // namespace
}  // namespace tpumesh::pipeline
