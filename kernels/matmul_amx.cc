// The kAmx provider: its block entry point on the AMX driver
// (matmul_amx_kernel.h), the process's known-answer self-check in a forked
// child (matmul_amx.h), and the scalar model of its arithmetic.
#include "kernels/matmul_amx.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu_path.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx_kernel.h"
#include "kernels/matmul_bf16_kernel.h"
#include "kernels/matmul_internal.h"
#include "kernels/peak.h"

namespace tpumesh::kernels {
namespace matmul_internal {

namespace ak = amx_kernel;

namespace amx_kernel {
Scratch ThreadScratchFor(const PackedData& b) {
  Scratch s;
  s.a_blocks[0] = ThreadScratch<uint32_t, kPackedASlot>(static_cast<size_t>(kMc * kAStride));
  s.a_blocks[1] = ThreadScratch<uint32_t, kSecondSlot>(static_cast<size_t>(kMc * kAStride));
  if (b.pairs > AmxPairBlock(b)) s.partial = ThreadScratch<float, kPartialSlot>(static_cast<size_t>(kMc * kNc));
  return s;
}
}  // namespace amx_kernel

DriverShape AmxDriverShape() { return {ak::kMr, ak::kMc}; }

void AmxBlock(const CallArgs& args, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  ak::AmxDriver(bf16_kernel::MatmulSource{args, args.c, args.ldc, args.bias}, *args.b, i0, i1, j0, j1,
                ak::ThreadScratchFor(*args.b));
}

void AmxDriverKernel(const CallArgs& args, int64_t m, int64_t n, const AmxScratch& scratch) {
  ak::AmxDriver(bf16_kernel::MatmulSource{args, args.c, args.ldc, args.bias}, *args.b, 0, m, 0, n, scratch);
}

// ------------------------------------------------------------------ the model

namespace {

constexpr float kMinNormal = std::numeric_limits<float>::min();  // 2^-126

// Denormals to (signed) zero: DAZ on an input, FTZ on a result.
inline float Flush(float x) { return std::fabs(x) < kMinNormal ? std::copysign(0.0f, x) : x; }

inline float Bf16Value(uint16_t bits) { return Bf16ToF32(bf16{bits}); }

// Element e of row i of the expanded A (2 * pairs elements), as PackMatmulA
// packs it: kDefault bf16(x) (0 past K); kHigh (hi, cross, lo) of the
// original pair's elements in expanded pairs 3q, 3q+1, 3q+2.
float ModelA(const CallArgs& args, int64_t i, int64_t e) {
  const PackedData& b = *args.b;
  auto element = [&](int64_t kk) -> float {
    if (kk >= b.k) return 0.0f;
    return args.a_f32 != nullptr ? args.a_f32[i * args.lda + kk] : Bf16ToF32(args.a_bf16[i * args.lda + kk]);
  };
  if (b.precision != Precision::kHigh) return Bf16ToF32(F32ToBf16(Flush(element(e))));
  const int64_t p = e / 2, q = p / 3, role = p % 3;
  const float x = element(2 * q + e % 2);
  const bf16 hi = F32ToBf16(Flush(x));
  const bool finite = Bf16IsFinite(hi);
  switch (role) {
    case 0: return Bf16ToF32(hi);
    case 1: return finite ? Bf16ToF32(hi) : 0.0f;
    default: return finite ? Bf16ToF32(F32ToBf16(Flush(x - Bf16ToF32(hi)))) : 0.0f;
  }
}

// Element e of column j of the expanded B: a half of the packed pair word.
float ModelB(const PackedData& b, int64_t e, int64_t j) {
  const uint32_t word = b.pair_panel(j / kPanelWidth)[(e / 2) * kPanelWidth + j % kPanelWidth];
  return Bf16Value(static_cast<uint16_t>(e % 2 == 0 ? word & 0xffffu : word >> 16));
}

}  // namespace

void AmxModelKernel(const CallArgs& args, int64_t m, int64_t n, const AmxScratch&) {
  const PackedData& b = *args.b;
  const int64_t pairs = b.pairs, groups = (pairs + ak::kTile - 1) / ak::kTile;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        float even = 0.0f, odd = 0.0f;
        for (int64_t p = g * ak::kTile; p < (g + 1) * ak::kTile; ++p) {
          const bool real = p < pairs;
          const float a0 = real ? Flush(ModelA(args, i, 2 * p)) : 0.0f;
          const float a1 = real ? Flush(ModelA(args, i, 2 * p + 1)) : 0.0f;
          const float b0 = real ? Flush(ModelB(b, 2 * p, j)) : 0.0f;
          const float b1 = real ? Flush(ModelB(b, 2 * p + 1, j)) : 0.0f;
          even = Flush(std::fma(a0, b0, even));
          odd = Flush(std::fma(a1, b1, odd));
        }
        acc = Flush(acc + Flush(even + odd));
      }
      args.c[i * args.ldc + j] = args.bias != nullptr ? acc + args.bias[j] : acc;
    }
  }
}

