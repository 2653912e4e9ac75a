// Parity with the real diffusers/transformers code on the tiny-sd-a reference
// model (../shared/refdata/tiny-sd-a/golden.h5): within 1e-4 relative at
// precision=highest and 3e-2 at default (bf16 operands).
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "models/clip.h"
#include "models/configs.h"
#include "pipeline/safetensors.h"
#include "tests/testing/golden.h"

namespace tpumesh::models {
namespace {

using tpumesh::testing::ReadDataset;
using tpumesh::testing::RelativeError;

const std::string kRef = tpumesh::testing::RefdataDir() + "/tiny-sd-a";
const std::string kGolden = kRef + "/golden.h5";

std::string Slurp(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  std::string s;
  if (!f) return s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

ParamMap LoadParams(const std::string& safetensors) {
  auto f = pipeline::SafetensorsFile::Open(safetensors);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  std::map<std::string, mesh::Array> m;
  for (const auto& e : f->entries()) {
    auto a = f->Read(e.name, mesh::DType::kF32);
    if (a.ok()) m[e.name] = *a;
  }
  return ParamMap(std::move(m));
}

class ParityTest : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override {
    if (!tpumesh::testing::Exists(kGolden)) GTEST_SKIP() << "reference data absent: " << kGolden;
  }
  double Tolerance() const { return GetParam() == Precision::kHighest ? 1e-4 : 3e-2; }
};

TEST_P(ParityTest, TextEncoder) {
  auto cfg = ParseClipTextConfig(Slurp(kRef + "/text_encoder/config.json"), "text_encoder/config.json");
  ASSERT_TRUE(cfg.ok());
  auto model = ClipTextModel::Create(*cfg, LoadParams(kRef + "/text_encoder/model.safetensors"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const mesh::Array ids = ReadDataset(kGolden, "text_encoder/input_ids");
  const mesh::Array want = ReadDataset(kGolden, "text_encoder/last_hidden_state");
  ASSERT_EQ(ids.shape(), (mesh::Shape{4, 77}));
  Ctx ctx{nullptr, GetParam()};
  auto got = model->Forward(ctx, ids);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->shape(), want.shape());
  const double rel = RelativeError(*got, want);
  std::printf("text_encoder relative error: %.3g\n", rel);
  EXPECT_LT(rel, Tolerance());
}

INSTANTIATE_TEST_SUITE_P(Precisions, ParityTest, ::testing::Values(Precision::kHighest, Precision::kDefault),
                         [](const auto& info) { return info.param == Precision::kHighest ? "highest" : "default"; });

}  // namespace
}  // namespace tpumesh::models
