// SDXL's two text encoders against transformers 4.44.2 on two tiny SDXL
// references: tiny-sdxl-a (../shared/refdata) and tiny-sdxl-b (tests/data,
// other widths and depths; scripts/refdata/make_sdxl_variant_golden.py):
// every output the SDXL pipeline reads — the penultimate hidden state of
// each encoder, the pooled output and text_encoder_2's projected
// text_embeds — plus last_hidden_state, within 1e-4 relative at highest and
// 3e-2 at default.
#include <cstdio>
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "models/clip.h"
#include "models/configs.h"
#include "tests/testing/golden.h"
#include "tests/testing/model_files.h"

namespace tpumesh::models {
namespace {

using tpumesh::testing::LoadParams;
using tpumesh::testing::ReadDataset;
using tpumesh::testing::RelativeError;
using tpumesh::testing::Slurp;

class SdxlTextParityTest : public ::testing::TestWithParam<std::tuple<std::string, Precision>> {
 protected:
  void SetUp() override {
    ref_ = tpumesh::testing::ReferenceDir(std::get<0>(GetParam()));
    golden_ = ref_ + "/golden.h5";
    TPUMESH_REQUIRE_REFDATA(golden_);
  }
  Precision precision() const { return std::get<1>(GetParam()); }
  double Tolerance() const { return precision() == Precision::kHighest ? 1e-4 : 3e-2; }
  std::string ref_, golden_;
};

TEST_P(SdxlTextParityTest, BothEncodersEveryOutputThePipelineReads) {
  for (const std::string component : {"text_encoder", "text_encoder_2"}) {
    SCOPED_TRACE(component);
    auto cfg = ParseClipTextConfig(Slurp(ref_ + "/" + component + "/config.json"), component + "/config.json");
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    EXPECT_EQ(cfg->with_projection, component == "text_encoder_2");
    auto model = ClipTextModel::Create(*cfg, LoadParams(ref_ + "/" + component + "/model.safetensors"));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const mesh::Array ids = ReadDataset(golden_, component + "/input_ids");
    ASSERT_EQ(ids.rank(), 2);
    Ctx ctx{nullptr, precision()};
    auto out = model->Encode(ctx, ids);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<std::pair<std::string, const mesh::Array*>> checks = {
        {"penultimate", &out->penultimate},
        {"last_hidden_state", &out->last_hidden_state},
        {"pooler_output", &out->pooled}};
    if (cfg->with_projection) checks.push_back({"text_embeds", &out->text_embeds});
    for (const auto& [name, got] : checks) {
      const mesh::Array want = ReadDataset(golden_, component + "/" + name);
      ASSERT_EQ(got->shape(), want.shape()) << name;
      const double rel = RelativeError(*got, want);
      std::printf("%s %s/%s relative error: %.3g\n", ref_.c_str(), component.c_str(), name.c_str(), rel);
      EXPECT_LT(rel, Tolerance()) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    ModelsAndPrecisions, SdxlTextParityTest,
    ::testing::Combine(::testing::Values("tiny-sdxl-a", "tiny-sdxl-b"),
                       ::testing::Values(Precision::kHighest, Precision::kDefault)),
    [](const auto& info) {
      std::string name =
          std::get<0>(info.param) + (std::get<1>(info.param) == Precision::kHighest ? "_highest" : "_default");
      for (char& c : name)
        if (c == '-') c = '_';
      return name;
    });

}  // namespace
}  // namespace tpumesh::models
