// The models give the same bits whatever the host thread count and however
// the batch is split over devices: the tiny reference models (tiny-sd-a) in
// a TBB arena of 1, 2 and 3 threads (Ctx::threads = 0, as inside a
// mesh::Device) and with Ctx::threads = 1, each with freshly loaded weights
// (so the weight packing runs under that thread count too), and each sample
// of a batch of 2 computed alone (a pmap over 2 devices gives each device
// one; the pipeline decodes one image at a time). Outputs are compared with
// memcmp.
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/safetensors.h"
#include "kernels/bf16.h"
#include "models/clip.h"
#include "models/configs.h"
#include "models/unet.h"
#include "models/vae.h"
#include "oneapi/tbb/task_arena.h"
#include "tests/testing/golden.h"
#include "tests/testing/model_files.h"

namespace tpumesh::models {
namespace {

using mesh::Array;
using tpumesh::testing::ReadDataset;

using tpumesh::testing::LoadParams;
using tpumesh::testing::Slurp;

// Rows [i, i+1) of the leading dimension.
Array Row(const Array& a, int64_t i) {
  auto r = a.SliceLeading(i, i + 1, nullptr);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Array();
}

bool SameBits(const Array& a, const Array& b, int64_t b_offset_elements = 0) {
  return a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), static_cast<const char*>(b.raw()) + b_offset_elements * 4, a.size_bytes()) == 0;
}

// How a call is run: in an arena of `arena_threads` with Ctx::threads = 0,
// or (arena_threads = 0) on the calling thread with Ctx::threads = 1.
struct RunMode {
  int arena_threads;
  std::string name() const {
    return arena_threads == 0 ? "Ctx::threads=1" : "arena of " + std::to_string(arena_threads);
  }
};
const RunMode kRuns[] = {{0}, {1}, {2}, {3}};

StatusOr<Array> RunIn(const RunMode& r, const std::function<StatusOr<Array>(const Ctx&)>& f, Precision precision) {
  Ctx ctx{nullptr, precision};
  if (r.arena_threads == 0) {
    ctx.threads = 1;
    return f(ctx);
  }
  StatusOr<Array> out = InternalError("not run");
  tbb::task_arena arena(r.arena_threads);
  arena.execute([&] { out = f(ctx); });
  return out;
}

class DeterminismTest : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override {
    ref_ = tpumesh::testing::RefdataDir() + "/tiny-sd-a";
    golden_ = ref_ + "/golden.h5";
    TPUMESH_REQUIRE_REFDATA(golden_);
  }
  std::string ref_, golden_;
};

TEST_P(DeterminismTest, UNetSameBitsForEveryThreadCountAndBatchSplit) {
  auto cfg = ParseUNetConfig(Slurp(ref_ + "/unet/config.json"), "unet/config.json");
  ASSERT_TRUE(cfg.ok());
  const Array sample = ReadDataset(golden_, "unet/sample");
  const Array ehs = ReadDataset(golden_, "unet/encoder_hidden_states");
  ASSERT_EQ(sample.dim(0), 2);
  const std::vector<float> t = {981.0f, 1.0f};
  Array first;
  for (const RunMode& r : kRuns) {
    auto model = UNetModel::Create(*cfg, LoadParams(ref_ + "/unet/diffusion_pytorch_model.safetensors"));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto y = RunIn(r, [&](const Ctx& c) { return model->Forward(c, sample, t, ehs); }, GetParam());
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    if (first.num_elements() == 0) first = *y;
    EXPECT_TRUE(SameBits(*y, first)) << r.name() << " differs from " << kRuns[0].name();
    // Each sample alone, as on one of two devices (a batch of 1 also takes
    // the paths that spread one product over the threads).
    for (int64_t i = 0; i < 2; ++i) {
      auto yi = RunIn(r, [&](const Ctx& c) { return model->Forward(c, Row(sample, i), {t[i]}, Row(ehs, i)); },
                      GetParam());
      ASSERT_TRUE(yi.ok()) << yi.status().ToString();
      EXPECT_TRUE(SameBits(*yi, first, i * yi->num_elements())) << "sample " << i << " alone, " << r.name();
    }
  }
}

