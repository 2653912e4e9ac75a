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
//   amx         the AMX tile unit's bf16 tdpbf16ps, above avx512bf16 (Intel
//               Xeons since Sapphire Rapids): `bench peak`'s probe
//               (kernels/peak.h) and the kAmx matmul provider
//               (kernels/matmul.h), which also runs only once its known-answer
//               self-check has passed (AmxMatmulActive).
//
// HostCpuPath() is the highest path the CPU reports in CPUID and the OS
// enables in XCR0. TPUMESH_SIMD=<path> in the environment caps what the
// process uses, ActiveCpuPath(): Highway's dispatch (hwy::DisableTargets),
// the kBf16 provider (Avx512Bf16Active), AMX and the kAmx provider
// (TPUMESH_SIMD=avx512bf16 or lower turns them off) and BLIS's kernel set (BLIS_ARCH_TYPE, unless the
// environment already sets it) all stay at or below it. A cap above the
// host's path is the host's path. The cap is read and applied once, during
// static initialisation (every program that links tpumesh_kernels links this
// file, cmake: -u tpumesh_cpu_path_anchor), before any kernel runs. An
// unknown value is ignored by the kernels (the host's path stays) and
// reported by CpuPathStatus(), which `tpumesh` checks before it does
// anything.
//
// AMX also needs Linux's leave: the tile data is too big for the default
// signal frame, so a process asks for it with arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA) before its first tile instruction. That request is
// made during the same static initialisation, only where the host path is
// amx and the cap leaves it on; where the kernel refuses, the active path is
// avx512bf16 and ProcessAmxDecision() says why. DecideAmx() is that decision on facts a
// test can inject.
#ifndef TPUMESH_KERNELS_CPU_PATH_H_
#define TPUMESH_KERNELS_CPU_PATH_H_

#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tpumesh::kernels {

enum class CpuPath { kBaseline, kAvx2, kAvx512, kAvx512Bf16, kAmx };

inline constexpr CpuPath kCpuPaths[] = {CpuPath::kBaseline, CpuPath::kAvx2, CpuPath::kAvx512,
                                        CpuPath::kAvx512Bf16, CpuPath::kAmx};

// The environment variable that caps the path.
inline constexpr char kCpuPathVariable[] = "TPUMESH_SIMD";

std::string_view CpuPathName(CpuPath path);  // "baseline", "avx2", "avx512", "avx512bf16", "amx"
StatusOr<CpuPath> ParseCpuPath(std::string_view name);

// The highest path this CPU and OS support.
CpuPath HostCpuPath();

// The highest path this process uses: HostCpuPath(), capped by TPUMESH_SIMD.
CpuPath ActiveCpuPath();

// True when `path` is at or below ActiveCpuPath().
inline bool CpuPathActive(CpuPath path) { return path <= ActiveCpuPath(); }

// True when the AVX512-BF16 micro-kernels may run: CpuPathActive(kAvx512Bf16).
inline bool Avx512Bf16Active() { return CpuPathActive(CpuPath::kAvx512Bf16); }

// True when this process may run AMX tile instructions: CpuPathActive(kAmx)
// (the CPU and OS have it, the cap leaves it on and Linux granted the tile
// data).
inline bool AmxActive() { return CpuPathActive(CpuPath::kAmx); }

// OK, or InvalidArgument naming TPUMESH_SIMD's value and the accepted ones.
Status CpuPathStatus();

// What decides whether a process may use AMX.
struct AmxFacts {
  bool amx_bf16 = false;         // CPUID leaf 7 subleaf 0, EDX bit 22
  bool amx_tile = false;         // CPUID leaf 7 subleaf 0, EDX bit 24
  bool xcr0_tile_state = false;  // XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA): the OS saves the tiles
  bool avx512bf16 = false;       // the avx512bf16 path below it (CPUID and XCR0)
};

// This CPU's and OS's facts (CPUID and XGETBV; all false where CPUID lacks
// leaf 7 or the OS has no XSAVE).
AmxFacts ReadAmxFacts();

// Linux's arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) for this
// process: 0 when granted, else the errno (ENOSYS off Linux). Idempotent;
// only call where the CPU and OS have AMX.
int RequestAmxPermission();

enum class AmxVerdict {
  kActive,           // every fact holds, the cap allows it, the kernel granted it
  kNotOnCpu,         // CPUID lacks amx_bf16 or amx_tile
  kNoOsState,        // XCR0 lacks the tile state
  kNoAvx512Bf16,     // AMX without the avx512bf16 path below it (the paths are a ladder)
  kOffByCap,         // TPUMESH_SIMD caps below amx
  kRefusedByKernel,  // arch_prctl refused the tile data
};

// The verdict and, unless kActive, one line saying why (what `bench peak`
// prints in its amx row): "not on this CPU (CPUID lacks amx_bf16, amx_tile)",
// "not enabled by the OS (XCR0 lacks the tile state, bits 17-18)", "not used:
// the CPU has AMX but not AVX512-BF16", "off (TPUMESH_SIMD)", "refused by the
// kernel: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): <strerror>".
struct AmxDecision {
  AmxVerdict verdict = AmxVerdict::kNotOnCpu;
  std::string note;
  // The CPU and OS have AMX (it is the host's path), whatever the cap and
  // the kernel say.
  bool on_host() const {
    return verdict == AmxVerdict::kActive || verdict == AmxVerdict::kOffByCap ||
           verdict == AmxVerdict::kRefusedByKernel;
  }
};

// Decides from `facts`, whether the cap `cap_allows` AMX, and `request`'s
// answer (0 or an errno); `request` is called only when everything else
// allows AMX, so a capped or AMX-less process never asks the kernel.
AmxDecision DecideAmx(const AmxFacts& facts, bool cap_allows, const std::function<int()>& request);

// This process's decision, made once during static initialisation.
const AmxDecision& ProcessAmxDecision();

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_CPU_PATH_H_
