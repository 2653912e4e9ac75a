#include "kernels/peak.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

// The loops as inline assembly, so that they are the same whatever the build
// does to C++ (at -O0 or under ASan the accumulators of a C++ loop live on
// the stack, and the probe would time stores instead of arithmetic): zero the
// accumulators, then `iterations` times one instruction into each from the
// inputs %1 and %2 (small normal numbers: the sums stay finite and normal,
// and are never read). The assembler takes every instruction whatever the
// function's target; a loop only runs where its path is active.
#define TPUMESH_PEAK_12(M, ...)                                                                         \
  M(__VA_ARGS__, 0) M(__VA_ARGS__, 1) M(__VA_ARGS__, 2) M(__VA_ARGS__, 3) M(__VA_ARGS__, 4)             \
  M(__VA_ARGS__, 5) M(__VA_ARGS__, 6) M(__VA_ARGS__, 7) M(__VA_ARGS__, 8) M(__VA_ARGS__, 9)             \
  M(__VA_ARGS__, 10) M(__VA_ARGS__, 11)
#define TPUMESH_PEAK_16(M, ...) \
  TPUMESH_PEAK_12(M, __VA_ARGS__) M(__VA_ARGS__, 12) M(__VA_ARGS__, 13) M(__VA_ARGS__, 14) M(__VA_ARGS__, 15)
// SSE two-operand ops, VEX/EVEX three-operand ops, and the zeroing of each.
#define TPUMESH_PEAK_SSE_ZERO(reg, r) "xorps %%" reg #r ", %%" reg #r "\n\t"
#define TPUMESH_PEAK_VEX_ZERO(reg, r) "vpxor %%" reg #r ", %%" reg #r ", %%" reg #r "\n\t"
#define TPUMESH_PEAK_EVEX_ZERO(reg, r) "vpxord %%" reg #r ", %%" reg #r ", %%" reg #r "\n\t"
#define TPUMESH_PEAK_OP3(op, reg, r) op " %2, %1, %%" reg #r "\n\t"
#define TPUMESH_PEAK_LOOP(zero, body, clobbers)                                                        \
  asm volatile(zero "1:\n\t" body "dec %0\n\t"                                                          \
                    "jnz 1b\n\t"                                                                        \
               : "+r"(iterations)                                                                       \
               : "x"(a), "x"(b)                                                                         \
               : clobbers)
#define TPUMESH_PEAK_CLOBBERS_12 \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "cc"
#define TPUMESH_PEAK_CLOBBERS_16 TPUMESH_PEAK_CLOBBERS_12, "xmm12", "xmm13", "xmm14", "xmm15"

// The SSE body: mulps into the even accumulators, addps into the odd ones.
#define TPUMESH_PEAK_SSE_BODY                                                                       \
  "mulps %1, %%xmm0\n\taddps %2, %%xmm1\n\tmulps %1, %%xmm2\n\taddps %2, %%xmm3\n\t"               \
  "mulps %1, %%xmm4\n\taddps %2, %%xmm5\n\tmulps %1, %%xmm6\n\taddps %2, %%xmm7\n\t"               \
  "mulps %1, %%xmm8\n\taddps %2, %%xmm9\n\tmulps %1, %%xmm10\n\taddps %2, %%xmm11\n\t"

