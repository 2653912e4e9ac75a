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
// Kernels: Linear and Conv2d run on kernels/matmul (provider kAuto: the
// AVX512-BF16 vdpbf16ps micro-kernel at kDefault where the CPU has it and it
// outruns f32 FMAs, Highway elsewhere, the same bits either way; Highway's
// f32 kernel at kHighest) with the weight as the packed
// operand, packed once per model (WeightPacks). Conv2d is
// kernels::Conv2dPacked on the packed W^T [(dy, dx, c), C_out]: pixel-major
// y^T = col^T W^T from a channels-last copy of the input (bf16 at kDefault);
// on AVX512-BF16 an implicit GEMM that gathers each pixel's K values while
// packing the micro-kernel's A panel and stores its tiles straight into NCHW
// with the bias (kernels/conv2d.h). Norms, activations, GEGLU and the
// elementwise ops are kernels' Highway versions; attention is
// kernels/attention (flash style, never a full Lq x Lk score matrix). At
// kDefault attention's Q, K and V are rounded to bf16; its softmax
// probabilities stay f32 (a TPU would feed them to the MXU as bf16; the
// difference is within the bf16 tolerance and stated here so it is not
// silent). Threads: Ctx::threads, 0 meaning the caller's TBB arena (inside
// a pmap, the device's arena); work is cut by shape only and never split
// along a reduction (each output element is one f32 chain over K in a fixed
// order), so every thread count and device count gives the same bits
// (tests/models/determinism_test.cc).
#ifndef TPUMESH_MODELS_NN_H_
#define TPUMESH_MODELS_NN_H_

#include <atomic>
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

// Weights packed into the matmul kernel's layout, each built once and kept
// as long as this object: the emulated counterpart of packing at plan time.
// A Linear weight W [out, in] becomes W^T [in, out]; a conv weight [O, C, kh,
// kw] becomes W^T [(dy, dx, c), O] (a 1x1 conv's is a Linear's); bf16 pair
// panels at kDefault (half the f32 size), BLIS's f32 copy at kHighest.
//
// Ownership and lifetime: a ParamMap owns one (shared by its copies, so by
// every device a model is replicated to) and lives as long as the model.
// Entries are keyed by (the weight's storage address, precision); the owner
// keeps those arrays alive and unchanged, so an address is never reused for
// another weight while the packs exist. A returned pointer stays valid for
// the life of this object (entries are never removed).
//
// Thread safety: all members may be called concurrently (the devices of a
// pmap share one model). The first caller for a key packs it while
// concurrent callers of the same key wait for it: each weight is packed
// exactly once; different weights pack in parallel. The packed bits do not
// depend on `threads` or on which caller packed.
class WeightPacks {
 public:
  // w: f32 [out, in] or [O, C, kh, kw]. The copy is made with `threads` as
  // Ctx::threads.
  // release: as PackAll's, for this weight.
  StatusOr<const kernels::PackedMatrix*> Get(const mesh::Array& w, Precision precision, int threads = 1,
                                             bool release = false);
  // The earlier name of Get, from when only Linear weights were packed here.
  StatusOr<const kernels::PackedMatrix*> Linear(const mesh::Array& w, Precision precision) {
    return Get(w, precision);
  }
  // Packs every weight in `weights` not packed yet, several at once (tasks
  // over weights, largest first): a model's whole plan-time packing in one
  // parallel pass, rather than one weight at a time as the layers reach them.
  // Concurrent callers (the devices of a pmap) share the work: each first
  // packs the weights no one has claimed, then waits for the rest.
  //
  // release: give each weight's host pages back as soon as it is packed
  // (mesh::Array::ReleaseHostPages), so one copy of it stays, the pack, and
  // the loaded and packed copies of a whole model never coexist; the caller
  // vouches that nothing reads these arrays but the packer. A released
  // weight then packs at no other precision (FailedPrecondition).
  Status PackAll(const std::vector<const mesh::Array*>& weights, Precision precision, int threads,
                 bool release = false);
  size_t bytes() const;   // packed storage held
  int64_t count() const;  // weights packed
  // Frees every pack, for a model whose last use has passed
  // (ParamMap::GiveBack): a later Get or PackAll fails (FailedPrecondition)
  // rather than packing again. No other call may be in flight.
  void Drop();

 private:
  struct Entry {
    std::atomic<bool> claimed{false};  // PackAll: someone is on it
    std::once_flag once;
    Status status;                     // written once, inside `once`
    kernels::PackedMatrix packed;      // likewise
    std::atomic<bool> done{false};     // set (release) after both are written
  };
  std::shared_ptr<Entry> Find(const mesh::Array& w, Precision precision);

  mutable std::mutex mu_;
  std::map<std::pair<const void*, Precision>, std::shared_ptr<Entry>> entries_;
  std::map<const void*, Precision> released_;  // PackAll(release): the precision packed
  bool dropped_ = false;                       // Drop() ran
};

class ModelAxis;  // models/parallel.h
class ParamMap;   // models/params.h

