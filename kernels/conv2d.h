// 2-D convolution, NCHW f32, in two forms:
//  - Conv2dPacked: on the MXU matmul (kernels/matmul.h) with the weight
//    packed once at plan time (PackedConv2dWeight), MXU precision semantics;
//    on AVX512-BF16 CPUs an implicit GEMM that never builds an im2col matrix.
//    What a model runs.
//  - Conv2dF32: im2col + a GEMM supplied by the caller (BLIS by default): the
//    convolution owns the data movement, the GEMM owns the arithmetic.
//
// Conv2dF32:
// Layouts are PyTorch's, so diffusers checkpoints load unchanged: x [N, C_in,
// H, W], w [C_out, C_in, kh, kw] (= a row-major [C_out, K] matrix, K = C_in *
// kh * kw), bias [C_out] or null, y [N, C_out, Ho, Wo], Ho = (H + pad_top +
// pad_bottom - kh) / stride + 1 (Wo alike). Per image the op is one matrix
// product y_img[C_out, Ho*Wo] = w[C_out, K] * col[K, Ho*Wo], where col row
// (ci, dy, dx) holds x[ci, oy*stride + dy - pad_top, ox*stride + dx - pad_left]
// (zero outside the image). NCHW makes the output's natural GEMM layout the
// activation layout itself: no transpose on the way out, and a 1x1 stride-1
// unpadded conv needs no im2col at all (col = x_img). The pixels of an image
// are cut into chunks of whole output rows (col near 1.5 MiB, at least 128
// pixels) and the GEMM is called once per chunk with ldc = Ho*Wo; images
// with fewer than 2 chunks (SD's 8x8 and 16x16 levels) also split C_out into
// blocks of >= 128 rows, so that two threads find work at batch 1.
//
// Contract: CheckConv2d runs before any compute (InvalidArgument naming the
// field). Any kh, kw, stride >= 1 and padding >= 0 are supported (SIMD
// im2col for stride 1 and 2, a scalar gather for larger strides). y must not
// overlap x, w or bias. Threads as kernels/ops_parallel.h: the chunks are the
// same for every thread count, so y is bit-identical for every num_threads —
// provided the GEMM is deterministic per call; with num_threads != 1 the GEMM
// is called from several threads at once and must be thread-safe.
#ifndef TPUMESH_KERNELS_CONV2D_H_
#define TPUMESH_KERNELS_CONV2D_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "base/status.h"
#include "kernels/cost.h"
#include "kernels/matmul.h"

namespace tpumesh::kernels {

// C[m, n] = A[m, k] * B[k, n]; all row-major with leading dimensions lda, ldb,
// ldc >= the row length. C is overwritten and never read (beta = 0). k may be
// 0 (C becomes zero).
using GemmFn = std::function<void(int64_t m, int64_t n, int64_t k,
                                  const float* a, int64_t lda, const float* b,
                                  int64_t ldb, float* c, int64_t ldc)>;

// A GemmFn on the matmul kernel (kernels/matmul.h) at `options`' precision
// and provider, one thread per call (the conv spreads the chunks); B, the
// im2col chunk, is packed per call. A call the kernel refuses (it cannot,
// for shapes the conv produces) sets *failed.
GemmFn MatmulGemm(const MatmulOptions& options, std::atomic<bool>* failed);

// The default GemmFn: BLIS sgemm with one thread per call (kernels/gemm_f32.h).
void GemmF32Blis(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float* c, int64_t ldc);

struct Conv2dShape {
  int64_t batch = 1;
  int64_t in_channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t out_channels = 0;
  int64_t kernel_h = 3;
  int64_t kernel_w = 3;
  int64_t stride = 1;
  int64_t pad_top = 0;
  int64_t pad_left = 0;
  int64_t pad_bottom = 0;
  int64_t pad_right = 0;