namespace tpumesh::kernels {
namespace {

constexpr int kAccumulators[] = {12, 12, 16, 16, 4};  // per CpuPath

float LoopBaseline(int64_t iterations) {
  if (iterations < 1) return 0.0f;
  const __m128 a = _mm_set1_ps(1.0f), b = _mm_set1_ps(1e-8f);
  TPUMESH_PEAK_LOOP(TPUMESH_PEAK_12(TPUMESH_PEAK_SSE_ZERO, "xmm"), TPUMESH_PEAK_SSE_BODY, TPUMESH_PEAK_CLOBBERS_12);
  return 0.0f;
}

__attribute__((target("avx2,fma"))) float LoopAvx2(int64_t iterations) {
  if (iterations < 1) return 0.0f;
  const __m256 a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(1e-8f);
  TPUMESH_PEAK_LOOP(TPUMESH_PEAK_12(TPUMESH_PEAK_VEX_ZERO, "ymm"),
                    TPUMESH_PEAK_12(TPUMESH_PEAK_OP3, "vfmadd231ps", "ymm"), TPUMESH_PEAK_CLOBBERS_12);
  return 0.0f;
}

// kAvx512: f32 FMAs; kAvx512Bf16: vdpbf16ps on bf16 1.0 and ~6e-8 in every
// 16-bit half. The inputs sit in zmm16..31 ("v"), the accumulators in
// zmm0..15.
template <bool kBf16>
__attribute__((target("avx512f"))) float LoopAvx512(int64_t iterations) {
  if (iterations < 1) return 0.0f;
  const __m512i a = _mm512_set1_epi32(kBf16 ? 0x3f803f80 : 0x3f800000);
  const __m512i b = _mm512_set1_epi32(kBf16 ? 0x33803380 : 0x322bcc77);
#define TPUMESH_PEAK_LOOP_512(op)                                                                        \
  asm volatile(TPUMESH_PEAK_16(TPUMESH_PEAK_EVEX_ZERO, "zmm") "1:\n\t" TPUMESH_PEAK_16(TPUMESH_PEAK_OP3, op, \
                                                                                      "zmm")           \
               "dec %0\n\t"                                                                             \
               "jnz 1b\n\t"                                                                             \
               : "+r"(iterations)                                                                       \
               : "v"(a), "v"(b)                                                                         \
               : TPUMESH_PEAK_CLOBBERS_16)
  if constexpr (kBf16) {
    TPUMESH_PEAK_LOOP_512("vdpbf16ps");
  } else {
    TPUMESH_PEAK_LOOP_512("vfmadd231ps");
  }
#undef TPUMESH_PEAK_LOOP_512
  return 0.0f;
}

// kAmx: tdpbf16ps into four 16x16 f32 accumulator tiles (tmm0..3) from two
// A tiles (tmm4, 5: 16 rows x 32 bf16, all 1.0) and two B tiles (tmm6, 7:
// 16 rows of 16 bf16 pairs, ~6e-8), each pairing once per iteration; the
// inputs stay in their tiles. The tile configuration is per thread, so every
// thread loads its own and releases the tiles at the end (back to the init
// state, which keeps its context switches cheap). Inline assembly like the
// other loops, and not GCC 12's _tile_* intrinsics: its _tile_loadconfig
// tells the compiler it reads 8 bytes of the 64-byte configuration, which
// let the rows and column widths be dropped as dead stores, and its
// _tile_loadd reads memory the compiler is not told about. The target
// attribute keeps AMX to this function: nothing else in the binary is
// compiled for it, and it runs only where the amx path is active.
struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

__attribute__((target("amx-tile,amx-bf16"))) float LoopAmx(int64_t iterations) {
  if (iterations < 1) return 0.0f;
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  struct alignas(64) Tile {
    uint16_t v[16 * 32];
  } a, b;
  for (int i = 0; i < 16 * 32; ++i) {
    a.v[i] = 0x3f80;
    b.v[i] = 0x3380;
  }
  const int64_t stride = 64;  // bytes per tile row
  asm volatile("ldtilecfg %0" : : "m"(config));
  asm volatile(
      "tilezero %%tmm0\n\t"
      "tilezero %%tmm1\n\t"
      "tilezero %%tmm2\n\t"
      "tilezero %%tmm3\n\t"
      "tileloadd (%0,%2,1), %%tmm4\n\t"
      "tileloadd (%0,%2,1), %%tmm5\n\t"
      "tileloadd (%1,%2,1), %%tmm6\n\t"
      "tileloadd (%1,%2,1), %%tmm7\n\t"
      :
      : "r"(a.v), "r"(b.v), "r"(stride), "m"(a), "m"(b));
  asm volatile(
      "1:\n\t"
      "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
      "tdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"
      "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\t"
      "tdpbf16ps %%tmm7, %%tmm5, %%tmm3\n\t"
      "dec %0\n\t"
      "jnz 1b\n\t"
      : "+r"(iterations)
      :
      : "cc");
  asm volatile("tilerelease");
  return 0.0f;
}

using LoopFn = float (*)(int64_t);

LoopFn PathLoop(CpuPath path) {
  switch (path) {
    case CpuPath::kBaseline: return LoopBaseline;
    case CpuPath::kAvx2: return LoopAvx2;
    case CpuPath::kAvx512: return LoopAvx512<false>;
    case CpuPath::kAvx512Bf16: return LoopAvx512<true>;
    case CpuPath::kAmx: return LoopAmx;
  }
  return LoopBaseline;
}

// Wall seconds for `threads` threads each running `iterations` of `loop`.
double Run(LoopFn loop, int threads, int64_t iterations) {
  std::vector<std::thread> pool;
  std::vector<float> sink(threads);
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { sink[t] = loop(iterations); });
  for (auto& th : pool) th.join();
  volatile float keep = sink[0];
  (void)keep;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Seconds for one thread running `iterations` of a loop.
double TimeLoop(LoopFn loop, int64_t iterations) {
  const auto t0 = std::chrono::steady_clock::now();
  volatile float keep = loop(iterations);
  (void)keep;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int PeakFlopsPerInstruction(CpuPath path) {
  switch (path) {
    case CpuPath::kBaseline: return 4;
    case CpuPath::kAvx2: return 16;
    case CpuPath::kAvx512: return 32;
    case CpuPath::kAvx512Bf16: return 64;
    case CpuPath::kAmx: return 16 * 16 * 32 * 2;  // a 16x16 tile, K = 32, multiply and add
  }
  return 0;
}

double Bf16DotToFmaRatio() {
  if (!Avx512Bf16Active()) return 0;
  constexpr int64_t kIterations = 1 << 14;  // 262,144 instructions per run
  double bf16 = 1e30, f32 = 1e30;
  for (int rep = 0; rep < 5; ++rep) {  // interleaved: clock changes hit both
    bf16 = std::min(bf16, TimeLoop(LoopAvx512<true>, kIterations));
    f32 = std::min(f32, TimeLoop(LoopAvx512<false>, kIterations));
  }
  // Flops per second: 64 per vdpbf16ps, 32 per FMA.
  return (64.0 / bf16) / (32.0 / f32);
}

bool Bf16DotOutrunsFma() {
  static const bool outruns = Bf16DotToFmaRatio() > 1.0;
  return outruns;
}

StatusOr<double> MeasurePeakFlops(CpuPath path, int threads, double seconds) {
  if (threads < 1) return InvalidArgumentError("peak probe: threads must be >= 1");
  if (!CpuPathActive(path)) {
    if (path == CpuPath::kAmx) {  // absent, capped or refused: the decision says which
      return UnimplementedError("peak probe: path amx is " + ProcessAmxDecision().note);
    }
    return UnimplementedError("peak probe: path " + std::string(CpuPathName(path)) + " is " +
                              (path <= HostCpuPath() ? "turned off by " + std::string(kCpuPathVariable)
                                                     : "not on this CPU (its best is " +
                                                           std::string(CpuPathName(HostCpuPath())) + ")"));
  }
  const LoopFn loop = PathLoop(path);
  const double flops_per_iteration =
      static_cast<double>(kAccumulators[static_cast<int>(path)]) * PeakFlopsPerInstruction(path);
  // Calibrate on a short run, then run about `seconds`; best of three.
  int64_t iterations = 1 << 16;
  double t = Run(loop, threads, iterations);
  while (t < 0.02) {
    iterations *= 4;
    t = Run(loop, threads, iterations);
  }
  iterations = std::max<int64_t>(iterations, static_cast<int64_t>(iterations * seconds / 3 / t));
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double s = Run(loop, threads, iterations);
    best = std::max(best, flops_per_iteration * iterations * threads / s);
  }
  return best;
}

bool PeakProbes::apart() const { return std::abs(after.flops - before.flops) > 0.1 * higher().flops; }

std::string PeakProbes::Warning() const {
  char line[256];
  std::snprintf(line, sizeof line,
                "warning: the host's peak moved from %.1f GFLOP/s before the timed runs to %.1f after (a shared "
                "or throttled host): the fraction is against the higher; rerun for a steadier figure",
                before.flops / 1e9, after.flops / 1e9);
  return line;
}

namespace {

// The fastest active path up to `top`.
StatusOr<PathPeak> BestPeakUpTo(CpuPath top, int threads, double seconds) {
  PathPeak best;
  for (CpuPath path : kCpuPaths) {
    if (path > top || !CpuPathActive(path)) break;
    TPUMESH_ASSIGN_OR_RETURN(const double flops, MeasurePeakFlops(path, threads, seconds));
    if (flops > best.flops) best = {path, flops};
  }
  return best;
}

}  // namespace

StatusOr<PathPeak> MeasureBestPeak(int threads, double seconds) {
  return BestPeakUpTo(CpuPath::kAmx, threads, seconds);
}

StatusOr<PathPeak> MeasureF32Peak(int threads, double seconds) {
  return BestPeakUpTo(CpuPath::kAvx512, threads, seconds);
}

}  // namespace tpumesh::kernels
