// kernels/matmul_amx*.{h,cc}: the kAmx provider and its self-check.
//
// On every host: the self-check's decision logic with injected kernels (a
// correct one, the scalar model of tdpbf16ps; one that dies of SIGILL, one of
// SIGSEGV; wrong ones; one that writes nothing; one that hangs), its warning
// line, the process's decision following the host, and the scalar model
// against the exact reference and the portable provider on odd shapes.
// Where this process may run AMX (AmxMatmulActive()): the AMX kernel against
// the exact reference, kHighway and kBf16 on odd shapes (M, N, K in {1, 15,
// 16, 17, 31, 33, 100, 257}), kDefault and kHigh, f32 and bf16 A, bias;
// threads 1, 2 and 0 bit-identical; kAuto's choice; the implicit-GEMM conv.
// Elsewhere those skip with AmxMatmulNote() ("AMX not on this CPU (CPUID
// lacks amx_bf16, amx_tile)", or the cap, or the kernel's refusal).
//
// Bounds (docs/kernels.md, "The kAmx provider"): the operands are the same
// bf16 numbers on every path and the products exact, so the paths differ
// only in the rounding of the f32 additions. Against the exact sum (double)
// tdpbf16ps's order errs by at most 1.01 (17 + G) u S + flushes (u = 2^-24, S
// = sum |products|, G = ceil(P/16) groups of 16 pairs); against the portable
// path (one chain of 2P terms) by AmxDifferenceBound(P, S).
#include "kernels/matmul_amx.h"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/bf16.h"
#include "kernels/conv2d.h"
#include "kernels/conv2d_internal.h"
#include "kernels/cpu_path.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "tests/kernels/matmul_problem.h"

namespace tpumesh::kernels {
namespace {

using matmul_internal::AmxCheckKernel;
using matmul_internal::AmxDifferenceBound;
using matmul_internal::AmxModelKernel;
using matmul_internal::AmxSelfCheck;
using matmul_internal::CallArgs;
using matmul_internal::RunAmxSelfCheck;
using matmul_internal::AmxScratch;

constexpr double kU = 1.0 / (1 << 24);

// ------------------------------------------------ the self-check, any host

void DiesOfSigill(const CallArgs&, int64_t, int64_t, const AmxScratch&) { __builtin_trap(); }

void DiesOfSigsegv(const CallArgs&, int64_t, int64_t, const AmxScratch&) {
  // A read of page 0: what a tile load from a bad address does.
  uintptr_t address = 8;
  asm volatile("" : "+r"(address));  // opaque to the compiler's bounds warnings
  (void)*reinterpret_cast<volatile const int*>(address);
  raise(SIGSEGV);  // in case the read was not a fault here
}

void Hangs(const CallArgs&, int64_t, int64_t, const AmxScratch&) {
  for (;;) pause();
}

void WritesNothing(const CallArgs&, int64_t, int64_t, const AmxScratch&) {}

// The model, then element (5, 3) off by 1 in the first case of at least
// 17 x 33 (the check's second case, integers: bound 0).
void OffByOneInCase2(const CallArgs& args, int64_t m, int64_t n, const AmxScratch& s) {
  AmxModelKernel(args, m, n, s);
  if (m >= 17 && n >= 33) args.c[5 * args.ldc + 3] += 1.0f;
}

// The model, then element (7, 9) off by 0.1 in the 40 x 70 x 600 random case
// (bound about 0.02 there).
void OffByATenthInCase4(const CallArgs& args, int64_t m, int64_t n, const AmxScratch& s) {
  AmxModelKernel(args, m, n, s);
  if (m == 40 && n == 70) args.c[7 * args.ldc + 9] += 0.1f;
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

TEST(AmxSelfCheckTest, TheModelOfTdpbf16psPassesWithinTheBound) {
  const AmxSelfCheck c = RunAmxSelfCheck(&AmxModelKernel, 60.0);
  EXPECT_TRUE(c.passed) << c.note;
  EXPECT_EQ(c.note, "");
}

TEST(AmxSelfCheckTest, AKernelThatDiesOfSigillFailsTheCheckAndThisProcessLives) {
  const AmxSelfCheck c = RunAmxSelfCheck(&DiesOfSigill, 60.0);
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.note, "the check process died of SIGILL");
}

TEST(AmxSelfCheckTest, AKernelThatDiesOfSigsegvFailsTheCheck) {
  const AmxSelfCheck c = RunAmxSelfCheck(&DiesOfSigsegv, 60.0);
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.note, "the check process died of SIGSEGV");
}

TEST(AmxSelfCheckTest, AHangingKernelIsKilledAtTheDeadline) {
  const AmxSelfCheck c = RunAmxSelfCheck(&Hangs, 1.0);
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.note, "no answer within 1 s; the check process was killed");
}

