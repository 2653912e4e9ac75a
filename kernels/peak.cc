#include "kernels/peak.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/matmul.h"

namespace tpumesh::kernels {
namespace {

#define TPUMESH_TARGET_PEAK_BF16 __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl")))
#define TPUMESH_TARGET_PEAK_F32 __attribute__((target("avx512f")))

constexpr int kChains = 16;

// Returns a value depending on every accumulator so nothing is optimised out.
TPUMESH_TARGET_PEAK_BF16 float Bf16Loop(int64_t iterations) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80);  // bf16 1.0
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3380);  // bf16 ~6e-8: sums stay finite
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

TPUMESH_TARGET_PEAK_F32 float F32Loop(int64_t iterations) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(1e-8f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(a, b, acc[i]);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

// Wall seconds for `threads` threads each running `iterations`.
double Run(PeakKind kind, int threads, int64_t iterations) {
  std::vector<std::thread> pool;
  std::vector<float> sink(threads);
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { sink[t] = kind == PeakKind::kBf16 ? Bf16Loop(iterations) : F32Loop(iterations); });
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
    bf16 = std::min(bf16, TimeLoop(Bf16Loop, kIterations));
    f32 = std::min(f32, TimeLoop(F32Loop, kIterations));
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
