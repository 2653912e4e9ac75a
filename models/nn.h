// The layers the Stable Diffusion models are built from, on host-memory
// mesh::Arrays in f32, with PyTorch's layouts (NCHW activations, Linear
// weights [out, in], conv weights [out, in, kh, kw]).
//
// Costs: with Ctx::ops set, each call appends an OpRecord (figures from
// kernels' cost functions; the MXU's matmuls for Linear, Conv2d and
// Attention). Bytes are counted as the chip would move them: bf16 (2 bytes
// per element) at kDefault — the seed's bf16 pipeline keeps weights and
// activations in bf16 — and f32 at kHighest.
//
// Contract: every function checks shapes before computing (InvalidArgument
// naming the layer and both shapes) and allocates its output through the Ctx
// — on the Ctx's device, counted against its HBM (ResourceExhausted when it
// is full), or on the host. Matrix products follow the precision of the Ctx:
// kHighest is f32 throughout; kDefault is the MXU's — both operands rounded
// to bf16 (round-to-nearest-even), products accumulated in f32 (exactly: a
// bf16 x bf16 product is exact in f32), as jax.lax.Precision.DEFAULT on a
// TPU. Norms, softmax and activations run in f32 either way. Results do not
// depend on the host's thread count.
//
// Kernels: Linear and Conv2d run on kernels/matmul (the AVX512-BF16
// vdpbf16ps micro-kernel at kDefault where the CPU has it, Highway
// elsewhere; BLIS f32 at kHighest), Linear with its weight packed once per
// model (WeightPacks) and Conv2d as kernels/conv2d's im2col chunks; attention
// is kernels/attention (flash style, never a full Lq x Lk score matrix). At
// kDefault attention's Q, K and V are rounded to bf16; its softmax
// probabilities stay f32 (a TPU would feed them to the MXU as bf16; the
// difference is within the bf16 tolerance and stated here so it is not
// silent). Threads: Ctx::threads, 0 meaning the caller's TBB arena (inside
// a pmap, the device's arena); work is never split along a reduction, so
// every thread count gives the same bits.
#ifndef TPUMESH_MODELS_NN_H_
#define TPUMESH_MODELS_NN_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kernels/matmul.h"
#include "mesh/array.h"
#include "mesh/cost_model.h"

namespace tpumesh::models {

enum class Precision { kDefault, kHighest };
StatusOr<Precision> ParsePrecision(std::string_view s);  // "default" | "highest"

// Linear weights packed into the matmul kernel's layout (W^T, [in, out]),
// built on first use and kept as long as this object: the "plan-time"
// packing of a model's weights. Keyed by the weight's storage, which the
// owner (a ParamMap) keeps alive. Thread-safe: the devices of a pmap share
// one model.
class WeightPacks {
 public:
  StatusOr<const kernels::PackedMatrix*> Linear(const mesh::Array& w, Precision precision);
  size_t bytes() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<const void*, int>, std::unique_ptr<kernels::PackedMatrix>> packs_;
};

struct Ctx {
  mesh::Device* device = nullptr;  // where outputs live; nullptr: the host
  Precision precision = Precision::kHighest;
  WeightPacks* packs = nullptr;  // nullptr: pack per call
  int threads = 0;               // 0: the caller's TBB arena; 1: this thread
  // When set, every layer call appends what it costs (mesh/cost_model.h),
  // with the host time it took. One list per device: not shared.
  std::vector<mesh::OpRecord>* ops = nullptr;
  // Shapes only: layers check, allocate (and count HBM) and record, but
  // compute nothing; outputs hold unspecified values. `tpumesh simulate`.
  bool dry_run = false;
  StatusOr<mesh::Array> Alloc(mesh::Shape shape, std::string_view what) const;
  Ctx WithPacks(WeightPacks* p) const {
    Ctx c = *this;
    if (c.packs == nullptr) c.packs = p;
    return c;
  }
};

using mesh::Array;

// y[..., out] = x[..., in] W^T + b (b may be null).
StatusOr<Array> Linear(const Ctx& ctx, const Array& x, const Array& w, const Array* b);
// x [N, C, H, W] -> [N, O, Ho, Wo] with w [O, C, kh, kw]; padding per side.
StatusOr<Array> Conv2d(const Ctx& ctx, const Array& x, const Array& w, const Array* b, int stride,
                       int pad_top, int pad_left, int pad_bottom, int pad_right);
inline StatusOr<Array> Conv2d(const Ctx& ctx, const Array& x, const Array& w, const Array* b,
                              int stride = 1, int pad = 0) {
  return Conv2d(ctx, x, w, b, stride, pad, pad, pad, pad);
}
// GroupNorm over [N, C, ...]; optional SiLU after it (the common pairing).
StatusOr<Array> GroupNorm(const Ctx& ctx, const Array& x, int groups, const Array& gamma,
                          const Array& beta, float eps, bool silu = false);
// LayerNorm over the last dimension.
StatusOr<Array> LayerNorm(const Ctx& ctx, const Array& x, const Array& gamma, const Array& beta,
                          float eps);
void SiluInPlace(const Ctx& ctx, Array& x);
void GeluInPlace(const Ctx& ctx, Array& x);       // exact (erf)
void QuickGeluInPlace(const Ctx& ctx, Array& x);  // x * sigmoid(1.702 x)
// diffusers GEGLU after its projection: x [..., 2F] -> a * gelu(b), a, b = split.
StatusOr<Array> GegluSplit(const Ctx& ctx, const Array& x);
// Multi-head scaled-dot-product attention. q [B, Lq, H*D], k and v [B, Lk,
// H*D], heads interleaved in the last dimension as diffusers reshapes them;
// scale 1/sqrt(D); causal masks key j > query i. Query blocks of 128 rows:
// never more than 128 x Lk scores at once.
StatusOr<Array> Attention(const Ctx& ctx, const Array& q, const Array& k, const Array& v, int heads,
                          bool causal);
// x [N, C, H, W] -> [N, C, 2H, 2W], nearest.
StatusOr<Array> UpsampleNearest2x(const Ctx& ctx, const Array& x);
// [N, Ca, H, W] ++ [N, Cb, H, W] -> [N, Ca+Cb, H, W].
StatusOr<Array> ConcatChannels(const Ctx& ctx, const Array& a, const Array& b);
// x += y (same shape).
Status AddInPlace(const Ctx& ctx, Array& x, const Array& y);
// x [N, C, ...] += v [N, C] broadcast over the trailing dimensions.
Status AddPerChannelInPlace(const Ctx& ctx, Array& x, const Array& v);
// [N, C, H, W] <-> [N, H*W, C].
StatusOr<Array> NchwToNlc(const Ctx& ctx, const Array& x);
StatusOr<Array> NlcToNchw(const Ctx& ctx, const Array& x, int64_t h, int64_t w);
// diffusers get_timestep_embedding: [B] timesteps -> [B, dim].
StatusOr<Array> TimestepEmbedding(const Ctx& ctx, const std::vector<float>& timesteps, int dim,
                                  bool flip_sin_to_cos, float downscale_freq_shift);

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_NN_H_
