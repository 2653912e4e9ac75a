// StableHLO's `fft` op (spec: docs/spec.md "fft"), as XLA's CPU backend
// computes it: forward and inverse complex transforms (FFT, IFFT), real to
// complex (RFFT) and complex to real (IRFFT), over the 1-3 trailing
// dimensions named by fft_length, for any lengths.
//
// Definitions, with n = fft_length, the transformed dims outermost first and
// w_n = exp(-2 pi i / n):
//   FFT    X[k] = sum_j x[j] w^(j.k) over every transformed dim.
//   IFFT   x[j] = (1 / prod n) sum_k X[k] w^(-j.k) (XLA:CPU scales by
//          1 / prod fft_length, as numpy's and JAX's ifftn).
//   RFFT   FFT of the real input, the last dim cut to n[-1] / 2 + 1 bins.
//   IRFFT  the inverse of RFFT: the leading dims inverse-transformed first,
//          then each last-dim row of h = n[-1] / 2 + 1 bins extended to the
//          Hermitian spectrum of n[-1] and inverse-transformed to reals. The
//          imaginary parts of bin 0 and (for even n[-1]) bin n[-1] / 2 are
//          ignored, as pocketfft / DUCC (XLA:CPU's library) ignore them.
//
// Layouts, row-major, `batch` = the product of the leading (untransformed)
// dims: complex buffers are interleaved (re, im) pairs of the scalar type.
//   FFT, IFFT  in, out complex [batch, n...]
//   RFFT       in real [batch, n...], out complex [batch, n[:-1]..., h]
//   IRFFT      in complex [batch, n[:-1]..., h], out real [batch, n...]
// out must not overlap in.
//
// Precision: every transform is computed in double with twiddles
// exp(-2 pi i k / n) evaluated in long double on an argument reduced to
// [0, pi/4] (so each is the correctly rounded double, or within an ulp), then
// rounded once to the output type. f32 outputs are within about 1 ulp of the
// exact DFT of the f32 inputs, relative to the transform's largest output
// (tests/kernels/fft_test.cc measures it against a long double DFT), and
// within 3.2e-7 of JAX's own f32 results (tests/kernels/jax_parity_test.cc;
// XLA:CPU's DUCC computes in f32). Lengths
// whose prime factors are all <= 13 run mixed-radix Cooley-Tukey (radices 4,
// 2, 3, 5 and 7-13 as a generic butterfly); any other length runs
// Bluestein's chirp-z on a 2^a 3^b 5^c length >= 2n - 1: O(n log n) for
// every n.
//
// Threads as kernels/ops_parallel.h: the tasks are batch entries, each
// transform is computed whole by one thread in the same order, so results are
// bit-identical for every thread count.
#ifndef TPUMESH_KERNELS_FFT_H_
#define TPUMESH_KERNELS_FFT_H_

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/cost.h"

namespace tpumesh::kernels {

// StableHLO's fft_type, in its order (XLA's FftType numbers them 0-3 too).
enum class FftType { kFft = 0, kIfft = 1, kRfft = 2, kIrfft = 3 };

// "FFT", "IFFT", "RFFT", "IRFFT".
const char* FftTypeName(FftType type);

struct FftShape {
  FftType type = FftType::kFft;
  int64_t batch = 1;                // product of the untransformed leading dims
  std::vector<int64_t> fft_length;  // 1-3 entries, outermost first
};

// From a StableHLO operand's dims: checks the spec's (C1) rank >= size of
// fft_length, (C3) 1-3 lengths, (C4)/(C5) the trailing dims against
// fft_length (IRFFT's last operand dim is fft_length[-1] / 2 + 1; FFT and
// IFFT require the trailing dims equal to fft_length, as XLA's shape
// inference does); InvalidArgument names the dim. Lengths may be 0 (an
// empty result).
StatusOr<FftShape> MakeFftShape(FftType type,
                                std::span<const int64_t> operand_dims,
                                std::span<const int64_t> fft_length);

// InvalidArgument unless batch >= 0, 1-3 lengths each >= 0, and every count
// fits in int64; Unimplemented for an fft_type outside the enum.
Status CheckFft(const FftShape& s);

// Elements (complex or real, as the layout says) of the operand and result.
int64_t FftOperandElements(const FftShape& s);
int64_t FftResultElements(const FftShape& s);

Status FftF32(const FftShape& s, const float* in, float* out,
              int num_threads = 1);
Status FftF64(const FftShape& s, const double* in, double* out,
              int num_threads = 1);

// XLA's count (xla/service/hlo_cost_analysis.cc, HandleFft), so pricing
// agrees with XLA: flops = 2 (FMA) x 4 (FMAs per complex multiply) x
// prod_i floor(log2 fft_length[i]) x operand elements; no transcendentals
// (the twiddles are tables). Note the product, not the sum, of the logs, and
// 0 for any length 1: that is XLA's formula, kept as is. Bytes: the operand
// read once, the result written once (bytes_per_real 4 or 8; a complex
// element is two reals).
OpCost FftCost(const FftShape& s, int bytes_per_real);

// The textbook count for comparison: 5 N log2 N per complex transform of N
// = prod fft_length points, half that for RFFT / IRFFT, times batch.
double FftTextbookFlops(const FftShape& s);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_FFT_H_
