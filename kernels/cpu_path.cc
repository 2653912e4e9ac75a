#include "kernels/cpu_path.h"

#include <blis.h>
#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "hwy/targets.h"

namespace tpumesh::kernels {
namespace {

// XCR0 bits the OS sets when it saves a register file across context
// switches: SSE (1) and AVX (2) for ymm; opmask (5), ZMM_Hi256 (6) and
// Hi16_ZMM (7) for zmm.
constexpr unsigned kXcr0Ymm = 0x6u, kXcr0Zmm = 0xe6u;

CpuPath DetectHostPath() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return CpuPath::kBaseline;
  const bool fma = ecx & (1u << 12), osxsave = ecx & (1u << 27), avx = ecx & (1u << 28);
  if (!osxsave || !avx) return CpuPath::kBaseline;
  unsigned xcr0_lo, xcr0_hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return CpuPath::kBaseline;
  const unsigned max_subleaf = eax;
  const bool avx2 = ebx & (1u << 5);
  if (!(avx2 && fma && (xcr0_lo & kXcr0Ymm) == kXcr0Ymm)) return CpuPath::kBaseline;
  const bool avx512f = ebx & (1u << 16), avx512dq = ebx & (1u << 17), avx512bw = ebx & (1u << 30),
             avx512vl = ebx & (1u << 31);
  if (!(avx512f && avx512dq && avx512bw && avx512vl && (xcr0_lo & kXcr0Zmm) == kXcr0Zmm)) return CpuPath::kAvx2;
  if (max_subleaf < 1) return CpuPath::kAvx512;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  const bool avx512_bf16 = eax & (1u << 5);
  return avx512_bf16 ? CpuPath::kAvx512Bf16 : CpuPath::kAvx512;
}

// Keeps Highway's dispatch and BLIS's kernel set at or below `cap`.
void ApplyCap(CpuPath host, CpuPath cap) {
  if (cap >= host) return;
  int64_t disabled = 0;
  if (cap < CpuPath::kAvx512) disabled |= HWY_AVX3 | HWY_AVX3_DL;
  if (cap < CpuPath::kAvx2) disabled |= HWY_AVX2;
  if (disabled != 0) hwy::DisableTargets(disabled);
  // BLIS picks its sub-configuration once, at its first call, from this
  // variable when set (an arch_t id).
  if (cap < CpuPath::kAvx512 && std::getenv("BLIS_ARCH_TYPE") == nullptr) {
    const int id = cap == CpuPath::kAvx2 ? BLIS_ARCH_HASWELL : BLIS_ARCH_PENRYN;
    setenv("BLIS_ARCH_TYPE", std::to_string(id).c_str(), /*overwrite=*/0);
  }
}

struct State {
  CpuPath host = CpuPath::kBaseline;
  CpuPath active = CpuPath::kBaseline;
  Status status;
};

const State& GetState() {
  static const State state = [] {
    State s;
    s.host = s.active = DetectHostPath();
    if (const char* value = std::getenv(kCpuPathVariable); value != nullptr && *value != '\0') {
      StatusOr<CpuPath> cap = ParseCpuPath(value);
      if (!cap.ok()) {
        s.status = InvalidArgumentError(std::string(kCpuPathVariable) + "=" + value + ": " + cap.status().message());
      } else if (*cap < s.host) {
        s.active = *cap;
        ApplyCap(s.host, *cap);
      }
    }
    return s;
  }();
  return state;
}

// Applies the cap before main, before any kernel can dispatch.
[[maybe_unused]] const bool kCapApplied = (GetState(), true);

}  // namespace

std::string_view CpuPathName(CpuPath path) {
  switch (path) {
    case CpuPath::kBaseline: return "baseline";
    case CpuPath::kAvx2: return "avx2";
    case CpuPath::kAvx512: return "avx512";
    case CpuPath::kAvx512Bf16: return "avx512bf16";
  }
  return "?";
}

StatusOr<CpuPath> ParseCpuPath(std::string_view name) {
  for (CpuPath p : kCpuPaths) {
    if (name == CpuPathName(p)) return p;
  }
  return InvalidArgumentError("'" + std::string(name) + "' is not a SIMD path (baseline, avx2, avx512, avx512bf16)");
}

CpuPath HostCpuPath() { return GetState().host; }
CpuPath ActiveCpuPath() { return GetState().active; }
Status CpuPathStatus() { return GetState().status; }

}  // namespace tpumesh::kernels

// The linker's handle on this file (kernels/CMakeLists.txt: -u), so that the
// cap above is applied in every program that links the kernels.
extern "C" {
[[maybe_unused]] int tpumesh_cpu_path_anchor = 0;
}