double AmxDifferenceBound(int64_t pairs, double sum_abs) {
  const double p = static_cast<double>(pairs);
  const double g = static_cast<double>((pairs + ak::kTile - 1) / ak::kTile);
  return 1.01 * (2 * p + 17 + g) * std::ldexp(1.0, -24) * sum_abs + (34 * g + 2 * p + 2) * std::ldexp(1.0, -126);
}

// ----------------------------------------------------------------- the check

namespace {

struct CaseSpec {
  int64_t m, n, k;
  Precision precision;
  bool integers;  // values in [-4, 4]: every sum exact, bound 0
  bool bf16_a;    // A given as bf16 (else f32)
  bool bias;
};

// Small odd shapes: K = 1 (one pair, the padded tail alone); 17 rows (a
// second A tile with one row), 33 columns (a half panel), 16 + 3 pairs, a
// bias; kHigh with bf16 A and 69 expanded pairs; two K blocks (160 + 140
// pairs) of random values; kHigh over three K blocks (192 + 192 + 111).
constexpr CaseSpec kCases[] = {
    {1, 1, 1, Precision::kDefault, true, false, false},
    {17, 33, 37, Precision::kDefault, true, false, true},
    {33, 17, 45, Precision::kHigh, true, true, false},
    {40, 70, 600, Precision::kDefault, false, false, true},
    {20, 48, 330, Precision::kHigh, false, false, false},
};
constexpr int kNumCases = static_cast<int>(sizeof(kCases) / sizeof(kCases[0]));

// Everything the child reads or writes, allocated by the parent.
struct CaseData {
  CaseSpec spec;
  PackedMatrix b;
  std::vector<float> a_f32, bias, expect, bound, got;
  std::vector<bf16> a_bf16;

  CallArgs Args(float* c) const {
    CallArgs args;
    if (spec.bf16_a) {
      args.a_bf16 = a_bf16.data();
    } else {
      args.a_f32 = a_f32.data();
    }
    args.lda = spec.k;
    args.b = b.internal_data();
    args.c = c;
    args.ldc = spec.n;
    args.bias = spec.bias ? bias.data() : nullptr;
    return args;
  }
};

struct CheckData {
  std::vector<CaseData> cases;
  AlignedArray<uint32_t> a_blocks[2];
  AlignedArray<float> partial;
  AmxScratch scratch;
};

// A deterministic stream of values: integers in [-4, 4] or uniform in [-1, 1).
struct Values {
  uint64_t state;
  float Next(bool integers) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t r = static_cast<uint32_t>(state >> 33);
    return integers ? static_cast<float>(static_cast<int>(r % 9) - 4)
                    : static_cast<float>(r) * (2.0f / 2147483648.0f) - 1.0f;
  }
};

