// The SIMD paths and the TPUMESH_SIMD cap. Run as registered, the cap is
// whatever the environment sets (tests/CMakeLists.txt registers the kernel
// tests again under each lower path); these checks hold for any of them.
#include "kernels/cpu_path.h"

#include <blis.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "kernels/matmul.h"
#include "kernels/peak.h"

namespace tpumesh::kernels {
namespace {

TEST(CpuPathTest, NamesRoundTripAndUnknownNamesAreRefused) {
  for (CpuPath p : kCpuPaths) {
    StatusOr<CpuPath> back = ParseCpuPath(CpuPathName(p));
    ASSERT_TRUE(back.ok()) << CpuPathName(p);
    EXPECT_EQ(*back, p);
  }
  StatusOr<CpuPath> bad = ParseCpuPath("avx3");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "'avx3' is not a SIMD path (baseline, avx2, avx512, avx512bf16)");
}

// The active path is the environment's cap, or the host's where the cap is
// above it or unset; Highway, the kBf16 provider and BLIS follow it.
TEST(CpuPathTest, TheCapReachesHighwayBf16AndBlis) {
  ASSERT_TRUE(CpuPathStatus().ok()) << CpuPathStatus().ToString();
  bli_init();  // BLIS answers bli_arch_query_id only once initialised
  const char* env = std::getenv(kCpuPathVariable);
  CpuPath expected = HostCpuPath();
  if (env != nullptr && *env != '\0') {
    StatusOr<CpuPath> cap = ParseCpuPath(env);
    ASSERT_TRUE(cap.ok());
    if (*cap < expected) expected = *cap;
  }
  EXPECT_EQ(ActiveCpuPath(), expected);
  std::printf("[ paths    ] host %s, active %s, Highway %s, BLIS arch id %d\n",
              std::string(CpuPathName(HostCpuPath())).c_str(), std::string(CpuPathName(ActiveCpuPath())).c_str(),
              std::string(HighwayTargetName()).c_str(), static_cast<int>(bli_arch_query_id()));

  const int64_t targets = hwy::SupportedTargets();
  EXPECT_EQ((targets & (HWY_AVX3 | HWY_AVX3_DL)) != 0, CpuPathActive(CpuPath::kAvx512));
  EXPECT_EQ((targets & HWY_AVX2) != 0, CpuPathActive(CpuPath::kAvx2));
  EXPECT_EQ(Avx512Bf16Active(), ActiveCpuPath() == CpuPath::kAvx512Bf16);
  const StatusOr<Provider> bf16 = ResolveProvider(Provider::kBf16, Precision::kDefault);
  EXPECT_EQ(bf16.ok(), Avx512Bf16Active()) << bf16.status().ToString();
  if (!Avx512Bf16Active()) {
    EXPECT_NE(*ResolveProvider(Provider::kAuto, Precision::kDefault), Provider::kBf16);
  }
  // BLIS: below avx512 a capped process runs haswell's (avx2) or penryn's
  // (baseline) kernels, unless the user chose BLIS_ARCH_TYPE.
  if (ActiveCpuPath() < HostCpuPath() && ActiveCpuPath() < CpuPath::kAvx512) {
    EXPECT_EQ(bli_arch_query_id(), ActiveCpuPath() == CpuPath::kAvx2 ? BLIS_ARCH_HASWELL : BLIS_ARCH_PENRYN);
  }
}

TEST(PeakTest, EveryActivePathMeasuresAndTheOthersSayWhy) {
  for (CpuPath p : kCpuPaths) {
    StatusOr<double> flops = MeasurePeakFlops(p, 1, 0.01);
    if (CpuPathActive(p)) {
      ASSERT_TRUE(flops.ok()) << CpuPathName(p) << ": " << flops.status().ToString();
      EXPECT_GT(*flops, 0) << CpuPathName(p);
    } else {
      ASSERT_FALSE(flops.ok()) << CpuPathName(p);
      EXPECT_EQ(flops.status().code(), StatusCode::kUnimplemented);
      EXPECT_NE(flops.status().message().find("path " + std::string(CpuPathName(p)) + " is "), std::string::npos)
          << flops.status().message();
    }
  }
  StatusOr<PathPeak> best = MeasureBestPeak(1, 0.01);
  ASSERT_TRUE(best.ok());
  EXPECT_TRUE(CpuPathActive(best->path));
  EXPECT_GT(best->flops, 0);
  EXPECT_FALSE(MeasurePeakFlops(CpuPath::kBaseline, 0).ok());
}

TEST(PeakTest, ProbesAroundARunTakeTheHigherAndSayWhenApart) {
  const PathPeak p100{CpuPath::kAvx2, 100e9}, p95{CpuPath::kAvx2, 95e9}, p80{CpuPath::kBaseline, 80e9};
  const PeakProbes steady{p95, p100};
  EXPECT_EQ(steady.higher().flops, 100e9);
  EXPECT_FALSE(steady.apart());  // 5% apart
  const PeakProbes moved{p100, p80};
  EXPECT_EQ(moved.higher().flops, 100e9);
  EXPECT_EQ(moved.higher().path, CpuPath::kAvx2);
  EXPECT_TRUE(moved.apart());  // 20% apart
  EXPECT_NE(moved.Warning().find("from 100.0 GFLOP/s before the timed runs to 80.0 after"), std::string::npos)
      << moved.Warning();
  EXPECT_TRUE((PeakProbes{p80, p100}).apart());
}

}  // namespace
}  // namespace tpumesh::kernels
