// A quick probe of this host's arithmetic peak on each compute path
// (kernels/cpu_path.h): independent chains of the path's widest multiply-add,
// on T threads, timed. What `tpumesh bench peak` prints and what the other
// benches compare against.
//
// Contract: per path, the instruction and its flops per instruction are
//   baseline    SSE mulps and addps, half each (4)
//   avx2        vfmadd231ps on ymm (16)
//   avx512      vfmadd231ps on zmm (32)
//   avx512bf16  vdpbf16ps on zmm (64: 16 lanes x 2 products x multiply and add)
//   amx         tdpbf16ps on 16x16 f32 tiles, K = 32 (16384)
// and a path above ActiveCpuPath() is Unimplemented (for amx, with
// ProcessAmxDecision()'s note: not on this CPU, off by TPUMESH_SIMD, or
// refused by the kernel). Each thread runs a fixed number of iterations on 12
// (baseline, avx2: 16 registers), 16 (AVX-512: 32 registers) or 4 (AMX: four
// accumulator tiles fed by two A and two B tiles that stay loaded)
// independent accumulators, so the loop is throughput-bound, not
// latency-bound; the result is the total flops over the wall time of the
// slowest thread. The loops are inline assembly (AMX's are GCC's intrinsics,
// themselves inline assembly, in a function compiled for amx-tile and
// amx-bf16 alone), so a Debug or sanitizer build probes the same
// instructions as a Release one. Numbers, not pass/fail: they vary with
// clocks and other load.
#ifndef TPUMESH_KERNELS_PEAK_H_
#define TPUMESH_KERNELS_PEAK_H_

#include <string>

#include "base/status.h"
#include "kernels/cpu_path.h"

namespace tpumesh::kernels {

// Flops one instruction of `path`'s probe does (above).
int PeakFlopsPerInstruction(CpuPath path);

// FLOP/s of `path` measured over about `seconds` of work on `threads` threads.
StatusOr<double> MeasurePeakFlops(CpuPath path, int threads, double seconds = 0.3);

// The fastest active path and its FLOP/s: what "the host's best peak" means
// in every figure tpumesh prints (on an AMX host, AMX's unless TPUMESH_SIMD
// turns it off or the kernel refuses it).
struct PathPeak {
  CpuPath path = CpuPath::kBaseline;
  double flops = 0;
};
StatusOr<PathPeak> MeasureBestPeak(int threads, double seconds = 0.3);

// The f32 multiply-add peak: the fastest of the paths whose probe is f32
// arithmetic (baseline, avx2, avx512; not the bf16 dot products of
// avx512bf16 and amx). What work at precision highest (f32 operands, f32
// FMAs) is measured against.
StatusOr<PathPeak> MeasureF32Peak(int threads, double seconds = 0.3);

// The best peak probed just before and just after a timed run. The run is
// measured against the higher; the two are apart when they differ by more
// than 10% of it: the host's speed moved during the run (a shared VM whose
// cores come and go, a throttled CPU), and Warning() says so in one line.
struct PeakProbes {
  PathPeak before, after;
  const PathPeak& higher() const { return before.flops > after.flops ? before : after; }
  bool apart() const;
  std::string Warning() const;
};

// Flops per second of vdpbf16ps over those of f32 FMAs on one thread (the
// best of five short interleaved runs of each, about 5 ms in all); 0 where
// the avx512bf16 path is not active. Both run the MXU's products at kDefault with the
// same bits (kernels/matmul.h), one as 32 and the other as 16 multiply-adds
// per instruction, so this is how much faster the kBf16 provider's
// arithmetic is than kHighway's here: about 1.9 on Zen 4, whose vdpbf16ps
// issues as often as its FMAs, and 0.5 on the Xeons (Sapphire/Emerald
// Rapids) whose vdpbf16ps issues at a quarter of their FMA rate.
double Bf16DotToFmaRatio();

// Whether the kAuto provider uses vdpbf16ps (kBf16) for kDefault and kHigh
// where the AMX provider is not active (AmxMatmulActive, kernels/matmul.h):
// Bf16DotToFmaRatio() > 1, measured once per process (thread-safe) and then
// fixed, so every later matmul and conv of the process uses one provider.
bool Bf16DotOutrunsFma();

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_PEAK_H_