Status MakeCheckData(CheckData* d) {
  Values values{0x9e3779b97f4a7c15ull};
  d->cases.resize(kNumCases);
  for (int c = 0; c < kNumCases; ++c) {
    CaseData& cd = d->cases[c];
    const CaseSpec& s = kCases[c];
    cd.spec = s;
    std::vector<float> b(static_cast<size_t>(s.k * s.n));
    for (float& v : b) v = values.Next(s.integers);
    cd.a_f32.resize(static_cast<size_t>(s.m * s.k));
    for (float& v : cd.a_f32) v = values.Next(s.integers);
    if (s.bf16_a) {
      cd.a_bf16.resize(cd.a_f32.size());
      for (size_t i = 0; i < cd.a_f32.size(); ++i) cd.a_bf16[i] = F32ToBf16(cd.a_f32[i]);
    }
    cd.bias.resize(static_cast<size_t>(s.n));
    for (float& v : cd.bias) v = values.Next(s.integers);
    // The portable path on the same packed B.
    TPUMESH_ASSIGN_OR_RETURN(cd.b, PackedMatrix::Pack(s.k, s.n, b.data(), s.n, {s.precision, Provider::kHighway}));
    const size_t cn = static_cast<size_t>(s.m * s.n);
    cd.expect.resize(cn);
    cd.got.resize(cn);
    cd.bound.resize(cn);
    const float* bias = s.bias ? cd.bias.data() : nullptr;
    if (s.bf16_a) {
      TPUMESH_RETURN_IF_ERROR(Matmul(s.m, cd.a_bf16.data(), s.k, cd.b, cd.expect.data(), s.n, 1, bias));
    } else {
      TPUMESH_RETURN_IF_ERROR(Matmul(s.m, cd.a_f32.data(), s.k, cd.b, cd.expect.data(), s.n, 1, bias));
    }
    const CallArgs args = cd.Args(nullptr);
    const int64_t pairs = args.b->pairs;
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double bound = 0;
        if (!s.integers) {
          double sum_abs = 0;
          for (int64_t e = 0; e < 2 * pairs; ++e) {
            sum_abs += std::fabs(static_cast<double>(ModelA(args, i, e)) * ModelB(*args.b, e, j));
          }
          bound = AmxDifferenceBound(pairs, sum_abs);
          // Both paths then add the same bias once, each rounding once.
          if (s.bias) bound += std::ldexp(1.0, -23) * (std::fabs(cd.expect[i * s.n + j]) + bound);
        }
        cd.bound[i * s.n + j] = static_cast<float>(bound);
      }
    }
  }
  for (auto& block : d->a_blocks) {
    block = AllocateAligned<uint32_t>(static_cast<size_t>(ak::kMc * ak::kAStride));
    if (block == nullptr) return ResourceExhaustedError("out of memory");
  }
  d->partial = AllocateAligned<float>(static_cast<size_t>(ak::kMc * ak::kNc));
  if (d->partial == nullptr) return ResourceExhaustedError("out of memory");
  d->scratch.a_blocks[0] = d->a_blocks[0].get();
  d->scratch.a_blocks[1] = d->a_blocks[1].get();
  d->scratch.partial = d->partial.get();
  return OkStatus();
}

// What the child writes into the pipe: one report, then _exit.
struct Report {
  int32_t mismatch;  // 0: every case within its bound
  int32_t case_index;
  int64_t row, col;
  float got, want, bound;
};

constexpr int kExitPassed = 0, kExitMismatch = 3;

[[noreturn]] void RunChild(AmxCheckKernel kernel, CheckData& d, int fd) {
  // A fault ends the child with its own signal, not in a handler the program
  // (or a sanitizer) installed.
  for (int sig : {SIGSEGV, SIGILL, SIGBUS, SIGFPE, SIGTRAP, SIGABRT}) signal(sig, SIG_DFL);
  Report r{};
  for (int c = 0; c < kNumCases && r.mismatch == 0; ++c) {
    CaseData& cd = d.cases[c];
    std::fill(cd.got.begin(), cd.got.end(), std::numeric_limits<float>::quiet_NaN());
    kernel(cd.Args(cd.got.data()), cd.spec.m, cd.spec.n, d.scratch);
    for (int64_t e = 0; e < static_cast<int64_t>(cd.got.size()); ++e) {
      const float got = cd.got[e], want = cd.expect[e], bound = cd.bound[e];
      // NaN got (unwritten, or wrong) fails: the comparison is false.
      if (!(std::fabs(static_cast<double>(got) - want) <= bound)) {
        r = {1, c, e / cd.spec.n, e % cd.spec.n, got, want, bound};
        break;
      }
    }
  }
  const char* p = reinterpret_cast<const char*>(&r);
  size_t left = sizeof r;
  while (left > 0) {
    const ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    p += w;
    left -= static_cast<size_t>(w);
  }
  _exit(r.mismatch != 0 ? kExitMismatch : kExitPassed);
}

std::string SignalName(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGILL: return "SIGILL";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
  }
  return "signal " + std::to_string(sig);
}