  int64_t out_height() const {
    return (height + pad_top + pad_bottom - kernel_h) / stride + 1;
  }
  int64_t out_width() const {
    return (width + pad_left + pad_right - kernel_w) / stride + 1;
  }
  int64_t gemm_k() const { return in_channels * kernel_h * kernel_w; }
};

// A conv with the same padding on every side, as torch.nn.Conv2d(padding=p).
Conv2dShape MakeConv2dShape(int64_t batch, int64_t in_channels, int64_t height,
                            int64_t width, int64_t out_channels, int64_t kernel,
                            int64_t stride, int64_t pad);

Status CheckConv2d(const Conv2dShape& s);

// y = conv(x, w) + bias. An empty gemm means GemmF32Blis.
Status Conv2dF32(const Conv2dShape& s, const float* x, const float* w,
                 const float* bias, float* y, const GemmFn& gemm = {},
                 int num_threads = 1);

// flops = 2 N C_out Ho Wo K (+ N C_out Ho Wo with a bias); reads x, w, bias
// once; writes y once. The im2col copy is this host's overhead, not counted.
OpCost Conv2dCost(const Conv2dShape& s, bool has_bias = true);

// The weight of Conv2dPacked: w [C_out, C_in, kh, kw] as the matmul's packed
// B operand W^T [K, C_out], K = kh * kw * C_in ordered (dy, dx, c_in) — the
// order of a channels-last image, so the K values of one output pixel are kh
// runs of kw * C_in contiguous input values. Packed once (plan time) for one
// precision and provider (MatmulOptions; kAuto resolved as for the matmul)
// and independent of the image size; owns its storage, move-only, immutable,
// may be shared by concurrent calls.
class PackedConv2dWeight {
 public:
  PackedConv2dWeight() = default;

  // InvalidArgument for a dimension < 1 or a null w; Unimplemented when the
  // provider cannot run the precision here (as PackedMatrix::Pack).
  static StatusOr<PackedConv2dWeight> Pack(int64_t out_channels, int64_t in_channels,
                                           int64_t kernel_h, int64_t kernel_w,
                                           const float* w, const MatmulOptions& options = {});

  bool empty() const { return wt_.empty(); }
  int64_t out_channels() const { return out_channels_; }
  int64_t in_channels() const { return in_channels_; }
  int64_t kernel_h() const { return kernel_h_; }
  int64_t kernel_w() const { return kernel_w_; }
  Precision precision() const { return wt_.precision(); }
  Provider provider() const { return wt_.provider(); }  // resolved
  size_t size_bytes() const { return wt_.size_bytes(); }
  const PackedMatrix& matrix() const { return wt_; }  // W^T [K, C_out]

 private:
  PackedMatrix wt_;
  int64_t out_channels_ = 0, in_channels_ = 0, kernel_h_ = 0, kernel_w_ = 0;
};

// y = conv(x, w) + bias on the matmul kernel, with the weight's precision:
// at kDefault x and w are rounded to bf16 (nearest even), the products are
// exact and summed in f32, then the bias is added in f32 (y = sum + bias).
// Any kernel size, stride, padding and batch (as CheckConv2d); bias may be
// null; y must not overlap x, w or bias.
//
// How: x is first copied into a zero-padded channels-last image xt [N, H +
// pad_top + pad_bottom, W + pad_left + pad_right, C_in] (bf16 at kDefault).
// With provider kBf16 at kDefault the product y^T[pixels, C_out] = col^T W^T
// is an implicit GEMM (conv2d_bf16.cc): the matmul's micro-kernel
// (bf16_gemm_14x32c2) runs on A rows gathered per tile straight from xt (kh
// copies of kw * C_in values per output pixel), and its 14 x 32 output tiles
// are stored transposed into NCHW with the bias; no im2col matrix exists.
// Other providers and precisions gather im2col rows per chunk of about 256
// output pixels and call Matmul on them, then transpose the chunk into NCHW.
//
// Determinism: each y element is one f32 chain over K in the kernel's fixed
// order (K is never split), so y is bit-identical for every num_threads
// (threads as kernels/ops_parallel.h), and kBf16 and kHighway give the same
// bits at kDefault and kHigh (denormals aside: vdpbf16ps and vcvtne2ps2bf16
// treat them as zero, as for the matmul).
//
// Errors, all before compute: CheckConv2d's; InvalidArgument when the
// weight's dimensions differ from the shape's or a pointer is null;
// Unimplemented when the weight was packed for kBf16 and this CPU lacks it;
// ResourceExhausted when the channels-last copy cannot be allocated.
Status Conv2dPacked(const Conv2dShape& s, const float* x, const PackedConv2dWeight& w,
                    const float* bias, float* y, int num_threads = 1);

// The same with the caller's own packing of W^T [K, C_out], K ordered (dy,
// dx, c_in) (e.g. a model's weight cache; PackedConv2dWeight::matrix() is
// one): InvalidArgument unless wt.k() == s.gemm_k() and wt.n() ==
// s.out_channels.
Status Conv2dPacked(const Conv2dShape& s, const float* x, const PackedMatrix& wt,
                    const float* bias, float* y, int num_threads = 1);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_CONV2D_H_
