// Matrix multiply with TPU MXU semantics: C[M,N] = A[M,K] x B[K,N].
//
// Contract. A is row-major with leading dimension lda (element (i,k) at
// a[i*lda + k]), C row-major with ldc; B is given row-major (ldb) once and
// packed into a PackedMatrix, the kernel's own layout, which every later call
// reuses (weights are packed at plan time, as a jit-compiled executable
// would). beta = 0 always: C is overwritten and never read, so garbage or NaN
// already in C never reaches the result. Inputs may be f32 or bf16; C is f32.
//
// Precision follows jax.lax.Precision on a TPU:
//   kDefault  one bf16 pass: A and B rounded to bf16 (round to nearest, ties
//             to even), products exact, accumulated in f32.
//   kHigh     bf16x3: x = x_hi + x_lo with x_hi = bf16(x), x_lo = bf16(x -
//             x_hi); C = a_hi*b_hi + a_hi*b_lo + a_lo*b_hi, f32 accumulation.
//   kHighest  f32 operands and f32 accumulation (an f32 GEMM).
//
// Providers:
//   kAmx      AMX tile micro-kernel (tdpbf16ps on 16x16 f32 accumulator
//             tiles; matmul_amx_kernel.h), kDefault and kHigh, on the same
//             packed layout as kBf16, only where AmxMatmulActive(): the amx
//             path is active (AmxActive in kernels/cpu_path.h; TPUMESH_SIMD=
//             avx512bf16 or lower turns it off) and the process's known-answer
//             self-check passed (run once, in a forked child, on the first
//             ResolveProvider of kAuto or kAmx at kDefault/kHigh; a failure
//             prints one warning line and leaves AMX off). kAuto's choice for
//             kDefault and kHigh wherever it is active.
//   kBf16     AVX512-BF16 micro-kernel (vdpbf16ps), kDefault and kHigh, only
//             where the avx512bf16 path is active (Avx512Bf16Active in
//             kernels/cpu_path.h: the CPU and OS have it and TPUMESH_SIMD
//             does not cap below it). The kAuto choice for kDefault and
//             kHigh where kAmx is not and vdpbf16ps outruns f32 FMAs
//             (Bf16DotOutrunsFma in kernels/peak.h, probed once per process:
//             yes on Zen 4, no on Sapphire/Emerald Rapids Xeons).
//   kHighway  portable Highway SIMD, every precision, every CPU; the
//             reference for the others; kAuto's choice for kDefault and
//             kHigh where kAmx and kBf16 are not.
//   kBlis     BLIS sgemm, every precision (kDefault/kHigh by multiplying the
//             bf16-rounded pieces in f32), on whatever sub-configuration
//             libblis selected (BlisConfig below: on a CPU it does not know,
//             its reference kernels). Only when asked for.
// kAuto at kHighest is kHighway on every host: its f32 kernel (12 x 32 or
// 6 x 16 f32 FMA tiles) is within a few percent of BLIS's best
// configuration or well ahead of it (Zen 4: 3% behind zen3, ahead of skx;
// Zen 5: 445 GFLOP/s against skx's 397 and the 84 of the 'generic'
// configuration Debian's BLIS 0.9 selects there; Emerald Rapids: 1.2-2x
// skx), it never depends on which configuration libblis picked, and it sums
// each C element in one FMA chain in k order, so C has the same bits on
// every FMA target (AVX2, AVX-512) and thread count (docs/kernels.md, "The
// f32 provider").
// For kDefault and kHigh, kBf16 and kHighway produce the same bits: both
// accumulate each C element in one f32 chain over k in the same order (k+1
// before k within each pair of k, as vdpbf16ps does), and a product of two
// bf16 values is exact in f32. The one exception is denormals: vdpbf16ps
// treats denormal operands and partial sums as zero (so does a TPU's MXU),
// Highway keeps them. kBlis sums in BLIS's own order (differences of a few
// f32 ulps of the sum of |products|). kAmx multiplies the same bf16 operands
// but sums them as tdpbf16ps does (per 16 pairs: an even-k and an odd-k f32
// chain, added, then added to C; denormals flushed), so it differs from the
// others by f32 rounding only, within matmul_internal::AmxDifferenceBound
// (docs/kernels.md, "The kAmx provider"); it is deterministic, and the same
// for every thread count, as the others.
//
// Threads: `threads` = 1 computes on the calling thread; n > 1 in a private
// TBB arena of n threads (at most the host's cores); 0 in the caller's current
// TBB arena (inside a mesh::Device, the device's arena). Work is split over
// blocks of rows and columns of C, never over K, so every C element is
// computed by the same sequence of operations whatever the thread count: C is
// bit-identical for every `threads`. BLIS runs one thread per block.
//
// Errors: every shape and argument check runs before any compute and returns
// InvalidArgument naming the dimension; a provider that cannot do the request
// (kBf16 without AVX512-BF16, kAmx where AmxMatmulActive() is false, either
// with kHighest) returns Unimplemented.
// All functions are thread-safe; a PackedMatrix is immutable once built and
// may be shared by concurrent calls.
#ifndef TPUMESH_KERNELS_MATMUL_H_
#define TPUMESH_KERNELS_MATMUL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "kernels/bf16.h"
#include "kernels/cpu_path.h"

