#include "kernels/cpu_path.h"

#include <blis.h>
#include <cpuid.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "hwy/targets.h"

namespace tpumesh::kernels {
namespace {

// XCR0 bits the OS sets when it saves a register file across context
// switches: SSE (1) and AVX (2) for ymm; opmask (5), ZMM_Hi256 (6) and
// Hi16_ZMM (7) for zmm.
constexpr unsigned kXcr0Ymm = 0x6u, kXcr0Zmm = 0xe6u;
// XTILECFG (17) and XTILEDATA (18): the OS saves the AMX tiles.
constexpr unsigned kXcr0Tiles = 0x60000u;

// Linux's arch_prctl codes (asm/prctl.h) and XTILEDATA's xfeature number.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

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
  AmxDecision amx;
};

const State& GetState() {
  static const State state = [] {
    State s;
    s.host = s.active = DetectHostPath();  // at most avx512bf16
    CpuPath cap = CpuPath::kAmx;
    if (const char* value = std::getenv(kCpuPathVariable); value != nullptr && *value != '\0') {
      StatusOr<CpuPath> parsed = ParseCpuPath(value);
      if (!parsed.ok()) {
        s.status =
            InvalidArgumentError(std::string(kCpuPathVariable) + "=" + value + ": " + parsed.status().message());
      } else {
        cap = *parsed;
      }
    }
    AmxFacts facts = ReadAmxFacts();
    facts.avx512bf16 = s.host == CpuPath::kAvx512Bf16;
    s.amx = DecideAmx(facts, cap >= CpuPath::kAmx, RequestAmxPermission);
    if (s.amx.on_host()) s.host = CpuPath::kAmx;
    s.active = std::min(s.host, cap);
    if (s.active == CpuPath::kAmx && s.amx.verdict != AmxVerdict::kActive) s.active = CpuPath::kAvx512Bf16;
    ApplyCap(s.host, s.active);
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
    case CpuPath::kAmx: return "amx";
  }
  return "?";
}

StatusOr<CpuPath> ParseCpuPath(std::string_view name) {
  for (CpuPath p : kCpuPaths) {
    if (name == CpuPathName(p)) return p;
  }
  return InvalidArgumentError("'" + std::string(name) +
                              "' is not a SIMD path (baseline, avx2, avx512, avx512bf16, amx)");
}

CpuPath HostCpuPath() { return GetState().host; }
CpuPath ActiveCpuPath() { return GetState().active; }
Status CpuPathStatus() { return GetState().status; }
const AmxDecision& ProcessAmxDecision() { return GetState().amx; }

AmxFacts ReadAmxFacts() {
  AmxFacts f;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = ecx & (1u << 27);
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  f.amx_bf16 = edx & (1u << 22);
  f.amx_tile = edx & (1u << 24);
  if (osxsave) {
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    f.xcr0_tile_state = (xcr0_lo & kXcr0Tiles) == kXcr0Tiles;
  }
  return f;
}

int RequestAmxPermission() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0) return 0;
  return errno != 0 ? errno : EPERM;
#else
  return ENOSYS;
#endif
}

AmxDecision DecideAmx(const AmxFacts& facts, bool cap_allows, const std::function<int()>& request) {
  if (!facts.amx_bf16 || !facts.amx_tile) {
    std::string missing = !facts.amx_bf16 ? "amx_bf16" : "";
    if (!facts.amx_tile) missing += std::string(missing.empty() ? "" : ", ") + "amx_tile";
    return {AmxVerdict::kNotOnCpu, "not on this CPU (CPUID lacks " + missing + ")"};
  }
  if (!facts.xcr0_tile_state) {
    return {AmxVerdict::kNoOsState, "not enabled by the OS (XCR0 lacks the tile state, bits 17-18)"};
  }
  if (!facts.avx512bf16) return {AmxVerdict::kNoAvx512Bf16, "not used: the CPU has AMX but not AVX512-BF16"};
  if (!cap_allows) return {AmxVerdict::kOffByCap, "off (" + std::string(kCpuPathVariable) + ")"};
  if (const int err = request(); err != 0) {
    return {AmxVerdict::kRefusedByKernel,
            "refused by the kernel: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): " +
                std::string(std::strerror(err))};
  }
  return {AmxVerdict::kActive, ""};
}

}  // namespace tpumesh::kernels

// The linker's handle on this file (kernels/CMakeLists.txt: -u), so that the
// cap above is applied in every program that links the kernels.
extern "C" {
[[maybe_unused]] int tpumesh_cpu_path_anchor = 0;
}
