// img2img and inpainting computed as diffusers 0.42's StableDiffusion[XL]
// Img2ImgPipeline and StableDiffusion[XL]InpaintPipeline compute them
// (tests/data/img2img, made by scripts/refdata/make_img2img_refs.py): the
// same noise fed in (the posterior samples' and the added noise), the
// latents after every loop iteration within 1e-4 relative at precision
// highest, the images within one level. Cases: img2img with PNDM, Euler,
// DPM++ 2M, LMS (begin index > 0 with its history), Heun (order 2: the run
// starts at 2 t_start) and strength 1; legacy
// inpainting (ordinary UNet) with PNDM at strength 1 and Euler at 0.8; a
// 9-channel inpainting UNet with PNDM and DPM++ 2M; SDXL img2img and
// inpainting (strength 0.9999, the SDXL inpainting pipeline's default).
// Then the checks of bad requests, and the same bits on any device count.
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/png.h"
#include "nlohmann/json.hpp"
#include "pipeline/convert.h"
#include "pipeline/generate.h"
#include "tests/testing/golden.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::pipeline {
namespace {

using mesh::Array;
using tpumesh::testing::ReadDataset;
using tpumesh::testing::ReadStringAttribute;

const std::string kData = std::string(TPUMESH_TEST_DATA_DIR) + "/img2img";
const std::string kRefs = kData + "/refs.h5";

// Each model folder converted once per test process.
std::string Converted(const std::string& name) {
  static std::map<std::string, std::string> done;
  auto it = done.find(name);
  if (it != done.end()) return it->second;
  const std::string folder =
      name == "tiny-sdxl-b" ? std::string(TPUMESH_TEST_DATA_DIR) + "/tiny-sdxl-b" : kData + "/" + name;
  const std::string out = tpumesh::testing::ProcessTempDir() + "/" + name + ".h5";
  auto st = ConvertDiffusersFolder(folder, out, mesh::DType::kF32);
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  return done[name] = out;
}

SourceImage Load(const std::string& name, PngRead mode) {
  auto im = ReadPngAs(kData + "/" + name, mode);
  EXPECT_TRUE(im.ok()) << im.status().ToString();
  return {name, im.ok() ? *im : Image{}};
}

struct Case {
  std::string model;
  GenerateRequest request;
};

Case Read(const std::string& group) {
  const auto c = nlohmann::json::parse(ReadStringAttribute(kRefs, group, "case"));
  Case out;
  out.model = c["model"];
  GenerateRequest& r = out.request;
  for (const auto& p : c["prompts"]) r.prompts.push_back(p);
  r.steps = c["steps"];
  r.strength = c["strength"].get<double>();
  r.guidance = c["guidance"].get<float>();
  r.scheduler = c["scheduler"];
  r.precision = models::Precision::kHighest;
  r.init_images = {Load(c["init"], PngRead::kRgbOnly)};
  if (!c["mask"].get<std::string>().empty()) r.masks = {Load(c["mask"], PngRead::kGrey)};
  r.initial_latents = ReadDataset(kRefs, group + "/noise");
  r.posterior_noise = ReadDataset(kRefs, group + "/posterior_noise");
  r.keep_step_latents = true;
  return out;
}

class Img2ImgParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Img2ImgParityTest, LatentsAfterEveryStepAndImages) {
  const std::string group = GetParam();
  Case c = Read(group);
  GeneratorOptions go;
  go.model = Converted(c.model);
  go.mesh.devices = 2;  // one image per device
  auto gen = Generator::Open(go);
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  auto res = (*gen)->Generate(c.request);
  ASSERT_TRUE(res.ok()) << res.status().ToString();

  const Array timesteps = ReadDataset(kRefs, group + "/timesteps");
  ASSERT_EQ(static_cast<int64_t>(res->timesteps.size()), timesteps.num_elements()) << group;
  for (int64_t i = 0; i < timesteps.num_elements(); ++i)
    EXPECT_EQ(static_cast<float>(res->timesteps[i]), timesteps.data<float>()[i]) << group << " timestep " << i;
  tpumesh::testing::ExpectEachStepWithin(res->latents_after_step, ReadDataset(kRefs, group + "/latents_after_step"),
                                         1e-4, group);
  std::vector<const std::vector<uint8_t>*> images;
  for (const Image& im : res->images) images.push_back(&im.rgb);
  tpumesh::testing::ExpectImagesWithinOneLevel(images, ReadDataset(kRefs, group + "/images"), group);
}

INSTANTIATE_TEST_SUITE_P(Diffusers, Img2ImgParityTest,
                         ::testing::Values("sd_img2img_pndm", "sd_img2img_euler", "sd_img2img_dpm", "sd_img2img_lms",
                                           "sd_img2img_heun", "sd_inpaint_legacy_heun", "sd_img2img_full", "sd_inpaint_legacy_pndm", "sd_inpaint_legacy_euler",
                                           "sd_inpaint_unet9_pndm", "sd_inpaint_unet9_dpm", "sdxl_img2img_euler",
                                           "sdxl_inpaint_euler"));