TEST_P(DeterminismTest, TextEncoderAndVaeSameBitsForEveryThreadCount) {
  auto tc = ParseClipTextConfig(Slurp(ref_ + "/text_encoder/config.json"), "text_encoder/config.json");
  auto vc = ParseVaeConfig(Slurp(ref_ + "/vae/config.json"), "vae/config.json");
  ASSERT_TRUE(tc.ok() && vc.ok());
  const Array ids = ReadDataset(golden_, "text_encoder/input_ids");
  const Array z = ReadDataset(golden_, "vae_decode/decoder_input");
  const Array image = ReadDataset(golden_, "vae_encode/image");
  Array text0, dec0, enc0;
  for (const RunMode& r : kRuns) {
    auto clip = ClipTextModel::Create(*tc, LoadParams(ref_ + "/text_encoder/model.safetensors"));
    auto vae = VaeModel::Create(*vc, LoadParams(ref_ + "/vae/diffusion_pytorch_model.safetensors"));
    ASSERT_TRUE(clip.ok() && vae.ok());
    auto text = RunIn(r, [&](const Ctx& c) { return clip->Forward(c, ids); }, GetParam());
    auto dec = RunIn(r, [&](const Ctx& c) { return vae->Decode(c, z); }, GetParam());
    auto enc = RunIn(r, [&](const Ctx& c) { return vae->EncodeMean(c, image); }, GetParam());
    ASSERT_TRUE(text.ok() && dec.ok() && enc.ok());
    // Each image decoded alone (as the pipeline decodes) gives its rows of
    // the batched decode.
    ASSERT_GE(z.dim(0), 2);
    for (int64_t i = 0; i < z.dim(0); ++i) {
      auto di = RunIn(r, [&](const Ctx& c) { return vae->Decode(c, Row(z, i)); }, GetParam());
      ASSERT_TRUE(di.ok()) << di.status().ToString();
      EXPECT_TRUE(SameBits(*di, *dec, i * di->num_elements())) << "image " << i << " decoded alone, " << r.name();
    }
    if (text0.num_elements() == 0) {
      text0 = *text;
      dec0 = *dec;
      enc0 = *enc;
      continue;
    }
    EXPECT_TRUE(SameBits(*text, text0)) << "text encoder, " << r.name();
    EXPECT_TRUE(SameBits(*dec, dec0)) << "vae decoder, " << r.name();
    EXPECT_TRUE(SameBits(*enc, enc0)) << "vae encoder, " << r.name();
  }
}

// The text embedding tables held in bf16 (as a bf16 model file keeps them)
// give the bits of the same values widened to f32.
TEST_P(DeterminismTest, TextEncoderBf16HeldEmbeddingsEqualTheirF32Widening) {
  auto tc = ParseClipTextConfig(Slurp(ref_ + "/text_encoder/config.json"), "text_encoder/config.json");
  ASSERT_TRUE(tc.ok());
  const Array ids = ReadDataset(golden_, "text_encoder/input_ids");
  std::map<std::string, Array> held, wide;
  const ParamMap loaded = LoadParams(ref_ + "/text_encoder/model.safetensors");
  for (const auto& [name, a] : loaded.all()) {
    if (name.find("embedding.weight") == std::string::npos) {
      held.emplace(name, a);
      wide.emplace(name, a);
      continue;
    }
    ASSERT_TRUE(MayHoldBf16(name, a.shape())) << name;
    ASSERT_FALSE(OnlyPacked(name, a.shape())) << name;
    Array h = Array::Host(mesh::DType::kBF16, a.shape()), w = Array::Host(mesh::DType::kF32, a.shape());
    for (int64_t i = 0; i < a.num_elements(); ++i) {
      h.mutable_data<kernels::bf16>()[i] = kernels::F32ToBf16(a.data<float>()[i]);
      w.mutable_data<float>()[i] = kernels::Bf16ToF32(h.data<kernels::bf16>()[i]);
    }
    held.emplace(name, h);
    wide.emplace(name, w);
  }
  auto a = ClipTextModel::Create(*tc, ParamMap(held));
  auto b = ClipTextModel::Create(*tc, ParamMap(wide));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto ya = RunIn(kRuns[0], [&](const Ctx& c) { return a->Forward(c, ids); }, GetParam());
  auto yb = RunIn(kRuns[0], [&](const Ctx& c) { return b->Forward(c, ids); }, GetParam());
  ASSERT_TRUE(ya.ok() && yb.ok());
  EXPECT_TRUE(SameBits(*ya, *yb));
}

INSTANTIATE_TEST_SUITE_P(Precisions, DeterminismTest, ::testing::Values(Precision::kDefault, Precision::kHighest),
                         [](const auto& info) { return info.param == Precision::kDefault ? "default" : "highest"; });

}  // namespace
}  // namespace tpumesh::models