struct Ctx {
  mesh::Device* device = nullptr;  // where outputs live; nullptr: the host
  Precision precision = Precision::kHighest;
  WeightPacks* packs = nullptr;  // nullptr: pack per call
  int threads = 0;               // 0: the caller's TBB arena; 1: this thread
  // Plan-time packing (ParamMap::PackMatmulWeights) gives the Linear and
  // conv weights' host pages back once packed: a run at one precision keeps
  // one copy of each weight. Set by tools that run a single precision.
  bool release_packed_weights = false;
  // When set, every layer call appends what it costs (mesh/cost_model.h),
  // with the host time it took. One list per device: not shared.
  std::vector<mesh::OpRecord>* ops = nullptr;
  // Shapes only: layers check, allocate (and count HBM) and record, but
  // compute nothing; outputs hold unspecified values. `tpumesh simulate`.
  bool dry_run = false;
  // Tensor parallelism: the model axis this device computes its share of
  // the layers on (models/parallel.h); nullptr: the whole model here.
  const ModelAxis* model = nullptr;
  // FSDP: the axis each Linear and conv weight is sharded over and
  // all_gathered right before its layer (ModelAxis::GatherWeight);
  // nullptr: weights whole on the device.
  const ModelAxis* fsdp = nullptr;
  // The component being run ("unet", "text_encoder_2"): names collectives
  // in the report.
  const char* scope = "";
  // The model's parameters, when set: a layer's record is named after its
  // weight ("unet/down_blocks.0.resnets.0.conv1"); an op without a weight
  // after the module of the last weighted one ("...resnets.0" for the add
  // after conv2). OpRecord::module.
  const ParamMap* params = nullptr;
  StatusOr<mesh::Array> Alloc(mesh::Shape shape, std::string_view what) const;
  Ctx WithPacks(WeightPacks* p) const {
    Ctx c = *this;
    if (c.packs == nullptr) c.packs = p;
    return c;
  }
  Ctx WithParams(const ParamMap& p) const;  // WithPacks(p.packs()) and params
};

using mesh::Array;

// y[..., out] = x[..., in] W^T + b (b may be null). w is [out, in], or a 1x1
// conv's [out, in, 1, 1]: such a conv applied to channels-last activations
// [B, H*W, in] (recorded as a conv in Ctx::ops).
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
// x += b, the vector b [x.dim(dim)] broadcast along dimension `dim` (a
// bias added after a reduction: dim 1 of NCHW, the last of [..., C]).
Status AddBiasInPlace(const Ctx& ctx, Array& x, const Array& b, int dim);
// x [N, C, ...] += v [N, C] broadcast over the trailing dimensions.
Status AddPerChannelInPlace(const Ctx& ctx, Array& x, const Array& v);
// [N, C, H, W] <-> [N, H*W, C].
StatusOr<Array> NchwToNlc(const Ctx& ctx, const Array& x);
StatusOr<Array> NlcToNchw(const Ctx& ctx, const Array& x, int64_t h, int64_t w);
// The transformer ops of Flux (models/flux.h) and T5 (models/t5.h). Plain
// loops over f32 on the host (the tiny test models are what computes them;
// the real models are priced, not run); their records are what a chip moves.
//
// RMSNorm over each run of d = gamma's size along the last dimension (the
// heads of [..., H*Dh] with a [Dh] weight): x * rsqrt(mean(x^2) + eps) *
// gamma, as diffusers' RMSNorm and transformers' T5LayerNorm.
StatusOr<Array> RmsNorm(const Ctx& ctx, const Array& x, const Array& gamma, float eps);
// AdaLayerNorm's modulation: x [B, L, D] -> LayerNorm(x) (no affine, eps)
// * (1 + scale) + shift, where shift and scale are chunks `shift` and `scale`
// of mod [B, k*D] (chunk j: columns [j D, (j + 1) D)).
StatusOr<Array> ModulatedLayerNorm(const Ctx& ctx, const Array& x, const Array& mod, int shift, int scale, float eps);
// x [B, L, D] += gate * y (y as x), gate chunk `gate` of mod [B, k*D]; gate
// < 0: no gate (plain add of y).
Status GatedAddInPlace(const Ctx& ctx, Array& x, const Array& y, const Array& mod, int gate);
// GELU, tanh approximation (gelu-tanh, gelu_new).
void GeluTanhInPlace(const Ctx& ctx, Array& x);
// x *= y elementwise (same shape).
Status MulInPlace(const Ctx& ctx, Array& x, const Array& y);
// Rotary position embedding on x [B, L, H*Dh] in place, every head alike:
// pairs (x[2i], x[2i+1]) of each head rotated by the angle whose cos and sin
// are cos_sin [L, 2, Dh] (each repeated for both members of the pair), as
// diffusers' apply_rotary_emb with use_real_unbind_dim -1:
// out = x * cos + (-x[2i+1], x[2i]) * sin.
Status RopeInPlace(const Ctx& ctx, Array& x, const Array& cos_sin);
// [B, La, ...] ++ [B, Lb, ...] -> [B, La+Lb, ...] along dimension `dim` (1
// or the last; the other dimensions equal).
StatusOr<Array> Concat(const Ctx& ctx, const Array& a, const Array& b, int dim);
// x[:, begin:begin+len] along dimension 1.
StatusOr<Array> SliceRows(const Ctx& ctx, const Array& x, int64_t begin, int64_t len);
// Attention with an additive score bias and no scaling (T5): q, k, v [B, L,
// H*Dh]; bias [H, Lq, Lk] added to every batch entry's scores; softmax in
// f32. At kDefault Q, K and V are rounded to bf16 as Attention's.
StatusOr<Array> BiasedAttention(const Ctx& ctx, const Array& q, const Array& k, const Array& v, int heads,
                                const Array& bias);

// diffusers get_timestep_embedding: [B] timesteps -> [B, dim].
StatusOr<Array> TimestepEmbedding(const Ctx& ctx, const std::vector<float>& timesteps, int dim,
                                  bool flip_sin_to_cos, float downscale_freq_shift);

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_NN_H_
