// The SIMD paths and the TPUMESH_SIMD cap. Run as registered, the cap is
// whatever the environment sets (tests/CMakeLists.txt registers the kernel
// tests again under each lower path); these checks hold for any of them.
#include "kernels/cpu_path.h"

#include <blis.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
  EXPECT_EQ(bad.status().message(), "'avx3' is not a SIMD path (baseline, avx2, avx512, avx512bf16, amx)");
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
  // AMX also needs the kernel's leave; refused, the process stays below it.
  if (expected == CpuPath::kAmx && ProcessAmxDecision().verdict != AmxVerdict::kActive) {
    expected = CpuPath::kAvx512Bf16;
  }
  EXPECT_EQ(ActiveCpuPath(), expected);
  std::printf("[ paths    ] host %s, active %s, Highway %s, BLIS arch id %d\n",
              std::string(CpuPathName(HostCpuPath())).c_str(), std::string(CpuPathName(ActiveCpuPath())).c_str(),
              std::string(HighwayTargetName()).c_str(), static_cast<int>(bli_arch_query_id()));

  const int64_t targets = hwy::SupportedTargets();
  EXPECT_EQ((targets & (HWY_AVX3 | HWY_AVX3_DL)) != 0, CpuPathActive(CpuPath::kAvx512));
  EXPECT_EQ((targets & HWY_AVX2) != 0, CpuPathActive(CpuPath::kAvx2));
  EXPECT_EQ(Avx512Bf16Active(), ActiveCpuPath() >= CpuPath::kAvx512Bf16);
  EXPECT_EQ(AmxActive(), ActiveCpuPath() == CpuPath::kAmx);
  const StatusOr<Provider> bf16 = ResolveProvider(Provider::kBf16, Precision::kDefault);
  EXPECT_EQ(bf16.ok(), Avx512Bf16Active()) << bf16.status().ToString();
  if (!Avx512Bf16Active()) {
    EXPECT_NE(*ResolveProvider(Provider::kAuto, Precision::kDefault), Provider::kBf16);
  }
  // BLIS: below avx512 a capped process runs haswell's (avx2) or penryn's
  // (baseline) kernels, unless the user chose BLIS_ARCH_TYPE.
  if (ActiveCpuPath() < HostCpuPath() && ActiveCpuPath() < CpuPath::kAvx512) {
    EXPECT_EQ(bli_arch_query_id(), ActiveCpuPath() == CpuPath::kAvx2 ? BLIS_ARCH_HASWELL : BLIS_ARCH_PENRYN);
    EXPECT_TRUE(ProcessBlisConfig().optimized);
  }
  // What tpumesh reports as BLIS's configuration is the one libblis runs.
  EXPECT_EQ(ProcessBlisConfig().name, bli_arch_string(bli_arch_query_id()));
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
  // The f32 peak: an f32 path (not the bf16 dot products above avx512).
  StatusOr<PathPeak> f32 = MeasureF32Peak(1, 0.01);
  ASSERT_TRUE(f32.ok());
  EXPECT_TRUE(CpuPathActive(f32->path));
  EXPECT_LE(f32->path, CpuPath::kAvx512);
  EXPECT_GT(f32->flops, 0);
  EXPECT_FALSE(MeasurePeakFlops(CpuPath::kBaseline, 0).ok());
}

