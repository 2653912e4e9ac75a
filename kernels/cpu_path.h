// The compute paths of this host's CPU, and the switch that forces a lower
// one so that every path can be tested and timed on a bigger host.
//
// A path is a level of x86-64 arithmetic; each includes the ones below it:
//   baseline    SSE (Highway's SSSE3/SSE4 or scalar targets; BLIS penryn)
//   avx2        AVX2 + FMA on 16 ymm registers (Highway AVX2; BLIS haswell/zen)
//   avx512      AVX-512 F/DQ/BW/VL on 32 zmm registers (Highway AVX3, AVX3_DL;
//               BLIS skx)
//   avx512bf16  AVX-512 with AVX512_BF16's vdpbf16ps (the kBf16 matmul
//               provider, kernels/matmul.h)
//
// HostCpuPath() is the highest path the CPU reports in CPUID and the OS
// enables in XCR0. TPUMESH_SIMD=<path> in the environment caps what the
// process uses, ActiveCpuPath(): Highway's dispatch (hwy::DisableTargets),
// the kBf16 provider (Avx512Bf16Active) and BLIS's kernel set
// (BLIS_ARCH_TYPE, unless the environment already sets it) all stay at or
// below it. A cap above the host's path is the host's path. The cap is read
// and applied once, during static initialisation (every program that links
// tpumesh_kernels links this file, cmake: -u tpumesh_cpu_path_anchor), before
// any kernel runs. An unknown value is ignored by the kernels (the host's
// path stays) and reported by CpuPathStatus(), which `tpumesh` checks before
// it does anything.
#ifndef TPUMESH_KERNELS_CPU_PATH_H_
#define TPUMESH_KERNELS_CPU_PATH_H_

#include <string_view>

#include "base/status.h"

namespace tpumesh::kernels {

enum class CpuPath { kBaseline, kAvx2, kAvx512, kAvx512Bf16 };

inline constexpr CpuPath kCpuPaths[] = {CpuPath::kBaseline, CpuPath::kAvx2, CpuPath::kAvx512,
                                        CpuPath::kAvx512Bf16};

// The environment variable that caps the path.
inline constexpr char kCpuPathVariable[] = "TPUMESH_SIMD";

std::string_view CpuPathName(CpuPath path);  // "baseline", "avx2", "avx512", "avx512bf16"
StatusOr<CpuPath> ParseCpuPath(std::string_view name);

// The highest path this CPU and OS support.
CpuPath HostCpuPath();

// The highest path this process uses: HostCpuPath(), capped by TPUMESH_SIMD.
CpuPath ActiveCpuPath();

// True when `path` is at or below ActiveCpuPath().
inline bool CpuPathActive(CpuPath path) { return path <= ActiveCpuPath(); }

// True when the AVX512-BF16 micro-kernels may run: CpuPathActive(kAvx512Bf16).
inline bool Avx512Bf16Active() { return CpuPathActive(CpuPath::kAvx512Bf16); }

// OK, or InvalidArgument naming TPUMESH_SIMD's value and the accepted ones.
Status CpuPathStatus();

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_CPU_PATH_H_
