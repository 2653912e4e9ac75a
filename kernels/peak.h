// A quick probe of this host's arithmetic peak: independent chains of the
// widest multiply-add the CPU has, on T threads, timed. What `tpumesh bench
// peak` prints and what the other benches compare against.
//
// Contract: kBf16 runs AVX512-BF16 vdpbf16ps (64 flops per instruction: 16
// lanes x 2 products x multiply and add) and is Unimplemented on CPUs without
// it (CpuHasAvx512Bf16); kF32 runs AVX-512 FMAs (32 flops per instruction)
// and needs AVX-512F. Each thread runs a fixed number of iterations on 16
// independent accumulators, so the loop is throughput-bound, not latency-
// bound; the result is the total flops over the wall time of the slowest
// thread. The loops are inline assembly (zmm0..zmm15 as accumulators), so a
// Debug or sanitizer build probes the same instructions as a Release one. Numbers, not pass/fail: they vary with clocks and other load.
#ifndef TPUMESH_KERNELS_PEAK_H_
#define TPUMESH_KERNELS_PEAK_H_

#include "base/status.h"

namespace tpumesh::kernels {

enum class PeakKind { kBf16, kF32 };

// FLOP/s measured over about `seconds` of work on `threads` threads.
StatusOr<double> MeasurePeakFlops(PeakKind kind, int threads, double seconds = 0.3);

// Flops per second of vdpbf16ps over those of f32 FMAs on one thread (the
// best of five short interleaved runs of each, about 5 ms in all); 0 on a
// CPU without AVX512-BF16. Both run the MXU's products at kDefault with the
// same bits (kernels/matmul.h), one as 32 and the other as 16 multiply-adds
// per instruction, so this is how much faster the kBf16 provider's
// arithmetic is than kHighway's here: about 1.9 on Zen 4, whose vdpbf16ps
// issues as often as its FMAs, and 0.5 on the Xeons (Sapphire/Emerald
// Rapids) whose vdpbf16ps issues at a quarter of their FMA rate.
double Bf16DotToFmaRatio();

// Whether the kAuto provider uses vdpbf16ps (kBf16) for kDefault and kHigh:
// Bf16DotToFmaRatio() > 1, measured once per process (thread-safe) and then
// fixed, so every later matmul and conv of the process uses one provider.
bool Bf16DotOutrunsFma();

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_PEAK_H_