TEST(AmxSelfCheckTest, AWrongAnswerIsNamedWithItsCaseElementAndBound) {
  AmxSelfCheck c = RunAmxSelfCheck(&OffByOneInCase2, 60.0);
  EXPECT_FALSE(c.passed);
  EXPECT_TRUE(StartsWith(c.note, "case 2 of 5 (17x33x37, default): C[5][3] = ")) << c.note;
  EXPECT_NE(c.note.find("where the portable path gives"), std::string::npos) << c.note;
  EXPECT_NE(c.note.find("(bound 0)"), std::string::npos) << c.note;

  c = RunAmxSelfCheck(&OffByATenthInCase4, 60.0);
  EXPECT_FALSE(c.passed);
  EXPECT_TRUE(StartsWith(c.note, "case 4 of 5 (40x70x600, default): C[7][9] = ")) << c.note;

  c = RunAmxSelfCheck(&WritesNothing, 60.0);
  EXPECT_FALSE(c.passed);
  EXPECT_TRUE(StartsWith(c.note, "case 1 of 5 (1x1x1, default): C[0][0] = nan")) << c.note;
}

TEST(AmxSelfCheckTest, TheWarningIsOneLineNamingWhatFailedAndTheFallback) {
  const AmxSelfCheck c{false, "the check process died of SIGILL"};
  EXPECT_EQ(matmul_internal::AmxSelfCheckWarning(c, "avx512bf16"),
            "tpumesh: warning: AMX matmul self-check failed (the check process died of SIGILL); using avx512bf16");
}

// Where AMX may not run, nothing is checked and nothing picks AMX; where it
// may, the check of the real kernel must pass (a failure here is a bug).
TEST(AmxSelfCheckTest, TheProcessDecisionFollowsThisHost) {
  std::printf("[ amx      ] %s\n", AmxMatmulActive() ? "AMX matmul active (self-check passed)" : AmxMatmulNote().c_str());
  if (!AmxActive()) {
    EXPECT_FALSE(AmxMatmulActive());
    EXPECT_EQ(AmxMatmulNote(), "AMX " + ProcessAmxDecision().note);
    const StatusOr<Provider> amx = ResolveProvider(Provider::kAmx, Precision::kDefault);
    ASSERT_FALSE(amx.ok());
    EXPECT_EQ(amx.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(amx.status().message().find(ProcessAmxDecision().note), std::string::npos) << amx.status().ToString();
  } else {
    EXPECT_TRUE(AmxMatmulActive()) << AmxMatmulNote();
  }
  for (Precision p : {Precision::kDefault, Precision::kHigh}) {
    const StatusOr<Provider> automatic = ResolveProvider(Provider::kAuto, p);
    ASSERT_TRUE(automatic.ok());
    EXPECT_EQ(*automatic == Provider::kAmx, AmxMatmulActive()) << PrecisionName(p);
  }
  EXPECT_EQ(*ResolveProvider(Provider::kAuto, Precision::kHighest), Provider::kHighway);
  const StatusOr<Provider> highest = ResolveProvider(Provider::kAmx, Precision::kHighest);
  EXPECT_FALSE(highest.ok());
  EXPECT_EQ(ProviderName(Provider::kAmx), "amx");
}

// -------------------------------------------------------- data and references

using Problem = MatmulProblem;
constexpr auto MakeProblem = MakeMatmulProblem;
constexpr auto Name = MatmulProblemName;

// The exact sum (double) of the products the MXU sees and the sum of their
// magnitudes, from the operands as packed (B read back from `packed`).
struct Reference {
  std::vector<double> sum, abs;
  int64_t pairs = 0;
};

float PieceA(const Problem& p, int64_t i, int64_t kk, int role) {
  const float x = p.bf16_a ? Bf16ToF32(p.a16[i * p.k + kk]) : p.a[i * p.k + kk];
  bf16 hi, lo, cross;
  matmul_internal::SplitBf16(x, &hi, &lo, &cross);
  if (p.precision == Precision::kDefault) return Bf16ToF32(hi);
  return Bf16ToF32(role == 0 ? hi : role == 1 ? cross : lo);
}
float PieceB(const Problem& p, int64_t kk, int64_t j, int role) {
  bf16 hi, lo, cross;
  matmul_internal::SplitBf16(p.b[kk * p.n + j], &hi, &lo, &cross);
  if (p.precision == Precision::kDefault) return Bf16ToF32(hi);
  return Bf16ToF32(role == 0 ? hi : role == 1 ? lo : cross);
}

Reference MakeReference(const Problem& p) {
  Reference r;
  r.pairs = (p.k + 1) / 2 * (p.precision == Precision::kHigh ? 3 : 1);
  r.sum.assign(static_cast<size_t>(p.m * p.n), 0.0);
  r.abs.assign(r.sum.size(), 0.0);
  const int roles = p.precision == Precision::kHigh ? 3 : 1;
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      double s = 0, a = 0;
      for (int64_t kk = 0; kk < p.k; ++kk) {
        for (int role = 0; role < roles; ++role) {
          const double t = static_cast<double>(PieceA(p, i, kk, role)) * PieceB(p, kk, j, role);
          s += t;
          a += std::fabs(t);
        }
      }
      r.sum[i * p.n + j] = s;
      r.abs[i * p.n + j] = a;
    }
  }
  return r;
}