namespace tpumesh::kernels {

enum class Precision { kDefault, kHigh, kHighest };
enum class Provider { kAuto, kHighway, kBf16, kBlis, kAmx };

std::string_view PrecisionName(Precision p);  // "default", "high", "highest"
std::string_view ProviderName(Provider p);    // "auto", "highway", "bf16", "blis", "amx"

// Number of MXU-style passes a precision costs: 1, 3, or (kHighest, which a
// TPU runs as bf16x6) 6.
int PrecisionPasses(Precision p);

// The provider that `requested` means for `precision` on this CPU (kAuto
// resolved as above), or Unimplemented when it cannot run here.
StatusOr<Provider> ResolveProvider(Provider requested, Precision precision);

// Whether the kAmx provider may run in this process: AmxActive() and the
// AMX self-check passed (it runs here on the first call where AmxActive();
// thread-safe, once per process). False without running anything where
// AMX is not active.
bool AmxMatmulActive();
// Empty when AmxMatmulActive(); else why not, in one phrase: "AMX not on
// this CPU (CPUID lacks amx_bf16, amx_tile)" (the AMX decision's note,
// kernels/cpu_path.h) or "AMX matmul self-check failed (<what failed>)".
std::string AmxMatmulNote();

// Name of the Highway target the kHighway provider dispatches to now
// (e.g. "AVX3_DL").
std::string_view HighwayTargetName();

// The BLIS sub-configuration the kBlis provider runs on: what libblis
// selected at its initialisation (bli_arch_query_id / bli_arch_string; the
// environment's BLIS_ARCH_TYPE overrides it, and TPUMESH_SIMD below avx512
// sets that, kernels/cpu_path.h).
struct BlisConfig {
  std::string name;  // "skx", "zen3", "haswell", "penryn", "generic", ...
  // The path its kernels need (skx, knl: avx512; haswell, zen, zen2, zen3:
  // avx2; sandybridge, penryn and the FMA4 AMD ones: baseline); false for
  // 'generic' and any configuration that is not an optimised x86-64 one
  // (reference kernels).
  bool optimized = false;
  CpuPath path = CpuPath::kBaseline;
  // One phrase: "avx2 kernels", "avx2 kernels, below this process's
  // avx512bf16 path", "reference kernels: libblis has no configuration for
  // this CPU".
  std::string note;
};

// Classifies a libblis configuration name for a process on path `active`.
BlisConfig ClassifyBlisConfig(std::string_view name, CpuPath active);

// This process's configuration (initialises BLIS on the first call;
// thread-safe).
const BlisConfig& ProcessBlisConfig();

struct MatmulOptions {
  Precision precision = Precision::kDefault;
  Provider provider = Provider::kAuto;
};

namespace matmul_internal {
struct PackedData;
}

// B[K,N] in the layout of one provider and precision: bf16 (or bf16 hi/lo)
// pairs in 32-column panels for kAmx/kBf16/kHighway at kDefault/kHigh, f32
// 32-column panels for kHighway at kHighest, a plain (expanded) f32 matrix
// for kBlis. Owns its storage; move-only; immutable after Pack.
class PackedMatrix {
 public:
  PackedMatrix();
  ~PackedMatrix();
  PackedMatrix(PackedMatrix&&) noexcept;
  PackedMatrix& operator=(PackedMatrix&&) noexcept;
  PackedMatrix(const PackedMatrix&) = delete;
  PackedMatrix& operator=(const PackedMatrix&) = delete;

