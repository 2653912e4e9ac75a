// JAX's threefry PRNG, bit for bit: Random123 known answers, the split values
// the JAX docs show, and every case of tests/data/prng_ref.json (made by JAX
// itself, scripts/refdata/make_prng_ref.py), including uniform and normal for
// all 2^23 distinct random words.
#include "mesh/prng.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tpumesh::mesh {
namespace {

using Json = nlohmann::json;

const Json& Ref() {
  static const Json* ref = [] {
    std::ifstream in(std::string(TPUMESH_TEST_DATA_DIR) + "/prng_ref.json");
    auto* j = new Json(in ? Json::parse(in) : Json());
    return j;
  }();
  return *ref;
}

std::vector<uint32_t> Flat(const std::vector<PrngKey>& keys) {
  std::vector<uint32_t> v;
  for (const auto& k : keys) v.insert(v.end(), k.begin(), k.end());
  return v;
}

std::vector<uint32_t> FloatBits(const std::vector<float>& f) {
  std::vector<uint32_t> v(f.size());
  for (size_t i = 0; i < f.size(); ++i) v[i] = std::bit_cast<uint32_t>(f[i]);
  return v;
}

// Bit-exact comparison; on failure names the first differing index with got
// and want (as floats too when `floats`), and how many differ.
::testing::AssertionResult SameBits(const std::vector<uint32_t>& got,
                                    const std::vector<uint32_t>& want,
                                    bool floats = false) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << "size " << got.size() << ", want " << want.size();
  size_t first = got.size(), differ = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (differ++ == 0) first = i;
  }
  if (differ == 0) return ::testing::AssertionSuccess();
  auto r = ::testing::AssertionFailure();
  r << differ << " of " << got.size() << " differ; first at index " << first
    << ": got " << got[first] << ", want " << want[first];
  if (floats)
    r << " (" << std::bit_cast<float>(got[first]) << " vs "
      << std::bit_cast<float>(want[first]) << ")";
  return r;
}

std::vector<int64_t> ParseShape(const std::string& s) {
  std::vector<int64_t> shape;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, 'x')) shape.push_back(std::stoll(part));
  return shape;
}

TEST(ThreefryTest, Random123KnownAnswers) {
  struct Kat {
    PrngKey key;
    std::array<uint32_t, 2> ctr, want;
  };
  const Kat kats[] = {
      {{0, 0}, {0, 0}, {0x6b200159u, 0x99ba4efeu}},
      {{~0u, ~0u}, {~0u, ~0u}, {0x1cb996fcu, 0xbb002be7u}},
      {{0x13198a2eu, 0x03707344u},
       {0x243f6a88u, 0x85a308d3u},
       {0xc4923a9cu, 0x483df7a0u}},
  };
  for (const Kat& k : kats) {
    uint32_t o0, o1;
    Threefry2x32(k.key, &k.ctr[0], &k.ctr[1], &o0, &o1, 1);
    EXPECT_EQ(o0, k.want[0]);
    EXPECT_EQ(o1, k.want[1]);
  }
  // The same vectors through JAX's threefry_2x32 (checked by the script).
  ASSERT_EQ(Ref()["threefry_kat"].size(), 3u);
  for (const auto& c : Ref()["threefry_kat"]) {
    const auto key = c["key"].get<std::vector<uint32_t>>();
    const auto ctr = c["ctr"].get<std::vector<uint32_t>>();
    std::vector<uint32_t> got(2);
    Threefry2x32({key[0], key[1]}, &ctr[0], &ctr[1], &got[0], &got[1], 1);
    EXPECT_TRUE(SameBits(got, c["out"].get<std::vector<uint32_t>>()));
  }
}

