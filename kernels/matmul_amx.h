// Internal to the kAmx provider: the known-answer self-check that decides,
// once per process, whether the AMX matmul may run (AmxMatmulActive() in
// kernels/matmul.h), and the scalar model of its arithmetic.
//
// The self-check runs the AMX kernel on a few small odd shapes (K = 1, odd K,
// rows and columns past a tile, several K blocks, kDefault and kHigh, f32 and
// bf16 A, a bias) in a forked child process and compares every element with
// the portable provider (kHighway) on the same packed B. Everything the child
// touches is allocated before fork(); the child only runs the kernel,
// compares, writes one fixed-size report into a pipe and _exit()s, with the
// default action restored for SIGSEGV, SIGILL, SIGBUS, SIGFPE, SIGTRAP and
// SIGABRT. The parent reads the report with a deadline and reaps the child:
//   report "pass"            -> passed
//   report "mismatch"        -> failed: "case 2 of 5 (17x33x37, default):
//                               C[3][17] = 1.5 where the portable path gives 2
//                               (bound 0)"
//   no report, signal        -> failed: "the check process died of SIGILL"
//   no report by the deadline-> the child is killed (SIGKILL); failed: "no
//                               answer within 10 s; the check process was
//                               killed"
//   fork or pipe refused     -> failed, naming the call and errno
// A failure can never take the calling process down or hang it beyond the
// deadline, and it is never silent: ProcessAmxSelfCheck prints one line.
//
// The comparison bound (docs/kernels.md, "The kAmx provider"): the operands
// are the same bf16 numbers on both paths and every product is exact, so the
// two differ only in how the f32 additions round. The integer cases (values
// in [-4, 4]) are exact on any summation order: their bound is 0. The random
// cases use AmxDifferenceBound below.
#ifndef TPUMESH_KERNELS_MATMUL_AMX_H_
#define TPUMESH_KERNELS_MATMUL_AMX_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/matmul_internal.h"

namespace tpumesh::kernels::matmul_internal {

// A kernel under check: C rows [0, m) x columns [0, n) of `args` (A, packed
// B, C with ldc, optional bias) over the whole of K, using only `scratch`
// (AmxScratch: two A blocks and the partial sums) and the stack. It
// runs in the forked child, which must not allocate.
using AmxCheckKernel = void (*)(const CallArgs& args, int64_t m, int64_t n, const AmxScratch& scratch);

// The kernel the process checks: amx_kernel::AmxDriver on the matmul's
// Source (what AmxBlock runs). Only runs where AMX is active.
void AmxDriverKernel(const CallArgs& args, int64_t m, int64_t n, const AmxScratch& scratch);

// The scalar model of the kAmx provider's arithmetic, as Intel's SDM
// specifies TDPBF16PS (docs/kernels.md): per group g of 16 expanded pairs
// (pairs [16g, 16g + 16), the pad past K contributing 0 * 0), the even
// products summed in one f32 chain and the odd products in another, each
// step a fused multiply-add rounded to nearest even with denormal inputs
// read as zero and denormal results flushed to zero; the two chains added,
// and that sum added to the accumulator (from +0), both rounded and
// flushed the same way; then the bias, one ordinary f32 add. A is rounded
// (or split) as PackMatmulA does (vcvtne2ps2bf16: denormal inputs read as
// zero). Runs on any CPU; no allocation.
void AmxModelKernel(const CallArgs& args, int64_t m, int64_t n, const AmxScratch& scratch);

// The bound on |C_amx - C_portable| for one element whose expanded K has
// `pairs` pairs and whose products have absolute values summing to
// `sum_abs` (sum over k of |a_k b_k|, operands as rounded):
//   1.01 (2P + 17 + G) 2^-24 sum_abs + (34 G + 2P + 2) 2^-126,  G = ceil(P/16)
// The portable path adds the 2P products in one chain (a product goes
// through at most 2P roundings); tdpbf16ps through at most 16 (its chain in
// the group) + 1 (even + odd) + G (the accumulator); each rounding errs by
// at most 2^-24 relative (round to nearest), and gamma_d = d u / (1 - d u) <=
// 1.01 d u for d u <= 0.01. The second term covers the flushes to zero
// (each < 2^-126) and the portable path's gradual underflow.
double AmxDifferenceBound(int64_t pairs, double sum_abs);

struct AmxSelfCheck {
  bool passed = false;
  std::string note;  // empty when passed; else what failed (above)
};

// The production deadline for the child's answer. The cases are ~10
// MFLOP in all (microseconds on AMX); the deadline covers fork() of a large
// process and a loaded host.
inline constexpr double kAmxSelfCheckTimeoutSeconds = 10.0;

// Runs the check on `kernel` in a forked child (above). Thread-safe; forks
// every call. The decision logic is the same for every kernel, which is how
// the tests exercise it on any host (a crashing, a wrong, a hanging and a
// correct kernel).
AmxSelfCheck RunAmxSelfCheck(AmxCheckKernel kernel, double timeout_seconds);

// The one stderr line a failed check prints:
// "tpumesh: warning: AMX matmul self-check failed (<note>); using <fallback>".
std::string AmxSelfCheckWarning(const AmxSelfCheck& check, std::string_view fallback);

// This process's check of AmxDriverKernel: run once, on the first call
// (thread-safe: later callers wait for the first and share its result); only
// where AmxActive(), else not run and not passed, with note "AMX <the AMX
// decision's note>". On failure it prints AmxSelfCheckWarning with the
// provider kAuto then uses (avx512bf16 or highway). The first call is the
// first ResolveProvider(kAuto or kAmx) at default/high precision, i.e. the
// first PackedMatrix::Pack (or conv weight pack, or attention call) that
// could pick AMX.
const AmxSelfCheck& ProcessAmxSelfCheck();

}  // namespace tpumesh::kernels::matmul_internal

#endif  // TPUMESH_KERNELS_MATMUL_AMX_H_
