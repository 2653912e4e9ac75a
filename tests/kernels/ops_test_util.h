// Test helpers for the ops tests (tests/kernels/*_test.cc of conv2d, norm,
// softmax, activation, elementwise, timestep embedding, attention): a sweep
// over every Highway target compiled into the library and supported by this
// CPU, seeded random data, and an element-by-element comparison that prints
// index, got, want and the tolerance of the first failures.
//
// The target sweep uses hwy::SetSupportedTargetsForTest, which makes every
// HWY_DYNAMIC_DISPATCH pick the given target: the test calls the public entry
// point exactly as users do, and the dispatch is exercised too. (Highway's
// HWY_EXPORT_AND_TEST_P would instead compile the test itself once per target
// and call the per-target bodies directly, which needs them in a header; our
// bodies live in .cc files with one HWY_EXPORT table each.)
#ifndef TPUMESH_TESTS_KERNELS_OPS_TEST_UTIL_H_
#define TPUMESH_TESTS_KERNELS_OPS_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/targets.h"

namespace tpumesh::kernels::testing {

// f32 unit roundoff.
inline constexpr double kU = 1.0 / (1 << 24);

// Runs fn(target name) once per compiled and supported Highway target, with
// dispatch forced to it; restores normal dispatch afterwards.
inline void ForEachTarget(const std::function<void(const char* target)>& fn) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    SCOPED_TRACE(std::string("target ") + hwy::TargetName(t));
    fn(hwy::TargetName(t));
  }
  hwy::SetSupportedTargetsForTest(0);
}

inline std::vector<float> RandomVector(int64_t n, uint32_t seed,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Small integers in [-r, r]: products and sums of a few thousand of them are
// exact in f32, so a GEMM's result does not depend on its summation order.
inline std::vector<float> RandomIntVector(int64_t n, uint32_t seed, int r) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-r, r);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(dist(rng));
  return v;
}

// Expects |got[i] - want[i]| <= tol(i) for every i (NaN never passes); prints
// the first 8 failures as "what[i]: got G, want W, |diff| D > tol T". Returns
// the largest |diff| / tol seen (how much of the tolerance was used).
inline double ExpectAllNear(const std::vector<float>& got,
                            const std::vector<float>& want,
                            const std::function<double(size_t)>& tol,
                            const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  if (got.size() != want.size()) return 0;
  int failures = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double t = tol(i);
    if (!(diff <= t)) {
      if (++failures <= 8) {
        ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want "
                      << want[i] << ", |diff| " << diff << " > tol " << t;
      }
    } else if (t > 0) {
      worst = std::max(worst, diff / t);
    }
  }
  if (failures > 8)
    ADD_FAILURE() << what << ": " << failures
                  << " elements out of tolerance in all";
  return worst;
}

inline double ExpectAllNear(const std::vector<float>& got,
                            const std::vector<float>& want, double tol,
                            const std::string& what) {
  return ExpectAllNear(
      got, want, [tol](size_t) { return tol; }, what);
}

// Keeps the largest share of a tolerance used over a test and prints it at
// the end ("<name>: worst error 0.031 of tolerance"), so a tolerance far
// looser than needed shows in the log.
class WorstRatio {
 public:
  explicit WorstRatio(std::string name) : name_(std::move(name)) {}
  ~WorstRatio() {
    std::printf("[ tolerance] %s: worst error %.3g of tolerance\n",
                name_.c_str(), worst_);
  }
  void Add(double r) { worst_ = std::max(worst_, r); }

 private:
  std::string name_;
  double worst_ = 0;
};

// Bit-identical comparison (thread-count determinism).
inline void ExpectBitIdentical(const std::vector<float>& a,
                               const std::vector<float>& b,
                               const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && ++failures <= 8)
      ADD_FAILURE() << what << "[" << i << "]: " << a[i] << " vs " << b[i];
  }
}

}  // namespace tpumesh::kernels::testing

#endif  // TPUMESH_TESTS_KERNELS_OPS_TEST_UTIL_H_