// Image i's numbers depend on its key alone: one device or four, the same
// PNG bytes (drawn noise, inpainting UNet, two init images).
TEST(Img2ImgTest, SameImagesOnAnyDeviceCount) {
  std::vector<std::string> first;
  for (int devices : {1, 4}) {
    GeneratorOptions go;
    go.model = Converted("tiny-sd-inpaint");
    go.mesh.devices = devices;
    auto gen = Generator::Open(go);
    ASSERT_TRUE(gen.ok()) << gen.status().ToString();
    GenerateRequest r;
    r.prompts = {"a red circle"};
    r.steps = 4;
    r.strength = 0.75;
    r.batch_per_device = 4 / devices;
    r.init_images = {Load("init.png", PngRead::kRgbOnly)};
    r.masks = {Load("mask.png", PngRead::kGrey)};
    auto res = (*gen)->Generate(r);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    auto files = EncodeImages("out", *res, r, "m");
    ASSERT_TRUE(files.ok());
    std::vector<std::string> bytes;
    for (const auto& f : *files) bytes.push_back(f.second);
    if (first.empty()) {
      first = bytes;
      // Recorded in the PNG parameters.
      EXPECT_NE(first[0].find("Init image: init.png, Strength: 0.75, Mask: mask.png"), std::string::npos);
    } else {
      EXPECT_EQ(bytes, first) << devices << " devices";
    }
  }
}

TEST(Img2ImgTest, BadRequestsAreOneLineBeforeAnyCompute) {
  GeneratorOptions go;
  go.model = Converted("tiny-sd");
  go.mesh.devices = 2;
  auto gen = Generator::Open(go);
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  auto base = [] {
    GenerateRequest r;
    r.prompts = {"a red circle"};
    r.steps = 4;
    r.init_images = {Load("init.png", PngRead::kRgbOnly)};
    return r;
  };
  auto expect = [&](GenerateRequest r, const std::string& needle) {
    const Status st = (*gen)->Validate(r);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << needle << ": " << st.ToString();
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  };
  for (double s : {0.0, -0.5, 1.5}) {
    GenerateRequest r = base();
    r.strength = s;
    expect(r, "must be in (0, 1]");
  }
  {
    GenerateRequest r = base();
    r.init_images.clear();
    r.strength = 0.5;
    expect(r, "--strength needs --init-image");
  }
  {
    GenerateRequest r = base();
    r.init_images.clear();
    r.masks = {Load("mask.png", PngRead::kGrey)};
    expect(r, "--mask needs --init-image");
  }
  {
    GenerateRequest r = base();
    r.masks = {Load("mask_sdxl.png", PngRead::kGrey)};
    expect(r, "a mask must match its image");
  }
  {
    GenerateRequest r = base();
    r.init_images.push_back(Load("init_sdxl.png", PngRead::kRgbOnly));
    expect(r, "the init images must have one size");
  }
  {
    GenerateRequest r = base();
    r.init_images = {r.init_images[0], r.init_images[0], r.init_images[0]};
    expect(r, "3 --init-image files for a batch of 2 images");
  }
  {
    GenerateRequest r = base();
    r.height = 64;
    expect(r, "resize the image");
  }
  {
    // int(4 * 0.1) = 0 steps: diffusers refuses it too.
    GenerateRequest r = base();
    r.strength = 0.1;
    auto res = (*gen)->Generate(r);
    EXPECT_EQ(res.status().code(), StatusCode::kInvalidArgument) << res.status().ToString();
    EXPECT_NE(res.status().message().find("runs no step"), std::string::npos) << res.status().message();
  }
  // An inpainting model without a mask or without an image.
  GeneratorOptions gi = go;
  gi.model = Converted("tiny-sd-inpaint");
  auto inpaint = Generator::Open(gi);
  ASSERT_TRUE(inpaint.ok()) << inpaint.status().ToString();
  GenerateRequest r = base();
  EXPECT_NE((*inpaint)->Validate(r).message().find("needs a --mask"), std::string::npos);
  r.init_images.clear();
  EXPECT_NE((*inpaint)->Validate(r).message().find("this is an inpainting model"), std::string::npos);
}

// Masks as PIL's convert("L") reads them: grey, RGB (luma, rounded), alpha
// ignored; 16-bit refused.
TEST(Img2ImgTest, MaskPngsReadAsGreyLevels) {
  const std::string dir = tpumesh::testing::TestTempDir();
  Image rgb{1, 3, {255, 0, 0, 0, 255, 0, 10, 20, 200}};
  ASSERT_TRUE(WritePngAtomic(dir + "/m.png", rgb, {}).ok());
  auto grey = ReadPngAs(dir + "/m.png", PngRead::kGrey);
  ASSERT_TRUE(grey.ok()) << grey.status().ToString();
  // Pillow: (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16.
  const uint8_t want[3] = {76, 150, 38};
  for (int p = 0; p < 3; ++p)
    for (int ch = 0; ch < 3; ++ch) EXPECT_EQ(grey->rgb[p * 3 + ch], want[p]) << p;
  // The RGB reader refuses what is not RGB; the grey reader takes the file
  // the pipeline's mask.png is (RGB here) and the init image.
  EXPECT_TRUE(ReadPngAs(kData + "/mask.png", PngRead::kGrey).ok());
}

}  // namespace
}  // namespace tpumesh::pipeline
