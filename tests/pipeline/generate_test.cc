// pipeline/generate.h: parity with diffusers' StableDiffusionPipeline on the
// tiny-sd-a reference, the same image bits on any device count, the PRNG
// flow, the plan cache and the request checks.
#include "pipeline/generate.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/h5io.h"
#include "io/model_file.h"
#include "mesh/prng.h"
#include "pipeline/convert.h"
#include "pipeline/init_model.h"
#include "tests/testing/golden.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::HasSubstr;
using tpumesh::testing::ReadDataset;

const std::string kRef = tpumesh::testing::RefdataDir() + "/tiny-sd-a";

std::unique_ptr<Generator> OpenDefault(int devices) {
  GeneratorOptions o;
  o.mesh.devices = devices;
  auto g = Generator::Open(o);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(g).value() : nullptr;
}

GenerateRequest Small(int steps = 2) {
  GenerateRequest r;
  r.prompts = {"a photograph of an astronaut riding a horse"};
  r.steps = steps;
  r.seed = 7;
  return r;
}

// The pipelines stored in golden.h5 (StableDiffusionPipeline.__call__ with
// latents passed in), re-run from their initial latents.
class GoldenPipelineTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenPipelineTest, LatentsAfterEveryStepAndImagesMatchDiffusers) {
  if (!tpumesh::testing::Exists(kRef + "/golden.h5")) GTEST_SKIP() << "reference data absent: " << kRef;
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string model = dir + "/tiny-sd-a.h5";
  ASSERT_TRUE(ConvertDiffusersFolder(kRef, model, mesh::DType::kF32).ok());
  const std::string golden = kRef + "/golden.h5";
  const std::string group = "pipeline_" + GetParam();

  GeneratorOptions o;
  o.model = model;
  o.mesh.devices = 2;
  auto gen = Generator::Open(o);
  ASSERT_TRUE(gen.ok()) << gen.status().message();

  GenerateRequest r;
  auto prompts = H5ReadStrings(golden, "tokenizer/prompts");
  ASSERT_TRUE(prompts.ok());
  r.prompts = {(*prompts)[0], (*prompts)[3]};  // PIPE_PROMPTS (refdata README)
  r.negative_prompts = {"blurry, low quality, watermark", ""};
  r.steps = 4;
  r.guidance = 7.5f;
  r.height = r.width = 64;
  r.scheduler = GetParam();
  r.precision = models::Precision::kHighest;
  r.initial_latents = ReadDataset(golden, group + "/init_latents");
  r.keep_step_latents = true;
  auto res = (*gen)->Generate(r);
  ASSERT_TRUE(res.ok()) << res.status().message();