// The AMX decision on injected facts, so every branch is tested on any host:
// which verdict and note, and whether the kernel is asked at all.
TEST(AmxDecisionTest, EachMissingConditionIsNamedAndTheKernelAskedOnlyWhenAllElseHolds) {
  const AmxFacts all{.amx_bf16 = true, .amx_tile = true, .xcr0_tile_state = true, .avx512bf16 = true};
  int asked = 0;
  auto grant = [&] { ++asked; return 0; };
  auto refuse = [&] { ++asked; return EPERM; };

  AmxDecision d = DecideAmx(AmxFacts{}, true, grant);
  EXPECT_EQ(d.verdict, AmxVerdict::kNotOnCpu);
  EXPECT_EQ(d.note, "not on this CPU (CPUID lacks amx_bf16, amx_tile)");
  EXPECT_FALSE(d.on_host());
  AmxFacts no_bf16 = all;
  no_bf16.amx_bf16 = false;
  EXPECT_EQ(DecideAmx(no_bf16, true, grant).note, "not on this CPU (CPUID lacks amx_bf16)");
  AmxFacts no_tile = all;
  no_tile.amx_tile = false;
  EXPECT_EQ(DecideAmx(no_tile, true, grant).note, "not on this CPU (CPUID lacks amx_tile)");

  AmxFacts no_os = all;
  no_os.xcr0_tile_state = false;
  d = DecideAmx(no_os, true, grant);
  EXPECT_EQ(d.verdict, AmxVerdict::kNoOsState);
  EXPECT_EQ(d.note, "not enabled by the OS (XCR0 lacks the tile state, bits 17-18)");
  EXPECT_FALSE(d.on_host());

  AmxFacts no_below = all;
  no_below.avx512bf16 = false;
  d = DecideAmx(no_below, true, grant);
  EXPECT_EQ(d.verdict, AmxVerdict::kNoAvx512Bf16);
  EXPECT_FALSE(d.on_host());
  EXPECT_EQ(asked, 0) << "the kernel was asked for tiles the CPU or OS lacks";

  d = DecideAmx(all, /*cap_allows=*/false, grant);
  EXPECT_EQ(d.verdict, AmxVerdict::kOffByCap);
  EXPECT_EQ(d.note, "off (TPUMESH_SIMD)");
  EXPECT_TRUE(d.on_host());
  EXPECT_EQ(asked, 0) << "a capped process asked the kernel for AMX";

  d = DecideAmx(all, true, refuse);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(d.verdict, AmxVerdict::kRefusedByKernel);
  EXPECT_EQ(d.note, "refused by the kernel: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): " +
                        std::string(std::strerror(EPERM)));
  EXPECT_TRUE(d.on_host());

  d = DecideAmx(all, true, grant);
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(d.verdict, AmxVerdict::kActive);
  EXPECT_EQ(d.note, "");
  EXPECT_TRUE(d.on_host());
}

// This process's decision follows this CPU's facts, and the host path is amx
// exactly where the CPU and OS have it.
TEST(AmxDecisionTest, TheProcessDecisionFollowsThisHost) {
  const AmxFacts facts = ReadAmxFacts();
  const AmxDecision& d = ProcessAmxDecision();
  std::printf("[ amx      ] CPUID amx_bf16 %d amx_tile %d, XCR0 tiles %d: %s\n", facts.amx_bf16, facts.amx_tile,
              facts.xcr0_tile_state, d.verdict == AmxVerdict::kActive ? "active" : d.note.c_str());
  EXPECT_EQ(d.on_host(), HostCpuPath() == CpuPath::kAmx);
  if (!facts.amx_bf16 || !facts.amx_tile) {
    EXPECT_EQ(d.verdict, AmxVerdict::kNotOnCpu);
  }
  EXPECT_EQ(AmxActive(), d.verdict == AmxVerdict::kActive);
}

// The tdpbf16ps loop itself: only where this process may run AMX; elsewhere
// the skip names what is missing.
TEST(AmxPeakTest, TheTileLoopMeasuresWhereTheHostHasAmx) {
  if (!AmxActive()) GTEST_SKIP() << "AMX " << ProcessAmxDecision().note;
  StatusOr<double> amx = MeasurePeakFlops(CpuPath::kAmx, 1, 0.01);
  ASSERT_TRUE(amx.ok()) << amx.status().ToString();
  EXPECT_GT(*amx, 0);
  StatusOr<PathPeak> best = MeasureBestPeak(1, 0.01);
  ASSERT_TRUE(best.ok());
  std::printf("[ amx      ] one thread: %.1f GFLOP/s; best path %s\n", *amx / 1e9,
              std::string(CpuPathName(best->path)).c_str());
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
