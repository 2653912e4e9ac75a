// `tpumesh generate --init-image/--mask/--strength` as a user runs it with the
// embedded default model: img2img and inpainting write their images with the
// inputs recorded; bad inputs are one line, a non-zero exit and nothing
// written.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/png.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using tpumesh::pipeline::Image;
using tpumesh::testing::RunTpumesh;

// A 32x32 source image made by the default model, and a mask of its size.
struct Inputs {
  std::string dir, image, mask;
};
const Inputs& MadeInputs() {
  static const Inputs in = [] {
    Inputs i;
    i.dir = tpumesh::testing::ProcessTempDir();
    auto r = RunTpumesh("generate -q -p 'a red circle on a blue background' --devices 1 --steps 10 -o " + i.dir +
                        "/src");
    EXPECT_EQ(r.code, 0) << r.err;
    i.image = i.dir + "/src/image_00.png";
    Image m{32, 32, std::vector<uint8_t>(32 * 32 * 3, 0)};
    for (int y = 8; y < 24; ++y)
      for (int x = 8; x < 24; ++x)
        for (int c = 0; c < 3; ++c) m.rgb[(y * 32 + x) * 3 + c] = 255;
    i.mask = i.dir + "/mask.png";
    EXPECT_TRUE(tpumesh::pipeline::WritePngAtomic(i.mask, m, {}).ok());
    return i;
  }();
  return in;
}

TEST(Img2ImgCliTest, Img2ImgAndInpaintingWriteTheirImages) {
  const Inputs& in = MadeInputs();
  const std::string dir = tpumesh::testing::TestTempDir();
  auto r = RunTpumesh("generate -p 'a yellow triangle on a green background' --devices 2 --steps 10 --strength 0.5 "
                      "--init-image " + in.image + " -o " + dir + "/i2i");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("10 steps = 5 UNet calls"));  // int(10 x 0.5) steps run
  tpumesh::pipeline::TextChunks text;
  ASSERT_TRUE(tpumesh::pipeline::ReadPngAs(dir + "/i2i/image_01.png", tpumesh::pipeline::PngRead::kRgbOnly, &text).ok());
  ASSERT_EQ(text.size(), 1u);
  EXPECT_THAT(text[0].second, HasSubstr("Init image: " + in.image + ", Strength: 0.5"));

  auto p = RunTpumesh("generate -p 'a white square on a blue background' --devices 2 --steps 10 --init-image " +
                      in.image + " --mask " + in.mask + " -o " + dir + "/inpaint");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_THAT(p.out, HasSubstr("10 steps = 10 UNet calls"));  // SD inpainting's strength 1.0
  text.clear();
  ASSERT_TRUE(tpumesh::pipeline::ReadPngAs(dir + "/inpaint/grid.png", tpumesh::pipeline::PngRead::kRgbOnly, &text).ok());
  EXPECT_THAT(text[0].second, HasSubstr("Strength: 1, Mask: " + in.mask));
}

// --preview-every: OUT/preview.png, replaced whole, labelled an
// approximation; a bad N is refused; a run that fails leaves no preview.
TEST(Img2ImgCliTest, PreviewEveryWritesAPreviewGrid) {
  const std::string dir = tpumesh::testing::TestTempDir();
  auto r = RunTpumesh("generate -q -p 'a red circle on a blue background' --devices 4 --steps 6 --preview-every 2 -o " +
                      dir + "/out");
  ASSERT_EQ(r.code, 0) << r.err;
  tpumesh::pipeline::TextChunks text;
  auto preview = tpumesh::pipeline::ReadPngAs(dir + "/out/preview.png", tpumesh::pipeline::PngRead::kRgbOnly, &text);
  ASSERT_TRUE(preview.ok()) << preview.status().ToString();
  EXPECT_EQ(preview->height, 64);  // the 2 x 2 grid of 32x32 images
  EXPECT_EQ(preview->width, 64);
  ASSERT_EQ(text.size(), 1u);
  EXPECT_THAT(text[0].second, HasSubstr("approximate"));
  EXPECT_THAT(text[0].second, HasSubstr("after 4 of 6 steps"));
  // Not black: the images' latents went through the map.
  int lit = 0;
  for (uint8_t v : preview->rgb) lit += v > 16;
  EXPECT_GT(lit, static_cast<int>(preview->rgb.size() / 4));

  // The preview is an output: an input of that name is refused, not overwritten.
  auto clobber = RunTpumesh("generate -p 'a red circle' --steps 4 --preview-every 2 --init-image " + dir +
                            "/out/preview.png -o " + dir + "/out");
  EXPECT_NE(clobber.code, 0);
  EXPECT_THAT(clobber.err, HasSubstr("where generate writes preview.png (an input is never overwritten)"));

  auto bad = RunTpumesh("generate -p 'a red circle' --preview-every 0 -o " + dir + "/bad");
  EXPECT_NE(bad.code, 0);
  EXPECT_THAT(bad.err, HasSubstr("--preview-every"));
  EXPECT_FALSE(fs::exists(dir + "/bad"));
}

TEST(Img2ImgCliTest, BadInputsAreOneLineAndWriteNothing) {
  const Inputs& in = MadeInputs();
  const std::string dir = tpumesh::testing::TestTempDir();
  // Another size, a text file named .png, an RGBA image (tests/data), a
  // mask of another size.
  Image big{64, 64, std::vector<uint8_t>(64 * 64 * 3, 100)};
  ASSERT_TRUE(tpumesh::pipeline::WritePngAtomic(dir + "/big.png", big, {}).ok());
  {
    std::FILE* f = std::fopen((dir + "/text.png").c_str(), "w");
    std::fputs("not a png\n", f);
    std::fclose(f);
  }
  const std::string gen = "generate -p 'a red circle' --devices 2 --steps 4 -o " + dir + "/out ";
  const struct {
    std::string args, needle;
  } cases[] = {
      {"--init-image " + dir + "/text.png", "not a PNG file"},
      {"--init-image " + std::string(TPUMESH_SOURCE_DIR) + "/tests/data/img2img/rgba.png", "convert it to 8-bit RGB"},
      {"--init-image " + dir + "/missing.png", "missing.png"},
      {"--init-image " + in.image + " --height 64", "resize the image"},
      {"--init-image " + dir + "/big.png --mask " + in.mask, "a mask must match its image"},
      {"--init-image " + in.image + " --strength 0", "must be in (0, 1]"},
      {"--init-image " + in.image + " --strength 1.5", "must be in (0, 1]"},
      {"--init-image " + in.image + " --strength 0.1", "runs no step"},
      {"--strength 0.5", "--strength needs --init-image"},
      {"--mask " + in.mask, "--mask needs --init-image"},
  };
  for (const auto& c : cases) {
    auto r = RunTpumesh(gen + c.args);
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_THAT(r.err, HasSubstr(c.needle)) << c.args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_FALSE(fs::exists(dir + "/out")) << c.args;
  }
}

}  // namespace