  tpumesh::testing::ExpectEachStepWithin(res->latents_after_step, ReadDataset(golden, group + "/latents_after_step"),
                                         1e-4, GetParam());
  // Final images: uint8 within one level on >= 99.9% of values.
  std::vector<const std::vector<uint8_t>*> images;
  for (const Image& im : res->images) images.push_back(&im.rgb);
  tpumesh::testing::ExpectImagesWithinOneLevel(images, ReadDataset(golden, group + "/images_uint8"), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Schedulers, GoldenPipelineTest, ::testing::Values("pndm", "ddim", "euler"));

// Image i is the same bits on 1, 2, 4 or 8 devices, with 1 or 2 images per
// device, and a second call of the same shapes reuses the plan.
TEST(GenerateTest, SameImagesOnEveryDeviceCount) {
  std::vector<Image> first;
  for (auto [devices, per_device] : std::vector<std::pair<int, int>>{{8, 1}, {1, 8}, {2, 4}, {4, 2}}) {
    auto gen = OpenDefault(devices);
    ASSERT_NE(gen, nullptr);
    GenerateRequest r = Small();
    r.batch_per_device = per_device;
    r.scheduler = "euler_a";  // draws noise every step, per image
    auto res = gen->Generate(r);
    ASSERT_TRUE(res.ok()) << res.status().message();
    ASSERT_EQ(res->images.size(), 8u);
    if (first.empty()) {
      first = res->images;
      // Eight different images.
      EXPECT_NE(first[0].rgb, first[1].rgb);
      continue;
    }
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(res->images[i].rgb, first[i].rgb) << "image " << i << " on " << devices << " devices";
  }
}

// Every scheduler runs through the pipeline, and the thread count of the
// device arenas changes no bit.
TEST(GenerateTest, EverySchedulerAndThreadCountGivesTheSameBits) {
  for (const std::string& name : SchedulerNames()) {
    if (name == kFlowScheduler) continue;  // Flux's (Validate refuses it for SD)
    std::vector<uint8_t> first;
    for (int threads : {1, 2}) {
      GeneratorOptions o;
      o.mesh.devices = 1;
      o.mesh.threads_per_device = threads;
      auto gen = Generator::Open(o);
      ASSERT_TRUE(gen.ok());
      GenerateRequest r = Small(3);
      r.scheduler = name;
      auto res = (*gen)->Generate(r);
      ASSERT_TRUE(res.ok()) << name << ": " << res.status().message();
      EXPECT_EQ(res->scheduler, name);
      if (first.empty()) {
        first = res->images[0].rgb;
      } else {
        EXPECT_EQ(res->images[0].rgb, first) << name << " with " << threads << " threads";
      }
    }
  }
}

TEST(GenerateTest, InitialLatentsAreJaxNormalOfTheSplitKeys) {
  auto gen = OpenDefault(4);
  ASSERT_NE(gen, nullptr);
  GenerateRequest r = Small(1);
  r.seed = 42;
  auto res = gen->Generate(r);
  ASSERT_TRUE(res.ok()) << res.status().message();
  const mesh::Array& l = res->initial_latents;  // [4, 4, h, w]
  ASSERT_EQ(l.rank(), 4);
  const auto keys = mesh::Split(mesh::KeyFromSeed(42), 4, mesh::PrngImpl::kPartitionable);
  const mesh::Shape one{1, l.dim(1), l.dim(2), l.dim(3)};
  std::vector<float> want(mesh::NumElements(one));
  for (int i = 0; i < 4; ++i) {
    mesh::Normal(keys[i], mesh::PrngImpl::kPartitionable, one, want.data());
    EXPECT_EQ(0, std::memcmp(want.data(), l.data<float>() + i * want.size(), want.size() * sizeof(float)))
        << "image " << i;
  }
}

TEST(GenerateTest, SecondCallReusesThePlanAndGivesTheSameImages) {
  auto gen = OpenDefault(2);
  ASSERT_NE(gen, nullptr);
  auto a = gen->Generate(Small());
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(a->compiled);
  auto b = gen->Generate(Small());
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->compiled);
  EXPECT_EQ(b->compile_seconds, 0);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(a->images[i].rgb, b->images[i].rgb);
  GenerateRequest other = Small(3);  // new static shapes: a new plan
  auto c = gen->Generate(other);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->compiled);
}

// release_packed_weights (what the CLI sets): the same images, calls at the
// first call's precision keep working, another precision is refused before
// any compute.
TEST(GenerateTest, ReleasedWeightsGiveTheSameImagesAndFixThePrecision) {
  auto keep = OpenDefault(2);
  ASSERT_NE(keep, nullptr);
  GeneratorOptions o;
  o.mesh.devices = 2;
  o.release_packed_weights = true;
  auto release = Generator::Open(o);
  ASSERT_TRUE(release.ok()) << release.status().message();
  GenerateRequest r = Small();
  r.precision = models::Precision::kDefault;
  auto a = keep->Generate(r);
  auto b = (*release)->Generate(r);
  auto c = (*release)->Generate(r);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(a->images[i].rgb, b->images[i].rgb);
    EXPECT_EQ(a->images[i].rgb, c->images[i].rgb);
  }
  r.precision = models::Precision::kHighest;
  auto d = (*release)->Generate(r);
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("packed its weights at precision default"));
}

