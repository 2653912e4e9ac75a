// bf16 rounding, bit for bit: F32ToBf16 (kernels/bf16.h), the array
// conversions, and the Highway per-target twin (kernels/bf16-inl.h) on every
// compiled target, against an independent reference that picks the nearest
// bf16 by comparing distances in double (ties to the even mantissa).
#include "kernels/bf16.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/kernels/bf16_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "hwy/tests/hwy_gtest.h"
#include "kernels/bf16-inl.h"

#ifndef TPUMESH_TESTS_KERNELS_BF16_TEST_ONCE_
#define TPUMESH_TESTS_KERNELS_BF16_TEST_ONCE_
namespace tpumesh::kernels::bf16_test {

// The nearest bf16 by distance, ties to even; independent of the bit trick.
inline uint16_t ReferenceBf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7fc0u);
  if (std::isinf(f)) return static_cast<uint16_t>(u >> 16);
  const uint16_t down = static_cast<uint16_t>(u >> 16);  // toward zero
  const uint16_t up = static_cast<uint16_t>(down + 1);   // away from zero (may become Inf)
  const double x = std::fabs(static_cast<double>(f));
  const double d_down = x - std::fabs(static_cast<double>(std::bit_cast<float>(uint32_t{down} << 16)));
  // Rounding works as if the exponent were unbounded (IEEE 754): above the
  // largest bf16 the next value is 2^128, which then overflows to Inf.
  const double up_value = (up & 0x7fffu) == 0x7f80u
                              ? std::ldexp(1.0, 128)
                              : std::fabs(static_cast<double>(std::bit_cast<float>(uint32_t{up} << 16)));
  const double d_up = up_value - x;
  if (d_down < d_up) return down;
  if (d_up < d_down) return up;
  return (down & 1) ? up : down;  // tie: even mantissa
}

// Every bf16 value times low-half patterns that cover: exact (0), just
// above/below the tie (0x7fff, 0x8001), the tie (0x8000), the largest
// (0xffff) and a few in between; NaN payloads, Inf, denormals, zeros.
inline std::vector<float> InterestingFloats() {
  std::vector<float> v;
  const uint16_t lows[] = {0x0000, 0x0001, 0x3fff, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff};
  for (uint32_t hi = 0; hi < 0x10000; ++hi)
    for (uint16_t lo : lows) v.push_back(std::bit_cast<float>((hi << 16) | lo));
  std::mt19937 rng(1);
  for (int i = 0; i < 100000; ++i) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  return v;
}

}  // namespace tpumesh::kernels::bf16_test
#endif

