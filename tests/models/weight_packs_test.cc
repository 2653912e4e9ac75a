// models::WeightPacks: each weight packed once however many threads ask at
// once (as the 8 devices of a pmap do), the packed product equal bit for bit
// to packing per call, the Linear path of a 1x1 conv equal to Conv2d, and
// parameters given back after their last use refused afterwards.
#include <cstring>
#include <string>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "models/nn.h"
#include "models/params.h"

namespace tpumesh::models {
namespace {

using mesh::Array;
using mesh::DType;

Array Random(mesh::Shape shape, uint32_t seed) {
  Array a = Array::Host(DType::kF32, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> n01;
  float* p = a.mutable_data<float>();
  for (int64_t i = 0; i < a.num_elements(); ++i) p[i] = n01(rng);
  return a;
}

bool SameBits(const Array& a, const Array& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.size_bytes()) == 0;
}

TEST(WeightPacksTest, ConcurrentCallersPackEachWeightOnce) {
  std::vector<Array> weights;
  for (int i = 0; i < 12; ++i) weights.push_back(Random(i % 2 ? mesh::Shape{48, 40} : mesh::Shape{24, 16, 3, 3}, i));
  std::vector<const Array*> list;
  for (const Array& w : weights) list.push_back(&w);
  for (Precision p : {Precision::kDefault, Precision::kHighest}) {
    WeightPacks packs;
    std::vector<std::thread> devices;
    std::vector<std::vector<const kernels::PackedMatrix*>> got(8);
    for (int d = 0; d < 8; ++d) {
      devices.emplace_back([&, d] {
        EXPECT_TRUE(packs.PackAll(list, p, 1).ok());
        for (const Array& w : weights) {
          auto g = packs.Get(w, p, 1);
          EXPECT_TRUE(g.ok());
          got[d].push_back(g.ok() ? *g : nullptr);
        }
      });
    }
    for (auto& t : devices) t.join();
    EXPECT_EQ(packs.count(), 12);
    for (int d = 1; d < 8; ++d) EXPECT_EQ(got[d], got[0]) << "device " << d;
  }
}

TEST(WeightPacksTest, PackedOnceEqualsPackedPerCall) {
  const Array x = Random({2, 24, 9, 7}, 100), w = Random({16, 24, 3, 3}, 101), b = Random({16}, 102);
  const Array xl = Random({5, 40}, 103), wl = Random({48, 40}, 104);
  for (Precision p : {Precision::kDefault, Precision::kHighest}) {
    WeightPacks packs;
    Ctx per_call{nullptr, p};
    Ctx packed = per_call.WithPacks(&packs);
    for (int stride : {1, 2}) {
      auto y0 = Conv2d(per_call, x, w, &b, stride, 1);
      auto y1 = Conv2d(packed, x, w, &b, stride, 1);
      ASSERT_TRUE(y0.ok() && y1.ok());
      EXPECT_TRUE(SameBits(*y0, *y1)) << "stride " << stride;
    }
    auto l0 = Linear(per_call, xl, wl, nullptr);
    auto l1 = Linear(packed, xl, wl, nullptr);
    ASSERT_TRUE(l0.ok() && l1.ok());
    EXPECT_TRUE(SameBits(*l0, *l1));
    EXPECT_EQ(packs.count(), 2);
  }
}

// Ctx::release_packed_weights: the loaded copy of a packed weight gives its
// host pages back (mapped storage, 2 MiB and more) and the packs keep
// serving it with the same bits; packing it at another precision is refused.
TEST(WeightPacksTest, ReleasedWeightsKeepServingTheirPacks) {
  const Array x = Random({3, 1024}, 200);
  for (Precision p : {Precision::kDefault, Precision::kHighest}) {
    const Array w = Random({640, 1024}, 201);  // 2.5 MiB of f32: mapped on its own
    const Array small = Random({48, 40}, 202);
    auto want = Linear(Ctx{nullptr, p}, x, w, nullptr);
    ASSERT_TRUE(want.ok());
    ParamMap params({{"proj.weight", w}, {"small.weight", small}});
    Ctx ctx = Ctx{nullptr, p}.WithPacks(params.packs());
    ctx.release_packed_weights = true;
    ASSERT_TRUE(params.PackMatmulWeights(ctx).ok());
    EXPECT_EQ(params.packs()->count(), 2);
    EXPECT_EQ(w.ReleaseHostPages(), 0) << "released already";
    EXPECT_EQ(small.ReleaseHostPages(), 0) << "too small to be mapped on its own";
    auto got = Linear(ctx, x, w, nullptr);
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(SameBits(*want, *got));
    const Precision other = p == Precision::kDefault ? Precision::kHighest : Precision::kDefault;
    EXPECT_EQ(params.packs()->Get(w, other).status().code(), StatusCode::kFailedPrecondition);
  }
  // Without the flag nothing is released.
  const Array w = Random({640, 1024}, 203);
  ParamMap params({{"proj.weight", w}});
  ASSERT_TRUE(params.PackMatmulWeights(Ctx{nullptr, Precision::kDefault}.WithPacks(params.packs())).ok());
  EXPECT_GT(w.ReleaseHostPages(), 0);
}

// ParamMap::GiveBack: the packs are freed, the mapped arrays' pages go (the
// unpacked table too), and a later use is refused, never served from freed
// memory; a map sharing the packs (another model rank) is refused too.
TEST(WeightPacksTest, GivenBackParamsAreRefusedAfterwards) {
  const Array x = Random({3, 1024}, 300);
  const Array w = Random({640, 1024}, 301);      // 2.5 MiB: mapped on its own
  const Array table = Random({1000, 1024}, 302);  // an embedding table: never packed
  ParamMap params({{"proj.weight", w}, {"token_embedding.weight", table}});
  ParamMap other({{"proj.weight", w}});
  other.SharePacks(params);
  Ctx ctx = Ctx{nullptr, Precision::kDefault}.WithPacks(params.packs());
  ctx.release_packed_weights = true;
  ASSERT_TRUE(params.PackMatmulWeights(ctx, [](const std::string& name) { return name == "proj.weight"; }).ok());
  ASSERT_TRUE(Linear(ctx, x, w, nullptr).ok());
  const int64_t packed = static_cast<int64_t>(params.packs()->bytes());
  EXPECT_GT(packed, 0);
  // The packs and the table's pages (w's went when it was packed).
  EXPECT_EQ(params.GiveBack(), packed + table.size_bytes());
  EXPECT_EQ(params.packs()->bytes(), 0u);
  EXPECT_EQ(table.ReleaseHostPages(), 0) << "released already";
  auto again = Linear(ctx, x, w, nullptr);
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(again.status().message()).find("given back after its last use"), std::string::npos)
      << again.status().message();
  EXPECT_EQ(params.PackMatmulWeights(ctx).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(other.PackMatmulWeights(Ctx{nullptr, Precision::kDefault}.WithPacks(other.packs())).code(),
            StatusCode::kFailedPrecondition);
}

TEST(WeightPacksTest, OneByOneConvAsLinearOnChannelsLast) {
  const Array x = Random({2, 24, 5, 6}, 200), w = Random({16, 24, 1, 1}, 201), b = Random({16}, 202);
  for (Precision p : {Precision::kDefault, Precision::kHighest}) {
    Ctx ctx{nullptr, p};
    auto conv = Conv2d(ctx, x, w, &b);
    ASSERT_TRUE(conv.ok());
    auto nlc = NchwToNlc(ctx, x);
    ASSERT_TRUE(nlc.ok());
    auto lin = Linear(ctx, *nlc, w, &b);
    ASSERT_TRUE(lin.ok()) << lin.status().ToString();
    auto back = NlcToNchw(ctx, *lin, 5, 6);
    ASSERT_TRUE(back.ok());
    EXPECT_TRUE(SameBits(*conv, *back));
  }
}

TEST(WeightPacksTest, RejectsWhatIsNotAWeight) {
  WeightPacks packs;
  EXPECT_EQ(packs.Get(Array::Host(DType::kF32, {2, 3, 4}), Precision::kDefault).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(packs.Get(Array::Host(DType::kI32, {2, 3}), Precision::kDefault).status().code(),
            StatusCode::kInvalidArgument);
  Ctx ctx{nullptr, Precision::kDefault};
  EXPECT_EQ(Linear(ctx, Array::Host(DType::kF32, {2, 3}), Array::Host(DType::kF32, {4, 3, 3, 1}), nullptr)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

// A weight held in bf16 (a bf16 model file, no f32 master copy) computes
// exactly what its f32 widening computes: Linear and conv, both precisions,
// through the packs and packed per call.
TEST(WeightPacksTest, Bf16HeldWeightsEqualTheirF32Widening) {
  for (mesh::Shape shape : {mesh::Shape{24, 40}, mesh::Shape{24, 16, 3, 3}}) {
    const Array f32 = Random(shape, 5);
    Array wide = Array::Host(DType::kF32, shape);
    Array held = Array::Host(DType::kBF16, shape);
    for (int64_t i = 0; i < f32.num_elements(); ++i) {
      held.mutable_data<kernels::bf16>()[i] = kernels::F32ToBf16(f32.data<float>()[i]);
      wide.mutable_data<float>()[i] = kernels::Bf16ToF32(held.data<kernels::bf16>()[i]);
    }
    EXPECT_TRUE(MayHoldBf16("down_blocks.0.resnets.0.conv1.weight", shape));
    for (Precision p : {Precision::kDefault, Precision::kHighest}) {
      for (bool use_packs : {true, false}) {
        WeightPacks packs;
        Ctx ctx{nullptr, p};
        if (use_packs) ctx.packs = &packs;
        auto run = [&](const Array& w) {
          return shape.size() == 2 ? Linear(ctx, Random({3, 40}, 9), w, nullptr)
                                   : Conv2d(ctx, Random({2, 16, 6, 5}, 9), w, nullptr, 1, 1);
        };
        auto a = run(held), b = run(wide);
        ASSERT_TRUE(a.ok()) << a.status().ToString();
        ASSERT_TRUE(b.ok()) << b.status().ToString();
        EXPECT_TRUE(SameBits(*a, *b)) << mesh::ShapeToString(shape) << " precision " << static_cast<int>(p);
      }
    }
  }
  // The CLIP text tables may be bf16 but are never packed; other embedding
  // tables and vectors stay f32.
  EXPECT_TRUE(MayHoldBf16("text_model.embeddings.token_embedding.weight", {1000, 32}));
  EXPECT_FALSE(OnlyPacked("text_model.embeddings.token_embedding.weight", {1000, 32}));
  EXPECT_FALSE(MayHoldBf16("class_embedding.weight", {10, 32}));
  EXPECT_FALSE(MayHoldBf16("conv_in.bias", {32}));
}

}  // namespace
}  // namespace tpumesh::models