// The bound against the exact sum: tdpbf16ps's order (16 + 1 + G roundings
// at most per product) and the flushes; then one bias add.
double ExactBound(int64_t pairs, double abs, double value, bool bias) {
  const double g = static_cast<double>((pairs + 15) / 16);
  double bound = 1.01 * (17 + g) * kU * abs + (34 * g + 2) * std::ldexp(1.0, -126);
  if (bias) bound += 2 * kU * (std::fabs(value) + bound);
  return bound;
}

StatusOr<std::vector<float>> RunOn(const Problem& p, const PackedMatrix& b, int threads) {
  std::vector<float> c(static_cast<size_t>(p.m * p.n), std::numeric_limits<float>::quiet_NaN());
  const float* bias = p.bias ? p.bias_v.data() : nullptr;
  Status st = p.bf16_a ? Matmul(p.m, p.a16.data(), p.k, b, c.data(), p.n, threads, bias)
                       : Matmul(p.m, p.a.data(), p.k, b, c.data(), p.n, threads, bias);
  if (!st.ok()) return st;
  return c;
}

// got within `bound(i, j)` of want; the first few failures reported.
template <typename BoundFn>
void ExpectClose(const Problem& p, const std::vector<float>& got, const std::vector<float>& want, BoundFn bound,
                 const std::string& what) {
  int failures = 0;
  for (int64_t i = 0; i < p.m && failures < 3; ++i) {
    for (int64_t j = 0; j < p.n && failures < 3; ++j) {
      const double g = got[i * p.n + j], w = want[i * p.n + j], b = bound(i, j);
      if (!(std::fabs(g - w) <= b)) {
        ADD_FAILURE() << what << " " << Name(p) << ": C[" << i << "][" << j << "] = " << g << ", want " << w
                      << " (bound " << b << ")";
        ++failures;
      }
    }
  }
}

const int64_t kSizes[] = {1, 15, 16, 17, 31, 33, 100, 257};

// Odd shapes, each dimension over kSizes with the others odd, plus a few
// large ones across K blocks.
std::vector<Problem> OddProblems() {
  std::vector<Problem> v;
  uint32_t seed = 1;
  for (Precision q : {Precision::kDefault, Precision::kHigh}) {
    for (int64_t s : kSizes) {
      v.push_back(MakeProblem(s, 33, 31, q, false, false, seed));
      v.push_back(MakeProblem(17, s, 37, q, seed % 2 == 0, true, seed + 1));
      v.push_back(MakeProblem(15, 17, s, q, false, seed % 3 == 0, seed + 2));
      seed += 3;
    }
    v.push_back(MakeProblem(100, 257, 257, q, true, true, seed));
    v.push_back(MakeProblem(33, 65, 1031, q, false, false, seed + 1));  // several K blocks, a K tail
    seed += 2;
  }
  return v;
}

// ---------------------------------------- the model against the references