// GenerateRequest::last_use (the CLI's last run): the same images as a
// generator that keeps its models (4 devices on this host's cores: the
// devices wait for each other between the phases), the text encoders' and
// the UNet's packs given back and the VAE's kept, the modelled HBM of the
// parameters unchanged, and a later call refused before any compute.
TEST(GenerateTest, LastUseGivesModelsBackWithTheSameImages) {
  for (const std::string axes : {"data=4", "data=2,model=2"}) {
    SCOPED_TRACE(axes);
    GeneratorOptions o;
    o.mesh.devices = 4;
    o.mesh.axes = axes;
    o.release_packed_weights = true;
    auto keep = Generator::Open(o);
    auto give = Generator::Open(o);
    ASSERT_TRUE(keep.ok() && give.ok()) << give.status().message();
    GenerateRequest r = Small();
    r.prompts = {"a red circle", "a blue square", "a green triangle", "a red square"};
    const int images = (*keep)->data_size();
    r.prompts.resize(images);
    auto a = (*keep)->Generate(r);
    ASSERT_TRUE(a.ok()) << a.status().message();
    r.last_use = true;
    auto b = (*give)->Generate(r);
    ASSERT_TRUE(b.ok()) << b.status().message();
    ASSERT_EQ(a->images.size(), static_cast<size_t>(images));
    for (int i = 0; i < images; ++i) EXPECT_EQ(a->images[i].rgb, b->images[i].rgb) << "image " << i;
    EXPECT_EQ(a->report.param_bytes, b->report.param_bytes);
    for (int d = 0; d < 4; ++d) EXPECT_EQ((*give)->mesh().device(d).hbm_in_use(), (*keep)->mesh().device(d).hbm_in_use());
    for (const ComponentParams& c : (*give)->flow().components()) {
      const size_t packed = (*c.ranks)[0].packs()->bytes();
      if (c.name == "vae") {
        EXPECT_GT(packed, 0u);
      } else {
        EXPECT_EQ(packed, 0u) << c.name;
      }
    }
    auto c = (*give)->Generate(r);
    EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("open the model again"));
  }
}

TEST(GenerateTest, BadRequestsAreRefusedBeforeAnyCompute) {
  auto gen = OpenDefault(2);
  ASSERT_NE(gen, nullptr);
  struct Case {
    std::function<void(GenerateRequest&)> edit;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {[](GenerateRequest& r) { r.prompts = {"a", "b", "c"}; }, "3 prompts for a batch of 2 images"},
           {[](GenerateRequest& r) { r.prompts.clear(); }, "no prompt"},
           {[](GenerateRequest& r) { r.negative_prompts = {"x", "y"}; }, "2 negative prompts for 1 prompts"},
           {[](GenerateRequest& r) { r.steps = 0; }, "--steps must be >= 1"},
           {[](GenerateRequest& r) { r.height = 62; }, "--height 62 is not a multiple of 4"},
           {[](GenerateRequest& r) { r.width = 66; }, "--width 66 is not a multiple of 4"},
           {[](GenerateRequest& r) { r.scheduler = "kdpm2"; }, "unknown scheduler 'kdpm2'"},
           {[](GenerateRequest& r) { r.batch_per_device = 0; }, "--batch-per-device must be >= 1"},
           {[](GenerateRequest& r) { r.initial_latents = mesh::Array::Host(mesh::DType::kF32, {2, 4, 8, 8}); },
            "--latents"},
       }) {
    GenerateRequest r = Small();
    c.edit(r);
    auto res = gen->Generate(r);
    ASSERT_FALSE(res.ok()) << c.message;
    EXPECT_THAT(res.status().message(), HasSubstr(c.message));
  }
  EXPECT_EQ(gen->mesh().device(0).hbm_in_use(), 0) << "a refused request touched the devices";
}

// A device whose HBM holds the parameters but not the run's activations is
// refused at plan time, by the dry run, before any compute: ResourceExhausted
// naming the device; with room, the same request runs and its report's HBM
// peak is what the dry run needed.
TEST(GenerateTest, DeviceOutOfHbmIsRefusedBeforeCompute) {
  auto gen = OpenDefault(2);
  ASSERT_NE(gen, nullptr);
  int64_t params = 0;
  for (const ComponentParams& c : gen->flow().components()) params += (*c.ranks)[0].bytes();
  for (int d = 0; d < 2; ++d) gen->mesh().device(d).set_hbm_capacity(params + (64 << 10));
  bool computed = false;
  auto progress = [&](const std::string& phase, int done, int) { computed |= phase == "denoise" && done > 0; };
  auto res = gen->Generate(Small(), progress);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(res.status().message(), HasSubstr("device 0"));
  EXPECT_THAT(res.status().message(), HasSubstr("out of HBM"));
  EXPECT_FALSE(computed);

  for (int d = 0; d < 2; ++d) gen->mesh().device(d).set_hbm_capacity(int64_t{16} << 30);
  auto ok = gen->Generate(Small(), progress);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->report.hbm_peak_bytes.size(), 2u);
  EXPECT_GT(ok->report.hbm_peak_bytes[0], params + (64 << 10));
  EXPECT_EQ(ok->report.hbm_peak_bytes[0], ok->report.hbm_peak_bytes[1]);
}