std::string Number(double v) {
  char s[64];
  std::snprintf(s, sizeof s, "%.9g", v);
  return s;
}

}  // namespace

AmxSelfCheck RunAmxSelfCheck(AmxCheckKernel kernel, double timeout_seconds) {
  CheckData d;
  if (Status st = MakeCheckData(&d); !st.ok()) {
    return {false, "could not prepare the check: " + std::string(st.message())};
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {false, "could not open a pipe: " + std::string(std::strerror(errno))};
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    return {false, "could not fork the check process: " + std::string(std::strerror(err))};
  }
  if (pid == 0) {
    close(fds[0]);
    RunChild(kernel, d, fds[1]);
  }
  close(fds[1]);

  // The report, the end of the pipe (the child died), or the deadline.
  Report r{};
  size_t have = 0;
  bool ended = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  while (have < sizeof r) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::ceil(left * 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    const ssize_t n = read(fds[0], reinterpret_cast<char*>(&r) + have, sizeof r - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ended = true;
      break;
    }
    have += static_cast<size_t>(n);
  }
  close(fds[0]);
  const bool reported = have == sizeof r;
  const bool killed = !reported && !ended;
  if (killed) kill(pid, SIGKILL);
  int status = 0;
  pid_t w;
  do {
    w = waitpid(pid, &status, 0);
  } while (w < 0 && errno == EINTR);
  const bool reaped = w == pid;

  if (reaped && WIFSIGNALED(status) && !(killed && WTERMSIG(status) == SIGKILL)) {
    return {false, "the check process died of " + SignalName(WTERMSIG(status))};
  }
  if (killed) {
    return {false, "no answer within " + Number(timeout_seconds) + " s; the check process was killed"};
  }
  if (reported && r.mismatch == 0) {
    // A report of success from a child that then exited otherwise is no pass.
    if (reaped && !(WIFEXITED(status) && WEXITSTATUS(status) == kExitPassed)) {
      return {false, "the check process exited with code " + std::to_string(WEXITSTATUS(status))};
    }
    return {true, ""};
  }
  if (reported && r.case_index >= 0 && r.case_index < kNumCases) {
    const CaseSpec& s = kCases[r.case_index];
    return {false, "case " + std::to_string(r.case_index + 1) + " of " + std::to_string(kNumCases) + " (" +
                       std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + ", " +
                       std::string(PrecisionName(s.precision)) + "): C[" + std::to_string(r.row) + "][" +
                       std::to_string(r.col) + "] = " + Number(r.got) + " where the portable path gives " +
                       Number(r.want) + " (bound " + Number(r.bound) + ")"};
  }
  if (reaped && WIFEXITED(status)) {
    return {false, "the check process exited with code " + std::to_string(WEXITSTATUS(status)) + " without an answer"};
  }
  return {false, "the check process ended without an answer"};
}

std::string AmxSelfCheckWarning(const AmxSelfCheck& check, std::string_view fallback) {
  return "tpumesh: warning: AMX matmul self-check failed (" + check.note + "); using " + std::string(fallback);
}

const AmxSelfCheck& ProcessAmxSelfCheck() {
  static const AmxSelfCheck check = [] {
    if (!AmxActive()) return AmxSelfCheck{false, "AMX " + ProcessAmxDecision().note};
    AmxSelfCheck c = RunAmxSelfCheck(&AmxDriverKernel, kAmxSelfCheckTimeoutSeconds);
    if (!c.passed) {
      const bool bf16 = Avx512Bf16Active() && Bf16DotOutrunsFma();
      std::fprintf(stderr, "%s\n", AmxSelfCheckWarning(c, bf16 ? "avx512bf16" : "highway").c_str());
    }
    return c;
  }();
  return check;
}

}  // namespace matmul_internal

bool AmxMatmulActive() { return AmxActive() && matmul_internal::ProcessAmxSelfCheck().passed; }

std::string AmxMatmulNote() {
  if (!AmxActive()) return "AMX " + ProcessAmxDecision().note;
  const matmul_internal::AmxSelfCheck& check = matmul_internal::ProcessAmxSelfCheck();
  return check.passed ? "" : "AMX matmul self-check failed (" + check.note + ")";
}

}  // namespace tpumesh::kernels