TEST(AmxModelTest, TheModelIsWithinTheBoundsOfTheExactSumAndThePortablePath) {
  for (const Problem& p : OddProblems()) {
    const StatusOr<PackedMatrix> b = PackedMatrix::Pack(p.k, p.n, p.b.data(), p.n, {p.precision, Provider::kHighway});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    const StatusOr<std::vector<float>> portable = RunOn(p, *b, 1);
    ASSERT_TRUE(portable.ok()) << portable.status().ToString();
    std::vector<float> model(static_cast<size_t>(p.m * p.n));
    CallArgs args;
    args.a_f32 = p.bf16_a ? nullptr : p.a.data();
    args.a_bf16 = p.bf16_a ? p.a16.data() : nullptr;
    args.lda = p.k;
    args.b = b->internal_data();
    args.c = model.data();
    args.ldc = p.n;
    args.bias = p.bias ? p.bias_v.data() : nullptr;
    AmxModelKernel(args, p.m, p.n, AmxScratch{});
    const Reference r = MakeReference(p);
    std::vector<float> exact(r.sum.size());
    for (size_t e = 0; e < exact.size(); ++e) {
      exact[e] = static_cast<float>(r.sum[e] + (p.bias ? p.bias_v[e % p.n] : 0.0));
    }
    ExpectClose(p, model, exact, [&](int64_t i, int64_t j) {
      return ExactBound(r.pairs, r.abs[i * p.n + j], exact[i * p.n + j], p.bias) + kU * std::fabs(exact[i * p.n + j]);
    }, "model vs exact");
    ExpectClose(p, model, *portable, [&](int64_t i, int64_t j) {
      const double bound = AmxDifferenceBound(r.pairs, r.abs[i * p.n + j]);
      return p.bias ? bound + std::ldexp(1.0, -23) * (std::fabs((*portable)[i * p.n + j]) + bound) : bound;
    }, "model vs portable");
  }
}

// ------------------------------------------------- the AMX kernel, AMX hosts

#define TPUMESH_REQUIRE_AMX() \
  if (!AmxMatmulActive()) GTEST_SKIP() << AmxMatmulNote()

TEST(AmxMatmulTest, MatchesTheExactSumThePortablePathAvx512Bf16AndTheModel) {
  TPUMESH_REQUIRE_AMX();
  int64_t model_bit_differences = 0, elements = 0;
  for (const Problem& p : OddProblems()) {
    const StatusOr<PackedMatrix> amx_b = PackedMatrix::Pack(p.k, p.n, p.b.data(), p.n, {p.precision, Provider::kAmx});
    const StatusOr<PackedMatrix> hwy_b = PackedMatrix::Pack(p.k, p.n, p.b.data(), p.n, {p.precision, Provider::kHighway});
    ASSERT_TRUE(amx_b.ok()) << amx_b.status().ToString();
    ASSERT_TRUE(hwy_b.ok()) << hwy_b.status().ToString();
    ASSERT_EQ(amx_b->provider(), Provider::kAmx);
    const StatusOr<std::vector<float>> amx = RunOn(p, *amx_b, 1);
    const StatusOr<std::vector<float>> portable = RunOn(p, *hwy_b, 1);
    ASSERT_TRUE(amx.ok()) << amx.status().ToString();
    ASSERT_TRUE(portable.ok()) << portable.status().ToString();
    const Reference r = MakeReference(p);
    std::vector<float> exact(r.sum.size());
    for (size_t e = 0; e < exact.size(); ++e) exact[e] = static_cast<float>(r.sum[e] + (p.bias ? p.bias_v[e % p.n] : 0.0));
    ExpectClose(p, *amx, exact, [&](int64_t i, int64_t j) {
      return ExactBound(r.pairs, r.abs[i * p.n + j], exact[i * p.n + j], p.bias) + kU * std::fabs(exact[i * p.n + j]);
    }, "amx vs exact");
    auto versus_chain = [&r, &p](const std::vector<float>& other) {
      return [&r, &p, o = &other](int64_t i, int64_t j) {
        const double bound = AmxDifferenceBound(r.pairs, r.abs[i * p.n + j]);
        return p.bias ? bound + std::ldexp(1.0, -23) * (std::fabs((*o)[i * p.n + j]) + bound) : bound;
      };
    };
    ExpectClose(p, *amx, *portable, versus_chain(*portable), "amx vs highway");
    if (Avx512Bf16Active()) {
      const StatusOr<PackedMatrix> bf16_b = PackedMatrix::Pack(p.k, p.n, p.b.data(), p.n, {p.precision, Provider::kBf16});
      ASSERT_TRUE(bf16_b.ok());
      const StatusOr<std::vector<float>> avx = RunOn(p, *bf16_b, 1);
      ASSERT_TRUE(avx.ok());
      ExpectClose(p, *amx, *avx, versus_chain(*avx), "amx vs avx512bf16");
    }
    // The SDM's model of tdpbf16ps: within the bound; how many elements
    // differ from it in their bits is printed (the SDM's pseudo-code against
    // this CPU).
    std::vector<float> model(static_cast<size_t>(p.m * p.n));
    CallArgs args;
    args.a_f32 = p.bf16_a ? nullptr : p.a.data();
    args.a_bf16 = p.bf16_a ? p.a16.data() : nullptr;
    args.lda = p.k;
    args.b = amx_b->internal_data();
    args.c = model.data();
    args.ldc = p.n;
    args.bias = p.bias ? p.bias_v.data() : nullptr;
    AmxModelKernel(args, p.m, p.n, AmxScratch{});
    ExpectClose(p, *amx, model, versus_chain(model), "amx vs model");
    for (size_t e = 0; e < model.size(); ++e) model_bit_differences += std::memcmp(&model[e], &(*amx)[e], 4) != 0;
    elements += static_cast<int64_t>(model.size());
  }
  std::printf("[ amx      ] %lld of %lld elements differ in their bits from the SDM's model of tdpbf16ps\n",
              static_cast<long long>(model_bit_differences), static_cast<long long>(elements));
}