TEST(GenerateTest, CancelStopsWithCancelled) {
  auto gen = OpenDefault(2);
  ASSERT_NE(gen, nullptr);
  std::atomic<bool> cancel{true};
  auto res = gen->Generate(Small(), {}, &cancel);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kCancelled);
}

TEST(GenerateTest, AModelWithoutAVaeIsOneClearError) {
  const std::string path = tpumesh::testing::TestTempDir() + "/no-vae.h5";
  {
    // Copy the tiny architecture's text encoder, tokenizer and UNet only.
    InitOptions init;
    init.output = tpumesh::testing::TestTempDir() + "/tiny.h5";
    ASSERT_TRUE(InitModel(init).ok());
    auto in = ModelFile::Open(init.output);
    ASSERT_TRUE(in.ok());
    auto out = ModelFileWriter::Create(path);
    ASSERT_TRUE(out.ok());
    for (const char* text : {"tokenizer/vocab.json", "tokenizer/merges.txt", "text_encoder/config.json",
                             "unet/config.json", "scheduler/scheduler_config.json"}) {
      auto t = (*in)->ReadText(text);
      ASSERT_TRUE(t.ok()) << text;
      ASSERT_TRUE((*out)->WriteText(text, *t).ok());
    }
    for (const char* comp : {"text_encoder", "unet"}) {
      auto names = (*in)->TensorNames(comp);
      ASSERT_TRUE(names.ok());
      for (const std::string& n : *names) {
        auto a = (*in)->ReadTensor(comp, n, mesh::DType::kF32);
        ASSERT_TRUE(a.ok());
        ASSERT_TRUE((*out)->WriteTensor(comp, n, *a, mesh::DType::kF32).ok());
      }
    }
    ASSERT_TRUE((*out)->Commit().ok());
  }
  GeneratorOptions o;
  o.model = path;
  o.mesh.devices = 1;
  auto gen = Generator::Open(o);
  ASSERT_FALSE(gen.ok());
  EXPECT_THAT(gen.status().message(), HasSubstr("the model has no vae"));
}

TEST(GenerateTest, WriteImagesWritesEveryImageAndAGrid) {
  auto gen = OpenDefault(8);
  ASSERT_NE(gen, nullptr);
  GenerateRequest r = Small(1);
  auto res = gen->Generate(r);
  ASSERT_TRUE(res.ok());
  const std::string dir = tpumesh::testing::TestTempDir() + "/out";
  auto written = WriteImages(dir, *res, r, gen->model_name());
  ASSERT_TRUE(written.ok()) << written.status().message();
  ASSERT_EQ(written->size(), 9u);
  std::vector<std::pair<std::string, std::string>> text;
  auto img = ReadPng(dir + "/image_03.png", &text);
  ASSERT_TRUE(img.ok()) << img.status().message();
  EXPECT_EQ(img->rgb, res->images[3].rgb);
  ASSERT_EQ(text.size(), 1u);
  EXPECT_EQ(text[0].first, "parameters");
  EXPECT_THAT(text[0].second, HasSubstr("a photograph of an astronaut riding a horse"));
  EXPECT_THAT(text[0].second, HasSubstr("Seed: 7"));
  EXPECT_THAT(text[0].second, HasSubstr("Image: 3 of 8"));
  auto grid = ReadPng(dir + "/grid.png");
  ASSERT_TRUE(grid.ok());
  EXPECT_EQ(grid->height, 2 * res->height);  // 2 x 4, as the seed's make_image_grid
  EXPECT_EQ(grid->width, 4 * res->width);
}

}  // namespace
}  // namespace tpumesh::pipeline
