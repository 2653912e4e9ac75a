// pipeline/png.h: diffusers' uint8 conversion against the reference, PNG
// round trips with text, deterministic bytes, the image grid, errors.
#include "pipeline/png.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/golden.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::HasSubstr;

Image Pattern(int h, int w, int seed) {
  Image img{h, w, std::vector<uint8_t>(static_cast<size_t>(h) * w * 3)};
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>(i * 7 + seed * 31);
  return img;
}

// numpy_to_pil((decoded / 2 + 0.5).clamp(0, 1)) as diffusers computed it.
TEST(PngTest, Uint8ConversionEqualsDiffusersOnEveryPixel) {
  const std::string golden = tpumesh::testing::RefdataDir() + "/tiny-sd-a/golden.h5";
  if (!tpumesh::testing::Exists(golden)) GTEST_SKIP() << "reference data absent: " << golden;
  for (const std::string group : {"vae_decode", "pipeline_pndm", "pipeline_euler"}) {
    const mesh::Array decoded = tpumesh::testing::ReadDataset(golden, group + "/decoded");  // [2,3,64,64]
    const mesh::Array want =
        tpumesh::testing::ReadDataset(golden, group + (group == "vae_decode" ? "/image_uint8" : "/images_uint8"));
    ASSERT_EQ(decoded.rank(), 4) << group;
    const int h = static_cast<int>(decoded.dim(2)), w = static_cast<int>(decoded.dim(3));
    for (int i = 0; i < decoded.dim(0); ++i) {
      const Image img = ToUint8Image(decoded.data<float>() + i * 3 * h * w, h, w);
      for (size_t j = 0; j < img.rgb.size(); ++j)
        ASSERT_EQ(img.rgb[j], want.data<int32_t>()[i * img.rgb.size() + j])
            << group << " image " << i << " value " << j << " from " << decoded.data<float>()[i * 3 * h * w];
    }
  }
}

TEST(PngTest, RoundingIsHalfToEvenAndClamps) {
  // x = 2 (v - 0.5) with v * 255 = 0.5, 1.5, 2.5; then -5, +5 and NaN.
  const float vals[6] = {2 * (0.5f / 255 - 0.5f), 2 * (1.5f / 255 - 0.5f), 2 * (2.5f / 255 - 0.5f), -5.f, 5.f,
                         std::nanf("")};
  std::vector<float> chw(3 * 6);
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 6; ++i) chw[c * 6 + i] = vals[i];
  const Image img = ToUint8Image(chw.data(), 1, 6);
  for (int i = 0; i < 6; ++i) {
    const float v = std::min(std::max(vals[i] / 2.0f + 0.5f, 0.0f), 1.0f);
    const int want = std::isnan(vals[i]) ? 0 : static_cast<int>(std::nearbyint(v * 255.0f));
    EXPECT_EQ(img.rgb[i * 3], want) << i;
  }
  EXPECT_EQ(img.rgb[3 * 3], 0);
  EXPECT_EQ(img.rgb[4 * 3], 255);
  EXPECT_EQ(img.rgb[5 * 3], 0);
}

TEST(PngTest, RoundTripWithTextAndDeterministicBytes) {
  const std::string path = tpumesh::testing::TestTempDir() + "/rt.png";
  const Image img = Pattern(5, 7, 1);
  const TextChunks text = {{"parameters", "a café at night\nSteps: 50"}, {"Software", "tpumesh"}};
  ASSERT_TRUE(WritePngAtomic(path, img, text).ok());
  TextChunks got_text;
  auto got = ReadPng(path, &got_text);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->height, 5);
  EXPECT_EQ(got->width, 7);
  EXPECT_EQ(got->rgb, img.rgb);
  EXPECT_EQ(got_text, text);
  auto a = EncodePng(img, text), b = EncodePng(img, text);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(a->compare(1, 3, "PNG"), 0);
}

TEST(PngTest, GridPlacesImageIAtRowIOverColsColumnIModCols) {
  std::vector<Image> images;
  for (int i = 0; i < 8; ++i) images.push_back(Pattern(3, 4, i));
  auto grid = MakeImageGrid(images, 2, 4);
  ASSERT_TRUE(grid.ok());
  EXPECT_EQ(grid->height, 6);
  EXPECT_EQ(grid->width, 16);
  for (int i = 0; i < 8; ++i)
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 4; ++x)
        for (int c = 0; c < 3; ++c)
          ASSERT_EQ(grid->rgb[(((i / 4) * 3 + y) * 16 + (i % 4) * 4 + x) * 3 + c], images[i].rgb[(y * 4 + x) * 3 + c])
              << "image " << i << " y " << y << " x " << x;
}

TEST(PngTest, GridShapes) {
  const std::vector<std::pair<int, std::pair<int, int>>> cases = {
      {1, {1, 1}}, {2, {1, 2}}, {3, {1, 3}}, {4, {2, 2}}, {6, {2, 3}}, {8, {2, 4}}, {16, {4, 4}}};
  for (const auto& [n, want] : cases) EXPECT_EQ(GridShape(n), want) << n;
}

TEST(PngTest, ErrorsNameTheProblemAndLeaveNoFile) {
  std::vector<Image> mixed = {Pattern(2, 2, 0), Pattern(3, 2, 0)};
  EXPECT_THAT(MakeImageGrid(mixed, 1, 2).status().message(), HasSubstr("different sizes"));
  EXPECT_THAT(MakeImageGrid(mixed, 2, 2).status().message(), HasSubstr("2x2 for 2 images"));
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string missing = dir + "/no-such-dir/x.png";
  Status s = WritePngAtomic(missing, Pattern(2, 2, 0), {});
  EXPECT_THAT(s.message(), HasSubstr("cannot write " + missing));
  EXPECT_FALSE(std::filesystem::exists(missing));
  // A directory where the file should go: the rename fails, no temp is left.
  std::filesystem::create_directories(dir + "/taken.png");
  EXPECT_FALSE(WritePngAtomic(dir + "/taken.png", Pattern(2, 2, 0), {}).ok());
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_THAT(e.path().filename().string(), ::testing::Not(HasSubstr(".tmp"))) << "left behind";
  EXPECT_THAT(EncodePng(Pattern(2, 2, 0), {{"", "x"}}).status().message(), HasSubstr("keyword"));
  Image bad = Pattern(2, 2, 0);
  bad.rgb.pop_back();
  EXPECT_FALSE(EncodePng(bad, {}).ok());
  std::ofstream(dir + "/not.png") << "hello";
  EXPECT_THAT(ReadPng(dir + "/not.png").status().message(), HasSubstr("not a PNG"));
}

}  // namespace
}  // namespace tpumesh::pipeline