  // Packs row-major b[k, n] (leading dimension ldb >= n). b is only read
  // during the call.
  static StatusOr<PackedMatrix> Pack(int64_t k, int64_t n, const float* b, int64_t ldb,
                                     const MatmulOptions& options = {});
  static StatusOr<PackedMatrix> Pack(int64_t k, int64_t n, const bf16* b, int64_t ldb,
                                     const MatmulOptions& options = {});
  // Packs B = bt^T given bt row-major [n, k] (B[kk][col] = bt[col*ldbt + kk],
  // ldbt >= k): the K^T of an X K^T product without a transposed copy.
  static StatusOr<PackedMatrix> PackTransposed(int64_t k, int64_t n, const float* bt, int64_t ldbt,
                                               const MatmulOptions& options = {});

  bool empty() const { return data_ == nullptr; }
  int64_t k() const;
  int64_t n() const;
  Precision precision() const;
  Provider provider() const;  // resolved: never kAuto
  size_t size_bytes() const;  // packed storage

  const matmul_internal::PackedData* internal_data() const { return data_.get(); }

 private:
  explicit PackedMatrix(std::unique_ptr<matmul_internal::PackedData> data);
  std::unique_ptr<matmul_internal::PackedData> data_;
};

// C[m, b.n()] = A[m, b.k()] x B (+ bias). lda >= b.k(), ldc >= b.n(); C
// must not overlap A. bias (b.n() floats, may be null): added to each row of
// C once its sum is done, one f32 add per element (the bits of adding it
// afterwards), while the tile is still in cache: a Linear layer's bias
// without a pass over C.
Status Matmul(int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c,
              int64_t ldc, int threads = 1, const float* bias = nullptr);
Status Matmul(int64_t m, const bf16* a, int64_t lda, const PackedMatrix& b, float* c,
              int64_t ldc, int threads = 1, const float* bias = nullptr);

// `batch` independent products sharing one B: C_i = A_i x B with
// A_i = a + i*batch_stride_a, C_i = c + i*batch_stride_c (in elements).
// Threads split over batch entries and blocks alike.
Status MatmulBatch(int64_t batch, int64_t m, const float* a, int64_t lda, int64_t batch_stride_a,
                   const PackedMatrix& b, float* c, int64_t ldc, int64_t batch_stride_c,
                   int threads = 1);
Status MatmulBatch(int64_t batch, int64_t m, const bf16* a, int64_t lda, int64_t batch_stride_a,
                   const PackedMatrix& b, float* c, int64_t ldc, int64_t batch_stride_c,
                   int threads = 1);

// Unpacked convenience: packs b (a copy, freed on return) and multiplies.
// Prefer PackedMatrix when B is reused.
Status Matmul(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
              int64_t ldb, float* c, int64_t ldc, const MatmulOptions& options = {},
              int threads = 1);
Status Matmul(int64_t m, int64_t n, int64_t k, const bf16* a, int64_t lda, const bf16* b,
              int64_t ldb, float* c, int64_t ldc, const MatmulOptions& options = {},
              int threads = 1);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_MATMUL_H_
