// SDXL computed as diffusers' StableDiffusionXLPipeline computes it, on two
// tiny SDXL references (tiny-sdxl-a in ../shared/refdata, tiny-sdxl-b in
// tests/data, other shapes): both tokenizers' ids, the concatenated prompt
// embeddings with and without a negative prompt (zeroed negatives under
// force_zeros_for_empty_prompt), the pooled embeddings, add_time_ids (the
// defaults and explicit original size / crop / target size), the latents
// after every step of a 4-step Euler run from the stored initial latents and
// the final uint8 images. Precision highest: 1e-4 relative, images within
// one level on >= 99.9% of values; default (bf16 operands): 5e-2. Default
// compounds over both text encoders, CFG and 4 steps: the worst step was
// 0.029 with bf16 q, k, v and 0.039 since attention's P is an MXU operand too
// (rounded to bf16, as XLA gives it to the MXU at default precision).
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "io/model_file.h"
#include "nlohmann/json.hpp"
#include "pipeline/convert.h"
#include "pipeline/generate.h"
#include "pipeline/loader.h"
#include "pipeline/simulate.h"
#include "tests/testing/golden.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::pipeline {
namespace {

using mesh::Array;
using tpumesh::testing::ReadDataset;
using tpumesh::testing::ReadStringAttribute;
using tpumesh::testing::RelativeError;

using Param = std::tuple<std::string, std::string, models::Precision>;

class SdxlPipelineTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    ref_ = tpumesh::testing::ReferenceDir(std::get<0>(GetParam()));
    golden_ = ref_ + "/golden.h5";
    group_ = std::get<1>(GetParam());
    TPUMESH_REQUIRE_REFDATA(golden_);
    model_ = tpumesh::testing::TestTempDir() + "/model.h5";
    auto st = ConvertDiffusersFolder(ref_, model_, mesh::DType::kF32);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
  }
  models::Precision precision() const { return std::get<2>(GetParam()); }
  double Tolerance() const { return precision() == models::Precision::kHighest ? 1e-4 : 5e-2; }

  // The request diffusers ran: the group's prompts, negatives, sizes.
  GenerateRequest Request() const {
    GenerateRequest r;
    const auto prompts = nlohmann::json::parse(ReadStringAttribute(golden_, group_, "prompts"));
    for (const auto& p : prompts) r.prompts.push_back(p);
    const auto neg = nlohmann::json::parse(ReadStringAttribute(golden_, group_, "negative_prompts"));
    if (neg.is_array())
      for (const auto& p : neg) r.negative_prompts.push_back(p);
    const Array images = ReadDataset(golden_, group_ + "/images_uint8");  // [B, H, W, 3]
    r.height = static_cast<int>(images.dim(1));
    r.width = static_cast<int>(images.dim(2));
    auto pair = [&](const char* name) {
      const auto j = nlohmann::json::parse(ReadStringAttribute(golden_, group_, name));
      return std::array<int, 2>{j[0].get<int>(), j[1].get<int>()};
    };
    r.sizes.original_size = pair("original_size");  // (h, w) as diffusers
    r.sizes.crops_coords_top_left = pair("crops_coords_top_left");
    r.sizes.target_size = pair("target_size");
    // Where diffusers ran on its defaults, leave ours unset too (the default
    // path: the image size, crop 0,0).
    const std::array<int, 2> hw{r.height, r.width};
    if (r.sizes.original_size == hw && r.sizes.target_size == hw &&
        r.sizes.crops_coords_top_left == std::array<int, 2>{0, 0})
      r.sizes = SizeConditioning{};
    r.steps = static_cast<int>(ReadDataset(golden_, group_ + "/timesteps").num_elements());
    r.guidance = 5.0f;
    r.scheduler = "euler";
    r.precision = precision();
    r.initial_latents = ReadDataset(golden_, group_ + "/init_latents");
    r.keep_step_latents = true;
    return r;
  }

  std::string ref_, golden_, group_, model_;
};

void ExpectSameIds(const Array& got, const Array& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < got.num_elements(); ++i)
    ASSERT_EQ(got.data<int32_t>()[i], want.data<int32_t>()[i]) << what << " at " << i;
}

// [a; b] along the leading axis.
Array Stack(const Array& a, const Array& b) {
  mesh::Shape s = a.shape();
  s[0] += b.dim(0);
  Array out = Array::Host(mesh::DType::kF32, s);
  std::copy(a.data<float>(), a.data<float>() + a.num_elements(), out.mutable_data<float>());
  std::copy(b.data<float>(), b.data<float>() + b.num_elements(), out.mutable_data<float>() + a.num_elements());
  return out;
}