TEST(AmxMatmulTest, ThreadCountsGiveTheSameBits) {
  TPUMESH_REQUIRE_AMX();
  for (Precision q : {Precision::kDefault, Precision::kHigh}) {
    const Problem p = MakeProblem(257, 100, 1031, q, false, true, 77);
    const StatusOr<PackedMatrix> b = PackedMatrix::Pack(p.k, p.n, p.b.data(), p.n, {q, Provider::kAmx});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    const StatusOr<std::vector<float>> one = RunOn(p, *b, 1);
    ASSERT_TRUE(one.ok());
    for (int threads : {2, 0}) {
      const StatusOr<std::vector<float>> many = RunOn(p, *b, threads);
      ASSERT_TRUE(many.ok());
      EXPECT_EQ(std::memcmp(one->data(), many->data(), one->size() * sizeof(float)), 0)
          << Name(p) << ": threads " << threads << " differ from threads 1";
    }
  }
}

TEST(AmxMatmulTest, KAutoPicksAmxAtDefaultAndHigh) {
  TPUMESH_REQUIRE_AMX();
  EXPECT_EQ(*ResolveProvider(Provider::kAuto, Precision::kDefault), Provider::kAmx);
  EXPECT_EQ(*ResolveProvider(Provider::kAuto, Precision::kHigh), Provider::kAmx);
  EXPECT_EQ(*ResolveProvider(Provider::kAuto, Precision::kHighest), Provider::kHighway);
}

// The implicit-GEMM conv on the AMX driver (conv_internal::Bf16Conv2d with a
// weight packed for kAmx) against the portable conv, within the bound with
// S <= K max|x| max|w| (values in [-1, 1)).
TEST(AmxMatmulTest, TheImplicitGemmConvMatchesThePortableConv) {
  TPUMESH_REQUIRE_AMX();
  const Conv2dShape s = MakeConv2dShape(2, 17, 9, 11, 33, 3, 1, 1);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(s.batch * s.in_channels * s.height * s.width));
  std::vector<float> w(static_cast<size_t>(s.out_channels * s.in_channels * 9)), bias(s.out_channels);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  for (float& v : bias) v = u(rng);
  const StatusOr<PackedConv2dWeight> amx_w =
      PackedConv2dWeight::Pack(s.out_channels, s.in_channels, 3, 3, w.data(), {Precision::kDefault, Provider::kAmx});
  const StatusOr<PackedConv2dWeight> hwy_w = PackedConv2dWeight::Pack(s.out_channels, s.in_channels, 3, 3, w.data(),
                                                                     {Precision::kDefault, Provider::kHighway});
  ASSERT_TRUE(amx_w.ok()) << amx_w.status().ToString();
  ASSERT_TRUE(hwy_w.ok()) << hwy_w.status().ToString();
  const size_t ny = static_cast<size_t>(s.batch * s.out_channels * s.out_height() * s.out_width());
  std::vector<float> got(ny, std::numeric_limits<float>::quiet_NaN()), want(ny);
  ASSERT_TRUE(conv_internal::Bf16Conv2d(s, x.data(), amx_w->matrix(), bias.data(), got.data(), 2).ok());
  ASSERT_TRUE(Conv2dPacked(s, x.data(), *hwy_w, bias.data(), want.data(), 1).ok());
  const int64_t pairs = (s.gemm_k() + 1) / 2;
  for (size_t e = 0; e < ny; ++e) {
    const double bound = AmxDifferenceBound(pairs, static_cast<double>(s.gemm_k()));
    ASSERT_LE(std::fabs(static_cast<double>(got[e]) - want[e]), bound + std::ldexp(1.0, -23) * (std::fabs(want[e]) + bound))
        << "y[" << e << "]";
  }
}

}  // namespace
}  // namespace tpumesh::kernels