TEST(ThreefryTest, VectorEqualsOneByOne) {
  const PrngKey key = {0x12345678u, 0x9abcdef0u};
  std::vector<uint32_t> x0(33), x1(33), o0(33), o1(33);
  for (uint32_t i = 0; i < 33; ++i) x0[i] = i * 7919u, x1[i] = ~i;
  Threefry2x32(key, x0.data(), x1.data(), o0.data(), o1.data(), 33);
  for (size_t i = 0; i < 33; ++i) {
    uint32_t a, b;
    Threefry2x32(key, &x0[i], &x1[i], &a, &b, 1);
    EXPECT_EQ(o0[i], a) << i;
    EXPECT_EQ(o1[i], b) << i;
  }
}

TEST(KeyTest, FromSeed) {
  EXPECT_EQ(KeyFromSeed(0), (PrngKey{0, 0}));
  EXPECT_EQ(KeyFromSeed(42), (PrngKey{0, 42}));
  EXPECT_EQ(KeyFromSeed(0x100000007ull), (PrngKey{1, 7}));
  EXPECT_EQ(KeyFromSeed(static_cast<uint64_t>(int64_t{-1})),
            (PrngKey{0xffffffffu, 0xffffffffu}));
  EXPECT_EQ(KeyFromSeedX32(0x100000007ll), (PrngKey{0, 7}));
  EXPECT_EQ(KeyFromSeedX32(-1), (PrngKey{0, 0xffffffffu}));
  // key(seed) as JAX gives it with jax_enable_x64 on and off.
  ASSERT_GE(Ref()["seed_keys"].size(), 9u);
  for (const auto& c : Ref()["seed_keys"]) {
    const std::string s = c["seed"].get<std::string>();
    const int64_t seed = std::stoll(s);
    const PrngKey k64 = KeyFromSeed(static_cast<uint64_t>(seed));
    const PrngKey k32 = KeyFromSeedX32(seed);
    EXPECT_TRUE(
        SameBits({k64[0], k64[1]}, c["x64"].get<std::vector<uint32_t>>()))
        << "x64 seed " << s;
    EXPECT_TRUE(
        SameBits({k32[0], k32[1]}, c["x32"].get<std::vector<uint32_t>>()))
        << "x32 seed " << s;
  }
}

TEST(SplitTest, JaxDocumentedValues) {
  const PrngKey k = KeyFromSeed(0);
  EXPECT_EQ(Flat(Split(k, 2, PrngImpl::kOriginal)),
            (std::vector<uint32_t>{4146024105u, 967050713u, 2718843009u,
                                   1272950319u}));
  EXPECT_EQ(Flat(Split(k, 2, PrngImpl::kPartitionable)),
            (std::vector<uint32_t>{1797259609u, 2579123966u, 928981903u,
                                   3453687069u}));
}

TEST(SplitTest, CheckedRejectsNegativeNum) {
  const PrngKey k = KeyFromSeed(0);
  auto bad = SplitChecked(k, -1, PrngImpl::kOriginal);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("-1"), std::string::npos);
  EXPECT_TRUE(Split(k, -3, PrngImpl::kPartitionable).empty());
  auto none = SplitChecked(k, 0, PrngImpl::kOriginal);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto three = SplitChecked(k, 3, PrngImpl::kPartitionable);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(*three, Split(k, 3, PrngImpl::kPartitionable));
}

TEST(SplitTest, EightDeviceKeysDifferAndAreDeterministic) {
  for (PrngImpl impl : {PrngImpl::kOriginal, PrngImpl::kPartitionable}) {
    const auto keys = Split(KeyFromSeed(42), 8, impl);
    ASSERT_EQ(keys.size(), 8u);
    for (int i = 0; i < 8; ++i)
      for (int j = i + 1; j < 8; ++j) EXPECT_NE(keys[i], keys[j]) << i << j;
    EXPECT_EQ(keys, Split(KeyFromSeed(42), 8, impl));
  }
  EXPECT_NE(Split(KeyFromSeed(42), 8, PrngImpl::kOriginal),
            Split(KeyFromSeed(42), 8, PrngImpl::kPartitionable));
}