TEST_P(SdxlPipelineTest, TokensEmbeddingsPooledAndTimeIds) {
  auto file = ModelFile::Open(model_);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto flow = LoadTextToImage(**file);
  ASSERT_TRUE(flow.ok()) << flow.status().ToString();
  EXPECT_STREQ((*flow)->family().name, "sdxl");
  const GenerateRequest r = Request();
  const bool negatives = !r.negative_prompts.empty();
  std::vector<std::string> negs = negatives ? r.negative_prompts : std::vector<std::string>(r.prompts.size());
  auto ids = (*flow)->conditioning().Tokenize(r.prompts, negs);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_EQ(ids->size(), 4u);
  ExpectSameIds((*ids)[0], ReadDataset(golden_, group_ + "/prompt_input_ids"), "prompt_input_ids");
  ExpectSameIds((*ids)[2], ReadDataset(golden_, group_ + "/prompt_input_ids_2"), "prompt_input_ids_2");
  if (negatives) {
    ExpectSameIds((*ids)[1], ReadDataset(golden_, group_ + "/negative_input_ids"), "negative_input_ids");
    ExpectSameIds((*ids)[3], ReadDataset(golden_, group_ + "/negative_input_ids_2"), "negative_input_ids_2");
  }

  auto plan = (*flow)->MakePlan(r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ConditioningOptions o;
  o.guided = true;
  o.negatives_given = negatives;
  o.time_ids = (*flow)->TimeIds(r, *plan);
  models::Ctx ctx{nullptr, precision()};
  auto cond = (*flow)->conditioning().Encode(ctx, *ids, o);
  ASSERT_TRUE(cond.ok()) << cond.status().ToString();
  ASSERT_TRUE(cond->added.has_value());

  // The UNet's rows: [negatives; prompts].
  const Array want_ctx = Stack(ReadDataset(golden_, group_ + "/negative_prompt_embeds"),
                               ReadDataset(golden_, group_ + "/prompt_embeds"));
  ASSERT_EQ(cond->context.shape(), want_ctx.shape());
  const double rel_ctx = RelativeError(cond->context, want_ctx);
  const Array want_pooled = Stack(ReadDataset(golden_, group_ + "/negative_pooled_prompt_embeds"),
                                  ReadDataset(golden_, group_ + "/pooled_prompt_embeds"));
  ASSERT_EQ(cond->added->text_embeds.shape(), want_pooled.shape());
  const double rel_pooled = RelativeError(cond->added->text_embeds, want_pooled);
  std::printf("%s %s: prompt embeddings %.3g, pooled %.3g relative\n", ref_.c_str(), group_.c_str(), rel_ctx,
              rel_pooled);
  EXPECT_LT(rel_ctx, Tolerance());
  EXPECT_LT(rel_pooled, Tolerance());
  if (!negatives) {
    // Zeroed, exactly (force_zeros_for_empty_prompt).
    const int64_t half = cond->context.num_elements() / 2;
    for (int64_t i = 0; i < half; ++i) ASSERT_EQ(cond->context.data<float>()[i], 0.0f) << i;
  }
  const Array want_ids = ReadDataset(golden_, group_ + "/add_time_ids");  // [2B, 6]
  ASSERT_EQ(static_cast<int64_t>(cond->added->time_ids.size()), want_ids.num_elements());
  for (int64_t i = 0; i < want_ids.num_elements(); ++i)
    EXPECT_EQ(cond->added->time_ids[i], want_ids.data<float>()[i]) << "add_time_ids value " << i;
}

TEST_P(SdxlPipelineTest, LatentsAfterEveryStepAndImages) {
  GeneratorOptions go;
  go.model = model_;
  go.mesh.devices = 2;
  auto gen = Generator::Open(go);
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  const GenerateRequest r = Request();
  auto res = (*gen)->Generate(r);
  ASSERT_TRUE(res.ok()) << res.status().ToString();

  const std::string label = ref_ + " " + group_;
  tpumesh::testing::ExpectEachStepWithin(res->latents_after_step,
                                         ReadDataset(golden_, group_ + "/latents_after_step"), Tolerance(), label);
  if (precision() != models::Precision::kHighest) return;
  std::vector<const std::vector<uint8_t>*> images;
  for (const Image& im : res->images) images.push_back(&im.rgb);
  tpumesh::testing::ExpectImagesWithinOneLevel(images, ReadDataset(golden_, group_ + "/images_uint8"), label);
}

// tiny-sdxl-b converted once per test (tests/data: always present).
std::string ConvertedB() {
  const std::string model = tpumesh::testing::TestTempDir() + "/tiny-sdxl-b.h5";
  auto st = ConvertDiffusersFolder(std::string(TPUMESH_TEST_DATA_DIR) + "/tiny-sdxl-b", model, mesh::DType::kF32);
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  return model;
}

std::string Slurp(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  std::string s;
  if (f == nullptr) return s;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  std::fclose(f);
  return s;
}

// Same seed -> byte-identical PNGs on 1, 2, 4 and 8 devices (8 images).
TEST(SdxlGenerateTest, SamePngBytesOnEveryDeviceCount) {
  const std::string model = ConvertedB();
  const std::string dir = tpumesh::testing::TestTempDir();
  std::vector<std::string> first;
  for (int devices : {1, 2, 4, 8}) {
    GeneratorOptions go;
    go.model = model;
    go.mesh.devices = devices;
    auto gen = Generator::Open(go);
    ASSERT_TRUE(gen.ok()) << gen.status().ToString();
    GenerateRequest r;
    r.prompts = {"a red circle on a blue background"};
    r.negative_prompts = {"blurry"};
    r.steps = 2;
    r.seed = 11;
    r.batch_per_device = 8 / devices;
    r.height = 32;
    r.width = 48;
    auto res = (*gen)->Generate(r);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    const std::string out = dir + "/d" + std::to_string(devices);
    auto written = WriteImages(out, *res, r, "tiny-sdxl-b");
    ASSERT_TRUE(written.ok()) << written.status().ToString();
    ASSERT_EQ(written->size(), 9u);  // 8 images + grid
    std::vector<std::string> bytes;
    for (const std::string& p : *written) bytes.push_back(Slurp(p));
    if (first.empty()) {
      first = bytes;
      for (size_t i = 1; i < 8; ++i) EXPECT_NE(bytes[i], bytes[0]) << "image " << i << " equals image 0";
    } else {
      for (size_t i = 0; i < bytes.size(); ++i)
        EXPECT_TRUE(bytes[i] == first[i]) << (*written)[i] << " differs on " << devices << " devices";
    }
  }
}

// A bf16 model file loads without an f32 copy of its Linear and conv
// weights (embedding tables and vectors are f32) and runs.
TEST(SdxlGenerateTest, Bf16FileKeepsBf16Weights) {
  const std::string model = tpumesh::testing::TestTempDir() + "/b16.h5";
  ASSERT_TRUE(ConvertDiffusersFolder(std::string(TPUMESH_TEST_DATA_DIR) + "/tiny-sdxl-b", model,
                                     mesh::DType::kBF16)
                  .ok());
  auto file = ModelFile::Open(model);
  ASSERT_TRUE(file.ok());
  auto flow = LoadTextToImage(**file);
  ASSERT_TRUE(flow.ok()) << flow.status().ToString();
  EXPECT_EQ((*flow)->unet().params()["conv_in.weight"].dtype(), mesh::DType::kBF16);
  EXPECT_EQ((*flow)->unet().params()["conv_in.bias"].dtype(), mesh::DType::kF32);
  EXPECT_EQ((*flow)->vae().params()["decoder.conv_out.weight"].dtype(), mesh::DType::kBF16);
  GeneratorOptions go;
  go.model = model;
  go.mesh.devices = 1;
  auto gen = Generator::Open(go);
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  GenerateRequest r;
  r.prompts = {"a cat"};
  r.steps = 2;
  auto res = (*gen)->Generate(r);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->images.size(), 1u);
  EXPECT_EQ(res->guidance, 5.0f);  // SDXL's default
  EXPECT_EQ(res->height, 64);       // sample_size 16 x the VAE's 4
}

