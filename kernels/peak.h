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
// thread. Numbers, not pass/fail: they vary with clocks and other load.
#ifndef TPUMESH_KERNELS_PEAK_H_
#define TPUMESH_KERNELS_PEAK_H_

#include "base/status.h"

namespace tpumesh::kernels {

enum class PeakKind { kBf16, kF32 };

// FLOP/s measured over about `seconds` of work on `threads` threads.
StatusOr<double> MeasurePeakFlops(PeakKind kind, int threads, double seconds = 0.3);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_PEAK_H_