// ------------------------------------------------------------ per target
HWY_BEFORE_NAMESPACE();
namespace tpumesh::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void TestRoundToBf16Vector() {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  std::vector<float> in = bf16_test::InterestingFloats();
  in.resize((in.size() + lanes - 1) / lanes * lanes, 1.0f);
  std::vector<float> out(in.size());
  for (size_t i = 0; i < in.size(); i += lanes) {
    hn::StoreU(RoundToBf16(d, hn::LoadU(d, in.data() + i)), d, out.data() + i);
  }
  int failures = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint32_t got = std::bit_cast<uint32_t>(out[i]);
    const uint32_t want = uint32_t{bf16_test::ReferenceBf16(in[i])} << 16;
    if (got != want && ++failures <= 5) {
      ADD_FAILURE() << hwy::TargetName(HWY_TARGET) << " input[" << i << "] = 0x" << std::hex
                    << std::bit_cast<uint32_t>(in[i]) << ": got 0x" << got << ", want 0x" << want;
    }
  }
  EXPECT_EQ(failures, 0);
  // bf16 bits widened back are exact.
  std::vector<uint16_t> bits(lanes);
  std::vector<float> wide(lanes);
  for (uint32_t h = 0; h < 0x10000; h += lanes) {
    for (size_t j = 0; j < lanes; ++j) bits[j] = static_cast<uint16_t>(h + j);
    hn::StoreU(Bf16BitsToF32(d, bits.data()), d, wide.data());
    for (size_t j = 0; j < lanes; ++j) {
      ASSERT_EQ(std::bit_cast<uint32_t>(wide[j]), uint32_t{bits[j]} << 16);
    }
  }
}

}  // namespace tpumesh::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpumesh::kernels {
namespace {

HWY_BEFORE_TEST(Bf16HighwayTest);
HWY_EXPORT_AND_TEST_P(Bf16HighwayTest, TestRoundToBf16Vector);

using bf16_test::InterestingFloats;
using bf16_test::ReferenceBf16;

TEST(Bf16Test, ScalarRoundingIsNearestEvenBitForBit) {
  int failures = 0;
  for (float f : InterestingFloats()) {
    const uint16_t got = F32ToBf16(f).bits, want = ReferenceBf16(f);
    if (got != want && ++failures <= 5) {
      ADD_FAILURE() << "F32ToBf16(0x" << std::hex << std::bit_cast<uint32_t>(f) << "): got 0x" << got
                    << ", want 0x" << want;
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(Bf16Test, TiesGoToEven) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: even (1.0) wins.
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(F32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  EXPECT_EQ(F32ToBf16(-(1.0f + std::ldexp(1.0f, -8))).bits, 0xbf80);
  // Just above the tie rounds up.
  EXPECT_EQ(F32ToBf16(std::bit_cast<float>(0x3f808001u)).bits, 0x3f81);
  // A denormal tie: 0x00008000 is halfway between 0 and the smallest bf16 denormal.
  EXPECT_EQ(F32ToBf16(std::bit_cast<float>(0x00008000u)).bits, 0x0000);
  EXPECT_EQ(F32ToBf16(std::bit_cast<float>(0x00018000u)).bits, 0x0002);
}

TEST(Bf16Test, InfNanAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(F32ToBf16(inf).bits, 0x7f80);
  EXPECT_EQ(F32ToBf16(-inf).bits, 0xff80);
  EXPECT_EQ(F32ToBf16(std::numeric_limits<float>::quiet_NaN()).bits, 0x7fc0);
  // A signalling NaN whose payload lies only in the low half stays NaN (not Inf).
  EXPECT_EQ(F32ToBf16(std::bit_cast<float>(0x7f800001u)).bits, 0x7fc0);
  EXPECT_EQ(F32ToBf16(std::bit_cast<float>(0xff800001u)).bits, 0xffc0);
  // FLT_MAX rounds up to Inf (it is above the largest bf16 plus half an ulp);
  // the tie exactly halfway to 2^128 goes to the even neighbour, 2^128 = Inf.
  EXPECT_EQ(F32ToBf16(std::numeric_limits<float>::max()).bits, 0x7f80);
  EXPECT_EQ(F32ToBf16(std::bit_cast<float>(0x7f7f8000u)).bits, 0x7f80);
  EXPECT_EQ(F32ToBf16(std::bit_cast<float>(0x7f7f7fffu)).bits, 0x7f7f);
  // The largest bf16 is exact.
  EXPECT_EQ(F32ToBf16(std::bit_cast<float>(0x7f7f0000u)).bits, 0x7f7f);
  EXPECT_EQ(F32ToBf16(-0.0f).bits, 0x8000);
  EXPECT_TRUE(std::isnan(Bf16ToF32(bf16{0x7fc0})));
  EXPECT_EQ(Bf16ToF32(bf16{0xff80}), -inf);
}

TEST(Bf16Test, ArrayConversionsMatchScalar) {
  const std::vector<float> in = InterestingFloats();
  std::vector<bf16> out(in.size());
  F32ToBf16(in.data(), out.data(), in.size());
  std::vector<float> back(in.size());
  Bf16ToF32(out.data(), back.data(), out.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(out[i].bits, ReferenceBf16(in[i])) << "element " << i;
    ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), uint32_t{out[i].bits} << 16) << "element " << i;
  }
}

}  // namespace
}  // namespace tpumesh::kernels
#endif  // HWY_ONCE