// A dry run of the flow (simulate --model) records what a real run records:
// the same ops, so the same modelled time, to 1e-9; with and without a
// negative prompt (SDXL zeroes it or encodes it) and with guidance 1.
TEST(SdxlGenerateTest, SimulateAgreesWithARealRun) {
  const std::string model = ConvertedB();
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    GeneratorOptions go;
    go.model = model;
    go.mesh.devices = 2;
    auto gen = Generator::Open(go);
    ASSERT_TRUE(gen.ok()) << gen.status().ToString();
    GenerateRequest r;
    r.prompts = {"a cat"};
    if (variant == 1) r.negative_prompts = {"a dog"};
    if (variant == 2) r.guidance = 1.0f;
    r.steps = 3;
    r.keep_ops = true;
    auto res = (*gen)->Generate(r);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    SimulateOptions so;
    so.model = model;
    so.mesh.devices = 2;
    so.request = r;
    so.request.prompts.clear();
    auto sim = Simulate(so);
    ASSERT_TRUE(sim.ok()) << sim.status().ToString();
    EXPECT_EQ(sim->info.at("family"), "sdxl");
    ASSERT_EQ(sim->logs[0].ops().size(), res->report.logs[0].ops().size());
    for (size_t i = 0; i < sim->logs[0].ops().size(); ++i) {
      ASSERT_EQ(sim->logs[0].ops()[i].op.name, res->report.logs[0].ops()[i].op.name) << i;
      ASSERT_EQ(sim->logs[0].ops()[i].op.shape, res->report.logs[0].ops()[i].op.shape) << i;
    }
    EXPECT_NEAR(sim->modelled_seconds(), res->modelled_seconds, 1e-9 * res->modelled_seconds);
  }
}

INSTANTIATE_TEST_SUITE_P(
    VariantsGroupsPrecisions, SdxlPipelineTest,
    ::testing::Combine(::testing::Values("tiny-sdxl-a", "tiny-sdxl-b"),
                       ::testing::Values("pipeline_euler", "pipeline_euler_noneg"),
                       ::testing::Values(models::Precision::kHighest, models::Precision::kDefault)),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param) +
                         (std::get<2>(info.param) == models::Precision::kHighest ? "_highest" : "_default");
      for (char& c : name)
        if (c == '-') c = '_';
      return name;
    });

}  // namespace
}  // namespace tpumesh::pipeline