TEST(FoldInTest, SameInBothImplementations) {
  const PrngKey k = KeyFromSeed(7);
  for (uint32_t d : {0u, 1u, 0xffffffffu})
    EXPECT_EQ(FoldIn(k, d, PrngImpl::kOriginal),
              FoldIn(k, d, PrngImpl::kPartitionable));
  // fold_in(key, d) is threefry(key, (0, d)): element d of a partitionable
  // split.
  EXPECT_EQ(FoldIn(k, 5), Split(k, 6, PrngImpl::kPartitionable)[5]);
}

TEST(CheckRandomShapeTest, NamesTheProblem) {
  const std::vector<int64_t> ok = {1, 4, 64, 64}, neg = {2, -1}, empty = {0, 5},
                             big = {1 << 16, 1 << 16},
                             huge = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_TRUE(CheckRandomShape(ok, PrngImpl::kOriginal).ok());
  EXPECT_TRUE(CheckRandomShape({}, PrngImpl::kOriginal).ok());  // scalar
  EXPECT_TRUE(CheckRandomShape(empty, PrngImpl::kOriginal).ok());
  EXPECT_FALSE(
      CheckRandomShape(std::vector<int64_t>{0, -1}, PrngImpl::kOriginal).ok());
  const Status s = CheckRandomShape(neg, PrngImpl::kPartitionable);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dimension 1"), std::string::npos) << s.message();
  EXPECT_EQ(CheckRandomShape(big, PrngImpl::kOriginal).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckRandomShape(big, PrngImpl::kPartitionable).ok());
  EXPECT_EQ(CheckRandomShape(huge, PrngImpl::kPartitionable).code(),
            StatusCode::kInvalidArgument);
}

TEST(JaxReferenceTest, EveryCaseMatchesJax) {
  ASSERT_FALSE(Ref().is_null()) << "tests/data/prng_ref.json missing";
  int cases = 0;
  int64_t values = 0;
  for (const auto& [mode, impl] :
       {std::pair{"original", PrngImpl::kOriginal},
        std::pair{"partitionable", PrngImpl::kPartitionable}}) {
    ASSERT_EQ(Ref()[mode].size(), 5u) << mode;
    for (const auto& c : Ref()[mode]) {
      const std::string where =
          std::string(mode) + " seed " + c["seed"].get<std::string>();
      const PrngKey key =
          KeyFromSeed(std::stoull(c["seed"].get<std::string>()));
      auto check = [&](const std::vector<uint32_t>& got, const Json& want,
                       const std::string& what, bool floats) {
        EXPECT_TRUE(SameBits(got, want.get<std::vector<uint32_t>>(), floats))
            << where << " " << what;
        ++cases;
        values += static_cast<int64_t>(got.size());
      };
      check({key[0], key[1]}, c["key"], "key", false);
      for (const auto& [n, want] : c["split"].items())
        check(Flat(Split(key, std::stoi(n), impl)), want, "split " + n, false);
      for (const auto& [d, want] : c["fold_in"].items()) {
        const PrngKey f =
            FoldIn(key, static_cast<uint32_t>(std::stoul(d)), impl);
        check({f[0], f[1]}, want, "fold_in " + d, false);
      }
      for (const auto& [s, want] : c["bits"].items()) {
        std::vector<uint32_t> got(want.size());
        RandomBits32(key, impl, ParseShape(s), got.data());
        check(got, want, "bits " + s, false);
      }
      for (const auto& [s, want] : c["uniform"].items()) {
        std::vector<float> got(want.size());
        Uniform(key, impl, ParseShape(s), 0.0f, 1.0f, got.data());
        check(FloatBits(got), want, "uniform " + s, true);
      }
      for (const auto& [s, want] : c["normal"].items()) {
        std::vector<float> got(want.size());
        Normal(key, impl, ParseShape(s), got.data());
        check(FloatBits(got), want, "normal " + s, true);
      }
      std::vector<float> u(9);
      const std::vector<int64_t> nine = {9};
      Uniform(key, impl, nine, -2.0f, 3.0f, u.data());
      check(FloatBits(u), c["uniform_m2_3"], "uniform(-2, 3)", true);
    }
  }
  // Per mode and seed: key, 3 splits, 3 fold_ins, 3 bits, 3 uniform,
  // 3 normal, uniform(-2, 3).
  EXPECT_EQ(cases, 2 * 5 * 17);
  std::printf("%d cases, %lld values, all bit-exact\n", cases,
              static_cast<long long>(values));
}

