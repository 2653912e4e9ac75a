#include "kernels/peak.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/matmul.h"

namespace tpumesh::kernels {
namespace {

#define TPUMESH_TARGET_PEAK __attribute__((target("avx512f")))

constexpr int kChains = 16;

// The loop as inline assembly, so that it is the same whatever the build
// does to C++ (at -O0 or under ASan the accumulators of a C++ loop live on
// the stack, and the probe would time stores instead of arithmetic): zero
// zmm0..zmm15, then `iterations` times 16 independent multiply-adds into
// them from the inputs %1 and %2 (small normal numbers: the sums stay
// finite and normal, and are never read).
#define TPUMESH_PEAK_ZERO(r) "vpxord %%zmm" #r ", %%zmm" #r ", %%zmm" #r "\n\t"
#define TPUMESH_PEAK_OP(op, r) op " %2, %1, %%zmm" #r "\n\t"
#define TPUMESH_PEAK_16(M, ...)                                                                         \
  M(__VA_ARGS__ 0) M(__VA_ARGS__ 1) M(__VA_ARGS__ 2) M(__VA_ARGS__ 3) M(__VA_ARGS__ 4) M(__VA_ARGS__ 5) \
  M(__VA_ARGS__ 6) M(__VA_ARGS__ 7) M(__VA_ARGS__ 8) M(__VA_ARGS__ 9) M(__VA_ARGS__ 10)                 \
  M(__VA_ARGS__ 11) M(__VA_ARGS__ 12) M(__VA_ARGS__ 13) M(__VA_ARGS__ 14) M(__VA_ARGS__ 15)
#define TPUMESH_PEAK_CLOBBERS                                                                    \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", \
      "xmm12", "xmm13", "xmm14", "xmm15", "cc"

// One loop for both kinds: only the instruction and the inputs' bits differ
// (the assembler takes vdpbf16ps whatever the function's target, and the
// loop only runs on a CPU that has it). kBf16: bf16 1.0 and ~6e-8 in every
// 16-bit half; kF32: 1.0f and 1e-8f.
template <PeakKind kKind>
TPUMESH_TARGET_PEAK float Loop(int64_t iterations) {
  if (iterations < 1) return 0.0f;
  constexpr bool kBf16 = kKind == PeakKind::kBf16;
  const __m512i a = _mm512_set1_epi32(kBf16 ? 0x3f803f80 : 0x3f800000);
  const __m512i b = _mm512_set1_epi32(kBf16 ? 0x33803380 : 0x322bcc77);
#define TPUMESH_PEAK_LOOP(op)                                                    \
  asm volatile(TPUMESH_PEAK_16(TPUMESH_PEAK_ZERO, ) "1:\n\t" TPUMESH_PEAK_16(TPUMESH_PEAK_OP, op, ) \
               "dec %0\n\t"                                                     \
               "jnz 1b\n\t"                                                     \
               : "+r"(iterations)                                               \
               : "v"(a), "v"(b)                                                 \
               : TPUMESH_PEAK_CLOBBERS)
  if constexpr (kBf16) {
    TPUMESH_PEAK_LOOP("vdpbf16ps");
  } else {
    TPUMESH_PEAK_LOOP("vfmadd231ps");
  }
#undef TPUMESH_PEAK_LOOP
  return 0.0f;
}

#undef TPUMESH_PEAK_ZERO
#undef TPUMESH_PEAK_OP
#undef TPUMESH_PEAK_16
#undef TPUMESH_PEAK_CLOBBERS

// Wall seconds for `threads` threads each running `iterations`.
double Run(PeakKind kind, int threads, int64_t iterations) {
  std::vector<std::thread> pool;
  std::vector<float> sink(threads);
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { sink[t] = kind == PeakKind::kBf16 ? Loop<PeakKind::kBf16>(iterations) : Loop<PeakKind::kF32>(iterations); });
  for (auto& th : pool) th.join();
  volatile float keep = sink[0];
  (void)keep;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Seconds for one thread running `iterations` of a loop.
template <typename Loop>
double TimeLoop(Loop loop, int64_t iterations) {
  const auto t0 = std::chrono::steady_clock::now();
  volatile float keep = loop(iterations);
  (void)keep;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

double Bf16DotToFmaRatio() {
  if (!CpuHasAvx512Bf16()) return 0;
  constexpr int64_t kIterations = 1 << 14;  // 262,144 instructions per run
  double bf16 = 1e30, f32 = 1e30;
  for (int rep = 0; rep < 5; ++rep) {  // interleaved: clock changes hit both
    bf16 = std::min(bf16, TimeLoop(Loop<PeakKind::kBf16>, kIterations));
    f32 = std::min(f32, TimeLoop(Loop<PeakKind::kF32>, kIterations));
  }
  // Flops per second: 64 per vdpbf16ps, 32 per FMA.
  return (64.0 / bf16) / (32.0 / f32);
}

bool Bf16DotOutrunsFma() {
  static const bool outruns = Bf16DotToFmaRatio() > 1.0;
  return outruns;
}

StatusOr<double> MeasurePeakFlops(PeakKind kind, int threads, double seconds) {
  if (threads < 1) return InvalidArgumentError("peak probe: threads must be >= 1");
  if (kind == PeakKind::kBf16 && !CpuHasAvx512Bf16())
    return UnimplementedError("peak probe: this CPU has no AVX512-BF16");
  if (kind == PeakKind::kF32 && !__builtin_cpu_supports("avx512f"))
    return UnimplementedError("peak probe: this CPU has no AVX-512F");
  const double flops_per_iteration = kChains * (kind == PeakKind::kBf16 ? 64.0 : 32.0);
  // Calibrate on a short run, then run about `seconds`; best of three.
  int64_t iterations = 1 << 16;
  double t = Run(kind, threads, iterations);
  while (t < 0.02) {
    iterations *= 4;
    t = Run(kind, threads, iterations);
  }
  iterations = std::max<int64_t>(iterations, static_cast<int64_t>(iterations * seconds / 3 / t));
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double s = Run(kind, threads, iterations);
    best = std::max(best, flops_per_iteration * iterations * threads / s);
  }
  return best;
}

}  // namespace tpumesh::kernels
