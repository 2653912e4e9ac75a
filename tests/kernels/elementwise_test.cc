// Elementwise ops against their references on every Highway target. These
// ops round once per element (or not at all), exactly as the reference does,
// so the expected tolerance is 0: the results must be bit-identical.
#include "kernels/elementwise.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "kernels/ops_reference.h"
#include "tests/kernels/ops_test_util.h"

namespace tpumesh::kernels {
namespace {

using testing::ExpectAllNear;
using testing::ExpectBitIdentical;
using testing::ForEachTarget;
using testing::RandomVector;

TEST(BinaryTest, ExactEveryTarget) {
  ForEachTarget([](const char*) {
    for (int64_t n : {0, 1, 15, 17, 33, 100003}) {
      const std::vector<float> a = RandomVector(n, 1), b = RandomVector(n, 2);
      for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kMul}) {
        std::vector<float> got(n, NAN), want(n);
        ASSERT_TRUE(BinaryF32(op, n, a.data(), b.data(), got.data()).ok());
        reference::Binary(op, n, a.data(), b.data(), want.data());
        ExpectBitIdentical(
            got, want,
            (op == BinaryOp::kAdd ? "add " : "mul ") + std::to_string(n));
        std::vector<float> inplace = a;
        ASSERT_TRUE(
            BinaryF32(op, n, inplace.data(), b.data(), inplace.data(), 2).ok());
        ExpectBitIdentical(inplace, want, "in place, 2 threads");
      }
    }
  });
}

TEST(BroadcastChannelTest, ExactEveryTarget) {
  struct Case {
    int64_t outer, channels, inner,
        v_stride_mult;  // v stride = mult * channels
  };
  const std::vector<Case> cases = {
      {1, 3, 49, 0},      // conv bias [C] over [1, 3, 7x7]
      {3, 17, 25, 1},     // time embedding [N, C] over [N, C, 5x5]
      {2, 33, 1, 0},      // Linear bias over [rows, C] (inner 1)
      {5, 320, 1, 1},     // a per-row vector, inner 1
      {2, 320, 4096, 1},  // SD's ResnetBlock temb add, 64x64
  };
  ForEachTarget([&](const char*) {
    for (const Case& c : cases) {
      const int64_t n = c.outer * c.channels * c.inner,
                    vs = c.v_stride_mult * c.channels;
      const std::vector<float> x = RandomVector(n, 3);
      const std::vector<float> v = RandomVector(
          std::max<int64_t>(1, c.outer * c.v_stride_mult) * c.channels, 4);
      for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kMul}) {
        std::vector<float> got(n, NAN), want(n);
        ASSERT_TRUE(BroadcastChannelF32(op, c.outer, c.channels, c.inner,
                                        x.data(), v.data(), vs, got.data())
                        .ok());
        reference::BroadcastChannel(op, c.outer, c.channels, c.inner, x.data(),
                                    v.data(), vs, want.data());
        ExpectBitIdentical(got, want,
                           "broadcast " + std::to_string(c.outer) + "x" +
                               std::to_string(c.channels) + "x" +
                               std::to_string(c.inner));
      }
    }
  });
}

TEST(ConcatChannelsTest, Exact) {
  for (auto [n, ca, cb, inner] : std::vector<std::array<int64_t, 4>>{
           {1, 3, 17, 49}, {3, 320, 640, 64}, {2, 0, 5, 7}}) {
    const std::vector<float> a = RandomVector(n * ca * inner, 5),
                             b = RandomVector(n * cb * inner, 6);
    std::vector<float> got(n * (ca + cb) * inner, NAN), want(got.size());
    ASSERT_TRUE(
        ConcatChannelsF32(n, ca, cb, inner, a.data(), b.data(), got.data(), 2)
            .ok());
    reference::ConcatChannels(n, ca, cb, inner, a.data(), b.data(),
                              want.data());
    ExpectBitIdentical(got, want, "concat");
  }
}

TEST(UpsampleNearest2xTest, ExactEveryTarget) {
  ForEachTarget([](const char*) {
    for (auto [n, c, h, w] : std::vector<std::array<int64_t, 4>>{
             {1, 1, 1, 1}, {1, 3, 5, 7}, {3, 17, 8, 33}, {1, 4, 32, 32}}) {
      const std::vector<float> x = RandomVector(n * c * h * w, 7);
      std::vector<float> got(4 * x.size(), NAN), want(got.size());
      ASSERT_TRUE(UpsampleNearest2xF32(n, c, h, w, x.data(), got.data()).ok());
      reference::UpsampleNearest2x(n, c, h, w, x.data(), want.data());
      ExpectBitIdentical(
          got, want, "upsample " + std::to_string(h) + "x" + std::to_string(w));
    }
  });
}

// The sweep every ops test relies on: each compiled target is visited and
// really becomes the one dispatch picks.
TEST(TargetSweepTest, VisitsEveryCompiledTargetAndForcesIt) {
  const std::vector<int64_t> before = hwy::SupportedAndGeneratedTargets();
  std::vector<std::string> names;
  ForEachTarget([&](const char* name) {
    names.push_back(name);
    const std::vector<int64_t> now = hwy::SupportedAndGeneratedTargets();
    ASSERT_EQ(now.size(), 1u) << name;
    EXPECT_STREQ(hwy::TargetName(now[0]), name);
  });
  // Every target this build compiled and this process may run (TPUMESH_SIMD
  // may leave one: a sanitizer build's scalar target under baseline).
  EXPECT_EQ(names.size(), before.size());
  std::string all;
  for (const std::string& n : names) all += n + " ";
  std::printf("[ targets  ] %s\n", all.c_str());
  EXPECT_EQ(hwy::SupportedAndGeneratedTargets(), before) << "dispatch was not restored";
}

TEST(ElementwiseTest, RejectsBadArgumentsAndCosts) {
  float dummy = 0;
  EXPECT_EQ(
      BinaryF32(static_cast<BinaryOp>(9), 1, &dummy, &dummy, &dummy).code(),
      StatusCode::kUnimplemented);
  EXPECT_EQ(
      BroadcastChannelF32(BinaryOp::kAdd, 1, 0, 1, &dummy, &dummy, 0, &dummy)
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(UpsampleNearest2xF32(1, 1, 0, 1, &dummy, &dummy).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ConcatChannelsF32(1, -1, 1, 1, &dummy, &dummy, &dummy).code(),
            StatusCode::kInvalidArgument);
  EXPECT_DOUBLE_EQ(UpsampleNearest2xCost(1, 320, 32, 32).bytes_written,
                   16.0 * 320 * 32 * 32);
  EXPECT_DOUBLE_EQ(BroadcastChannelCost(2, 320, 4096, 320).bytes_read,
                   4.0 * (2 * 320 * 4096 + 640));
  EXPECT_DOUBLE_EQ(ConcatChannelsCost(1, 3, 5, 10).flops, 0);
}

}  // namespace
}  // namespace tpumesh::kernels
