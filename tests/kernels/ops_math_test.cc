// The shared Highway math of kernels/ops_math-inl.h that no public kernel
// exposes on its own: ExpNonPositive against std::exp in double on every
// compiled target (within 1 ulp on [-86, 0], exactly 0 below and at -inf),
// Exp2NonPositiveCoarse against std::exp2 (2.7e-6 relative on [-126, 0]).
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/kernels/ops_math_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "hwy/tests/hwy_gtest.h"
#include "kernels/ops_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tpumesh::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void TestExpNonPositive() {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  std::vector<float> in;
  // Every 2^-10 step of [-86, 0], the ends, values near the reduction's
  // boundaries (+-ln 2 / 2 and its multiples), tiny magnitudes and below
  // the cut-off.
  for (int i = 0; i <= 86 * 1024; ++i) in.push_back(-static_cast<float>(i) / 1024.0f);
  for (int k = 0; k <= 123; ++k) {  // (123.5 ln 2 = 85.6; 124.5 ln 2 is past -86)
    const float m = -(static_cast<float>(k) + 0.5f) * 0.693147182f;
    in.push_back(std::nextafter(m, 0.0f));
    in.push_back(m);
    in.push_back(std::nextafter(m, -1.0f));
  }
  for (float tiny : {-1e-30f, -1e-7f, -5.9604645e-8f, -0.0f}) in.push_back(tiny);
  const size_t real = in.size();
  const float kNegInf = -std::numeric_limits<float>::infinity();
  for (float below : {-86.01f, -87.0f, -100.0f, -1e30f, kNegInf}) in.push_back(below);
  in.resize((in.size() + lanes - 1) / lanes * lanes, 0.0f);
  std::vector<float> out(in.size());
  for (size_t i = 0; i < in.size(); i += lanes)
    hn::StoreU(ExpNonPositive(d, hn::LoadU(d, in.data() + i)), d, out.data() + i);
  double worst_ulp = 0;
  float worst_x = 0;
  for (size_t i = 0; i < real; ++i) {
    const double want = std::exp(static_cast<double>(in[i]));
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    const double err = std::fabs(out[i] - want) / ulp;
    if (err > worst_ulp) {
      worst_ulp = err;
      worst_x = in[i];
    }
  }
  EXPECT_LE(worst_ulp, 1.0) << hwy::TargetName(HWY_TARGET) << " at x = " << worst_x;
  for (size_t i = real; i < real + 5; ++i)
    EXPECT_EQ(out[i], 0.0f) << hwy::TargetName(HWY_TARGET) << " x = " << in[i];
  EXPECT_EQ(out[0], 1.0f);
}

void TestExp2NonPositiveCoarse() {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  std::vector<float> in;
  // Every 2^-12 step of [-126, 0], the rounding boundaries (k + 1/2) on
  // either side, tiny magnitudes, then below the range.
  for (int i = 0; i <= 126 * 4096; ++i) in.push_back(-static_cast<float>(i) / 4096.0f);
  for (int k = 0; k < 126; ++k) {
    const float m = -(static_cast<float>(k) + 0.5f);
    for (float v : {std::nextafter(m, 0.0f), m, std::nextafter(m, -1.0f)}) in.push_back(v);
  }
  for (float tiny : {-1e-30f, -1e-7f, -0.0f}) in.push_back(tiny);
  const size_t real = in.size();
  const float kNegInf = -std::numeric_limits<float>::infinity();
  for (float below : {-126.5f, -127.0f, -150.0f, -1e30f, kNegInf}) in.push_back(below);
  in.resize((in.size() + lanes - 1) / lanes * lanes, 0.0f);
  std::vector<float> out(in.size());
  for (size_t i = 0; i < in.size(); i += lanes)
    hn::StoreU(Exp2NonPositiveCoarse(d, hn::LoadU(d, in.data() + i)), d, out.data() + i);
  double worst = 0;
  float worst_y = 0;
  for (size_t i = 0; i < real; ++i) {
    const double want = std::exp2(static_cast<double>(in[i]));
    const double rel = std::fabs(out[i] - want) / want;
    if (rel > worst) {
      worst = rel;
      worst_y = in[i];
    }
  }
  EXPECT_LE(worst, 2.7e-6) << hwy::TargetName(HWY_TARGET) << " at y = " << worst_y;
  EXPECT_GT(worst, 1e-7) << "the polynomial is not the one documented";
  for (size_t i = real; i < real + 5; ++i) {
    EXPECT_GE(out[i], 0.0f) << hwy::TargetName(HWY_TARGET) << " y = " << in[i];
    EXPECT_LE(out[i], std::ldexp(1.0f, -126)) << hwy::TargetName(HWY_TARGET) << " y = " << in[i];
  }
}

}  // namespace tpumesh::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpumesh::kernels {
namespace {

HWY_BEFORE_TEST(OpsMathTest);
HWY_EXPORT_AND_TEST_P(OpsMathTest, TestExpNonPositive);
HWY_EXPORT_AND_TEST_P(OpsMathTest, TestExp2NonPositiveCoarse);

}  // namespace
}  // namespace tpumesh::kernels
#endif