TEST(FromBitsTest, ChosenWordsMatchJax) {
  const Json& fb = Ref()["from_bits"];
  const auto words = fb["words"].get<std::vector<uint32_t>>();
  ASSERT_GE(words.size(), 100u);
  std::vector<uint32_t> normal, uniform;
  for (uint32_t w : words) {
    normal.push_back(std::bit_cast<uint32_t>(NormalFromBits(w)));
    uniform.push_back(std::bit_cast<uint32_t>(UniformFromBits(w, -2, 3)));
  }
  EXPECT_TRUE(SameBits(normal, fb["normal"].get<std::vector<uint32_t>>(), true))
      << "normal";
  EXPECT_TRUE(
      SameBits(uniform, fb["uniform_m2_3"].get<std::vector<uint32_t>>(), true))
      << "uniform(-2, 3)";
}

// splitmix64's finalizer; the script digests with the same function.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform and normal only see bits >> 9: all 2^23 words, compared with JAX
// through one digest per block of consecutive words.
TEST(FromBitsTest, EveryWordMatchesJax) {
  const Json& fb = Ref()["from_bits"];
  const int blocks = fb["num_blocks"].get<int>();
  ASSERT_GT(blocks, 0);
  constexpr uint32_t kWords = uint32_t{1} << 23;
  const uint32_t per_block = kWords / static_cast<uint32_t>(blocks);
  for (const char* what : {"normal", "uniform_m2_3"}) {
    const auto want =
        fb[std::string(what) + "_digests"].get<std::vector<std::string>>();
    ASSERT_EQ(want.size(), static_cast<size_t>(blocks));
    for (int b = 0; b < blocks; ++b) {
      uint64_t sum = 0;
      for (uint32_t m = b * per_block; m < (b + 1) * per_block; ++m) {
        const float f = std::string(what) == "normal"
                            ? NormalFromBits(m << 9)
                            : UniformFromBits(m << 9, -2.0f, 3.0f);
        sum += Mix64((uint64_t{m} << 32) | std::bit_cast<uint32_t>(f));
      }
      char got[17];
      std::snprintf(got, sizeof(got), "%016llx",
                    static_cast<unsigned long long>(sum));
      EXPECT_EQ(got, want[b]) << what << " block " << b << ": words (m << 9)"
                              << " for m in [" << b * per_block << ", "
                              << (b + 1) * per_block << ")";
    }
  }
}

TEST(NormalTest, LargeSampleIsStandard) {
  const std::vector<int64_t> shape = {200000};
  std::vector<float> v(shape[0]);
  Normal(KeyFromSeed(7), PrngImpl::kPartitionable, shape, v.data());
  double s = 0, s2 = 0;
  for (float x : v) {
    ASSERT_TRUE(std::isfinite(x));
    s += x;
    s2 += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(v.size());
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(s2 / n - (s / n) * (s / n)), 1.0, 0.01);
}

TEST(ErfInvTest, EdgesAndSymmetry) {
  EXPECT_TRUE(std::isinf(ErfInvF32(1.0f)) && ErfInvF32(1.0f) > 0);
  EXPECT_TRUE(std::isinf(ErfInvF32(-1.0f)) && ErfInvF32(-1.0f) < 0);
  EXPECT_EQ(ErfInvF32(0.0f), 0.0f);
  for (float x : {0.1f, 0.5f, 0.9f, 0.999f})
    EXPECT_EQ(ErfInvF32(-x), -ErfInvF32(x)) << x;
  EXPECT_NEAR(ErfInvF32(0.5f), 0.476936276, 1e-6);
  EXPECT_NEAR(std::erf(ErfInvF32(0.999f)), 0.999, 1e-6);
}

}  // namespace
}  // namespace tpumesh::mesh
