// models/t5.h's relative position buckets and models/flux.h's rotary table
// against the formulas of transformers' T5Attention._relative_position_bucket
// and diffusers' FluxPosEmbed (worked by hand below), and the transformer
// ops of models/nn.h against direct evaluations.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "models/flux.h"
#include "models/nn.h"
#include "models/t5.h"

namespace tpumesh::models {
namespace {

using mesh::Array;
using mesh::DType;

TEST(FluxModelTest, T5BucketsAsTransformers) {
  // 32 buckets, max distance 128, bidirectional: 16 per direction (keys
  // after the query from 16), 8 exact, then 8 + int(log(n / 8) / log(16) * 8).
  struct Case {
    int64_t rel;
    int bucket;
  };
  for (const Case& c : std::vector<Case>{{0, 0},    {1, 17},   {-1, 1},  {7, 23},  {-7, 7},   {8, 24},
                                         {20, 26},  {-50, 13}, {127, 31}, {-128, 15}, {1000, 31}, {-1000, 15}})
    EXPECT_EQ(T5RelativeBucket(c.rel, 32, 128), c.bucket) << c.rel;
}

TEST(FluxModelTest, RopeTableAsFluxPosEmbed) {
  // Axes (2, 4, 6): text tokens all at (0, 0, 0); image token (r, c) at
  // (0, r, c); angle pos / 10000^(2j / dim), cos then sin, each twice.
  const std::vector<float> t = FluxRopeTable({2, 4, 6}, 1, 2, 3);
  const int64_t hd = 12;
  ASSERT_EQ(t.size(), static_cast<size_t>((1 + 6) * 2 * hd));
  for (int64_t j = 0; j < hd; ++j) {
    EXPECT_EQ(t[j], 1.0f);
    EXPECT_EQ(t[hd + j], 0.0f);
  }
  // Image token 5 = (r 1, c 2) is row 6.
  const float* row = t.data() + 6 * 2 * hd;
  auto angle = [](double pos, int j, int dim) { return pos / std::pow(10000.0, 2.0 * j / dim); };
  for (int j = 0; j < 2; ++j) {  // axis 1 (dims 2..5): position r = 1
    EXPECT_FLOAT_EQ(row[2 + 2 * j], static_cast<float>(std::cos(angle(1, j, 4))));
    EXPECT_FLOAT_EQ(row[2 + 2 * j + 1], static_cast<float>(std::cos(angle(1, j, 4))));
    EXPECT_FLOAT_EQ(row[hd + 2 + 2 * j], static_cast<float>(std::sin(angle(1, j, 4))));
  }
  for (int j = 0; j < 3; ++j)  // axis 2 (dims 6..11): position c = 2
    EXPECT_FLOAT_EQ(row[hd + 6 + 2 * j + 1], static_cast<float>(std::sin(angle(2, j, 6))));
}

TEST(FluxModelTest, OpsComputeTheirFormulas) {
  Ctx ctx;  // host, kHighest
  // RMSNorm per head of 2: x * rsqrt(mean(x^2) + eps) * g.
  Array x = Array::Host(DType::kF32, {1, 1, 4});
  const float xv[4] = {1, 3, -2, 2};
  for (int i = 0; i < 4; ++i) x.mutable_data<float>()[i] = xv[i];
  Array g = Array::Host(DType::kF32, {2});
  g.mutable_data<float>()[0] = 1.0f;
  g.mutable_data<float>()[1] = 0.5f;
  auto n = RmsNorm(ctx, x, g, 1e-6f);
  ASSERT_TRUE(n.ok());
  const float r0 = 1.0f / std::sqrt(5.0f + 1e-6f), r1 = 1.0f / std::sqrt(4.0f + 1e-6f);
  EXPECT_FLOAT_EQ(n->data<float>()[1], 3 * r0 * 0.5f);
  EXPECT_FLOAT_EQ(n->data<float>()[2], -2 * r1);
  EXPECT_FALSE(RmsNorm(ctx, x, Array::Host(DType::kF32, {3}), 1e-6f).ok());
  // Modulation: LN(x) * (1 + scale) + shift, chunks 0 (shift) and 1 (scale).
  Array mod = Array::Host(DType::kF32, {1, 8});
  for (int i = 0; i < 8; ++i) mod.mutable_data<float>()[i] = i < 4 ? 0.5f : 1.0f;
  auto m = ModulatedLayerNorm(ctx, x, mod, 0, 1, 1e-6f);
  ASSERT_TRUE(m.ok());
  const float mean = 1.0f, var = (0 + 4 + 9 + 1) / 4.0f;
  EXPECT_NEAR(m->data<float>()[1], (3 - mean) / std::sqrt(var + 1e-6f) * 2 + 0.5f, 1e-6);
  // Gated add: x += gate (chunk 1 = 1.0) * y.
  Array z = Array::Host(DType::kF32, {1, 1, 4});
  for (int i = 0; i < 4; ++i) z.mutable_data<float>()[i] = 1.0f;
  ASSERT_TRUE(GatedAddInPlace(ctx, z, *m, mod, 1).ok());
  EXPECT_FLOAT_EQ(z.data<float>()[1], 1.0f + m->data<float>()[1]);
  // RoPE: (x0, x1) -> (x0 cos - x1 sin, x1 cos + x0 sin).
  Array q = Array::Host(DType::kF32, {1, 1, 2});
  q.mutable_data<float>()[0] = 1.0f;
  q.mutable_data<float>()[1] = 2.0f;
  Array cs = Array::Host(DType::kF32, {1, 2, 2});
  const float c = std::cos(0.3f), s = std::sin(0.3f);
  const float tab[4] = {c, c, s, s};
  for (int i = 0; i < 4; ++i) cs.mutable_data<float>()[i] = tab[i];
  ASSERT_TRUE(RopeInPlace(ctx, q, cs).ok());
  EXPECT_FLOAT_EQ(q.data<float>()[0], 1 * c + (-2) * s);
  EXPECT_FLOAT_EQ(q.data<float>()[1], 2 * c + 1 * s);
  // Biased attention, one query, two keys, one head of 1: softmax(q k + b) v.
  Array qa = Array::Host(DType::kF32, {1, 1, 1}), ka = Array::Host(DType::kF32, {1, 2, 1}),
        va = Array::Host(DType::kF32, {1, 2, 1}), bias = Array::Host(DType::kF32, {1, 1, 2});
  qa.mutable_data<float>()[0] = 2;
  ka.mutable_data<float>()[0] = 1;
  ka.mutable_data<float>()[1] = -1;
  va.mutable_data<float>()[0] = 10;
  va.mutable_data<float>()[1] = 20;
  bias.mutable_data<float>()[0] = 0;
  bias.mutable_data<float>()[1] = 1;
  auto a = BiasedAttention(ctx, qa, ka, va, 1, bias);
  ASSERT_TRUE(a.ok());
  const double p0 = std::exp(2.0), p1 = std::exp(-2.0 + 1.0);
  EXPECT_NEAR(a->data<float>()[0], (10 * p0 + 20 * p1) / (p0 + p1), 1e-5);
  // Concat along the sequence and slicing it back.
  auto j = Concat(ctx, ka, va, 1);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->shape(), (mesh::Shape{1, 4, 1}));
  auto back = SliceRows(ctx, *j, 2, 2);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->data<float>()[1], 20.0f);
  EXPECT_FALSE(SliceRows(ctx, *j, 3, 2).ok());
}

}  // namespace
}  // namespace tpumesh::models
