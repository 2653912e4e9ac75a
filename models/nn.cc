#include "models/nn.h"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/conv2d.h"
#include "kernels/gemm_f32.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/timestep_embedding.h"

namespace tpumesh::models {
namespace {

using mesh::DType;
using mesh::Shape;
using mesh::ShapeToString;

// Under Precision::kDefault, a bf16-rounded copy of p[0..n) (the MXU's operand
// rounding); otherwise p itself.
const float* Operand(const Ctx& ctx, const float* p, int64_t n, std::vector<float>& tmp) {
  if (ctx.precision == Precision::kHighest) return p;
  tmp.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tmp[i] = kernels::RoundToBf16(p[i]);
  return tmp.data();
}

kernels::Precision KernelPrecision(Precision p) {
  return p == Precision::kHighest ? kernels::Precision::kHighest : kernels::Precision::kDefault;
}

// W [out, in] -> the packed B = W^T [in, out] of the matmul kernel.
StatusOr<kernels::PackedMatrix> PackLinearWeight(const Array& w, Precision precision) {
  const int64_t out = w.dim(0), in = w.dim(1);
  std::vector<float> wt(static_cast<size_t>(in * out));
  const float* src = w.data<float>();
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) wt[i * out + o] = src[o * in + i];
  kernels::MatmulOptions opt;
  opt.precision = KernelPrecision(precision);
  return kernels::PackedMatrix::Pack(in, out, wt.data(), out, opt);
}

// Times one layer call and, when the Ctx records, appends its OpRecord when
// the call returns.
class OpScope {
 public:
  OpScope(const Ctx& ctx, const char* name, const char* type)
      : ctx_(ctx), t0_(std::chrono::steady_clock::now()) {
    rec_.name = name;
    rec_.type = type;
    rec_.precision = KernelPrecision(ctx.precision);
  }
  ~OpScope() {
    if (ctx_.ops == nullptr || !set_) return;
    if (!ctx_.dry_run)
      rec_.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    ctx_.ops->push_back(std::move(rec_));
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
  // The figures of this call (f32 bytes, as kernels count them).
  void Set(kernels::OpCost cost, std::string shape, std::vector<mesh::MxuMatmul> mxu = {}) {
    if (ctx_.ops == nullptr) return;
    if (ctx_.precision == Precision::kDefault) {  // bf16 in HBM
      cost.bytes_read *= 0.5;
      cost.bytes_written *= 0.5;
    }
    rec_.cost = cost;
    rec_.shape = std::move(shape);
    rec_.mxu = std::move(mxu);
    set_ = true;
  }

 private:
  const Ctx& ctx_;
  std::chrono::steady_clock::time_point t0_;
  mesh::OpRecord rec_;
  bool set_ = false;
};

Status CheckF32(const Array& a, std::string_view op, std::string_view what) {
  if (a.dtype() != DType::kF32)
    return InvalidArgumentError(std::string(op) + ": " + std::string(what) + " is " + a.ToString() +
                                ", expected f32");
  return OkStatus();
}

}  // namespace

StatusOr<const kernels::PackedMatrix*> WeightPacks::Linear(const Array& w, Precision precision) {
  const auto key = std::make_pair(w.raw(), static_cast<int>(precision));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = packs_.find(key); it != packs_.end()) return it->second.get();
  }
  // Packed outside the lock; a concurrent first use of the same weight packs
  // it twice and keeps the first.
  TPUMESH_ASSIGN_OR_RETURN(kernels::PackedMatrix packed, PackLinearWeight(w, precision));
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = packs_.emplace(key, nullptr);
  if (inserted) it->second = std::make_unique<kernels::PackedMatrix>(std::move(packed));
  return it->second.get();
}

size_t WeightPacks::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [k, p] : packs_) n += p->size_bytes();
  return n;
}

StatusOr<Precision> ParsePrecision(std::string_view s) {
  if (s == "default") return Precision::kDefault;
  if (s == "highest") return Precision::kHighest;
  return InvalidArgumentError("unknown precision '" + std::string(s) + "' (default or highest)");
}

StatusOr<Array> Ctx::Alloc(Shape shape, std::string_view what) const {
  if (device != nullptr) return Array::Allocate(*device, DType::kF32, std::move(shape), what);
  return Array::Host(DType::kF32, std::move(shape));
}

StatusOr<Array> Linear(const Ctx& ctx, const Array& x, const Array& w, const Array* b) {
  TPUMESH_RETURN_IF_ERROR(CheckF32(x, "linear", "input"));
  if (w.rank() != 2 || x.rank() < 1 || x.dim(x.rank() - 1) != w.dim(1) ||
      (b != nullptr && (b->rank() != 1 || b->dim(0) != w.dim(0)))) {
    return InvalidArgumentError("linear: input " + ShapeToString(x.shape()) + " does not fit weight " +
                                ShapeToString(w.shape()) +
                                (b ? " and bias " + ShapeToString(b->shape()) : std::string()));
  }
  const int64_t in = w.dim(1), out = w.dim(0), rows = x.num_elements() / std::max<int64_t>(in, 1);
  Shape s = x.shape();
  s.back() = out;
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc(s, "linear"));
  OpScope op(ctx, "linear", "matmul");
  {
    kernels::OpCost c;
    c.flops = 2.0 * rows * in * out + (b ? static_cast<double>(rows) * out : 0);
    c.bytes_read = 4.0 * (rows * in + in * out + (b ? out : 0));
    c.bytes_written = 4.0 * rows * out;
    op.Set(c, "x" + ShapeToString(x.shape()) + " w" + ShapeToString(w.shape()), {{rows, out, in, 1}});
  }
  if (ctx.dry_run) return y;
  const kernels::PackedMatrix* packed = nullptr;
  kernels::PackedMatrix local;
  if (ctx.packs != nullptr) {
    TPUMESH_ASSIGN_OR_RETURN(packed, ctx.packs->Linear(w, ctx.precision));
  } else {
    TPUMESH_ASSIGN_OR_RETURN(local, PackLinearWeight(w, ctx.precision));
    packed = &local;
  }
  float* yp = y.mutable_data<float>();
  TPUMESH_RETURN_IF_ERROR(kernels::Matmul(rows, x.data<float>(), in, *packed, yp, out, ctx.threads));
  if (b != nullptr) {
    const float* bp = b->data<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) yp[r * out + o] += bp[o];
  }
  return y;
}

StatusOr<Array> Conv2d(const Ctx& ctx, const Array& x, const Array& w, const Array* b, int stride,
                       int pt, int pl, int pb, int pr) {
  TPUMESH_RETURN_IF_ERROR(CheckF32(x, "conv2d", "input"));
  if (x.rank() != 4 || w.rank() != 4 || x.dim(1) != w.dim(1) ||
      (b != nullptr && (b->rank() != 1 || b->dim(0) != w.dim(0))) || stride < 1) {
    return InvalidArgumentError("conv2d: input " + ShapeToString(x.shape()) + " does not fit weight " +
                                ShapeToString(w.shape()));
  }
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t o = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  const int64_t ho = (h + pt + pb - kh) / stride + 1, wo = (wd + pl + pr - kw) / stride + 1;
  if (ho < 1 || wo < 1)
    return InvalidArgumentError("conv2d: input " + ShapeToString(x.shape()) + " is smaller than kernel " +
                                ShapeToString(w.shape()));
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc({n, o, ho, wo}, "conv2d"));
  kernels::Conv2dShape shape;
  shape.batch = n;
  shape.in_channels = c;
  shape.height = h;
  shape.width = wd;
  shape.out_channels = o;
  shape.kernel_h = kh;
  shape.kernel_w = kw;
  shape.stride = stride;
  shape.pad_top = pt;
  shape.pad_left = pl;
  shape.pad_bottom = pb;
  shape.pad_right = pr;
  OpScope op(ctx, "conv2d", "conv");
  op.Set(kernels::Conv2dCost(shape, b != nullptr), "x" + ShapeToString(x.shape()) + " w" + ShapeToString(w.shape()),
         {{n * ho * wo, o, c * kh * kw, 1}});
  if (ctx.dry_run) return y;
  kernels::MatmulOptions opt;
  opt.precision = KernelPrecision(ctx.precision);
  // Each chunk's product y[C_out, pixels] = w[C_out, K] x col[K, pixels] on
  // the matmul kernel, one thread per chunk (conv2d spreads the chunks).
  std::atomic<bool> failed{false};
  const kernels::GemmFn gemm = kernels::MatmulGemm(opt, &failed);
  TPUMESH_RETURN_IF_ERROR(kernels::Conv2dF32(shape, x.data<float>(), w.data<float>(),
                                             b ? b->data<float>() : nullptr, y.mutable_data<float>(), gemm,
                                             ctx.threads));
  if (failed) return InternalError("conv2d: the matmul kernel refused a chunk of " + ShapeToString(x.shape()));
  return y;
}

StatusOr<Array> GroupNorm(const Ctx& ctx, const Array& x, int groups, const Array& gamma,
                          const Array& beta, float eps, bool silu) {
  TPUMESH_RETURN_IF_ERROR(CheckF32(x, "group_norm", "input"));
  if (x.rank() < 2 || groups < 1 || x.dim(1) % groups != 0 || gamma.num_elements() != x.dim(1) ||
      beta.num_elements() != x.dim(1)) {
    return InvalidArgumentError("group_norm: input " + ShapeToString(x.shape()) + " with " +
                                std::to_string(groups) + " groups and scale " + ShapeToString(gamma.shape()));
  }
  const int64_t n = x.dim(0), c = x.dim(1), inner = x.num_elements() / (n * c), cg = c / groups;
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc(x.shape(), "group_norm"));
  OpScope op(ctx, silu ? "group_norm_silu" : "group_norm", "norm");
  op.Set(kernels::GroupNormCost({x.dim(0), x.dim(1), x.num_elements() / std::max<int64_t>(1, x.dim(0) * x.dim(1)), groups},
                                true, silu),
         "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return y;
  const float* xp = x.data<float>();
  float* yp = y.mutable_data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t base = (i * c + g * cg) * inner, cnt = cg * inner;
      double s = 0, s2 = 0;
      for (int64_t e = 0; e < cnt; ++e) s += xp[base + e];
      const double mean = s / cnt;
      for (int64_t e = 0; e < cnt; ++e) {
        const double d = xp[base + e] - mean;
        s2 += d * d;
      }
      const float rstd = static_cast<float>(1.0 / std::sqrt(s2 / cnt + eps));
      const float m = static_cast<float>(mean);
      for (int64_t ch = 0; ch < cg; ++ch) {
        const float ga = gamma.data<float>()[g * cg + ch], be = beta.data<float>()[g * cg + ch];
        const int64_t off = base + ch * inner;
        for (int64_t e = 0; e < inner; ++e) {
          float v = (xp[off + e] - m) * rstd * ga + be;
          if (silu) v = v / (1.0f + std::exp(-v));
          yp[off + e] = v;
        }
      }
    }
  return y;
}

StatusOr<Array> LayerNorm(const Ctx& ctx, const Array& x, const Array& gamma, const Array& beta,
                          float eps) {
  TPUMESH_RETURN_IF_ERROR(CheckF32(x, "layer_norm", "input"));
  const int64_t d = x.rank() ? x.dim(x.rank() - 1) : 0;
  if (d == 0 || gamma.num_elements() != d || beta.num_elements() != d)
    return InvalidArgumentError("layer_norm: input " + ShapeToString(x.shape()) + " and scale " +
                                ShapeToString(gamma.shape()));
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc(x.shape(), "layer_norm"));
  const int64_t rows = x.num_elements() / d;
  OpScope op(ctx, "layer_norm", "norm");
  op.Set(kernels::LayerNormCost(rows, d), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return y;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data<float>() + r * d;
    float* yr = y.mutable_data<float>() + r * d;
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < d; ++i) s += xr[i];
    const double mean = s / d;
    for (int64_t i = 0; i < d; ++i) s2 += (xr[i] - mean) * (xr[i] - mean);
    const float rstd = static_cast<float>(1.0 / std::sqrt(s2 / d + eps));
    for (int64_t i = 0; i < d; ++i)
      yr[i] = (xr[i] - static_cast<float>(mean)) * rstd * gamma.data<float>()[i] + beta.data<float>()[i];
  }
  return y;
}

void SiluInPlace(const Ctx& ctx, Array& x) {
  OpScope op(ctx, "silu", "elementwise");
  op.Set(kernels::ActivationCost(kernels::Activation::kSilu, x.num_elements()), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return;
  float* p = x.mutable_data<float>();
  for (int64_t i = 0; i < x.num_elements(); ++i) p[i] = p[i] / (1.0f + std::exp(-p[i]));
}

void GeluInPlace(const Ctx& ctx, Array& x) {
  OpScope op(ctx, "gelu", "elementwise");
  op.Set(kernels::ActivationCost(kernels::Activation::kGeluErf, x.num_elements()), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return;
  float* p = x.mutable_data<float>();
  for (int64_t i = 0; i < x.num_elements(); ++i)
    p[i] = 0.5f * p[i] * (1.0f + std::erf(p[i] * static_cast<float>(M_SQRT1_2)));
}

void QuickGeluInPlace(const Ctx& ctx, Array& x) {
  OpScope op(ctx, "quick_gelu", "elementwise");
  op.Set(kernels::ActivationCost(kernels::Activation::kQuickGelu, x.num_elements()), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return;
  float* p = x.mutable_data<float>();
  for (int64_t i = 0; i < x.num_elements(); ++i) p[i] = p[i] / (1.0f + std::exp(-1.702f * p[i]));
}

StatusOr<Array> GegluSplit(const Ctx& ctx, const Array& x) {
  const int64_t d2 = x.rank() ? x.dim(x.rank() - 1) : 0;
  if (d2 % 2 != 0 || d2 == 0)
    return InvalidArgumentError("geglu: last dimension of " + ShapeToString(x.shape()) + " must be even");
  const int64_t f = d2 / 2, rows = x.num_elements() / d2;
  Shape s = x.shape();
  s.back() = f;
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc(s, "geglu"));
  OpScope op(ctx, "geglu", "elementwise");
  op.Set(kernels::GegluCost(rows, f), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return y;
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = x.data<float>() + r * d2;
    float* o = y.mutable_data<float>() + r * f;
    for (int64_t i = 0; i < f; ++i) {
      const float g = a[f + i];
      o[i] = a[i] * (0.5f * g * (1.0f + std::erf(g * static_cast<float>(M_SQRT1_2))));
    }
  }
  return y;
}

StatusOr<Array> Attention(const Ctx& ctx, const Array& q, const Array& k, const Array& v, int heads,
                          bool causal) {
  if (q.rank() != 3 || k.rank() != 3 || v.shape() != k.shape() || q.dim(0) != k.dim(0) ||
      q.dim(2) != k.dim(2) || heads < 1 || q.dim(2) % heads != 0) {
    return InvalidArgumentError("attention: q " + ShapeToString(q.shape()) + ", k " + ShapeToString(k.shape()) +
                                ", v " + ShapeToString(v.shape()) + " with " + std::to_string(heads) + " heads");
  }
  const int64_t hd = q.dim(2);
  TPUMESH_ASSIGN_OR_RETURN(Array out, ctx.Alloc(q.shape(), "attention"));
  const int64_t bh = q.dim(0) * heads;
  OpScope op(ctx, causal ? "causal_attention" : "attention", "attention");
  op.Set(kernels::AttentionCost({q.dim(0), q.dim(1), k.dim(1), heads, hd / heads}),
         "q" + ShapeToString(q.shape()) + " kv" + ShapeToString(k.shape()) + " heads " + std::to_string(heads),
         {{q.dim(1), k.dim(1), hd / heads, static_cast<double>(bh)}, {q.dim(1), hd / heads, k.dim(1), static_cast<double>(bh)}});
  if (ctx.dry_run) return out;
  std::vector<float> qt, kt, vt;
  const float* qp = Operand(ctx, q.data<float>(), q.num_elements(), qt);
  const float* kp = Operand(ctx, k.data<float>(), k.num_elements(), kt);
  const float* vp = Operand(ctx, v.data<float>(), v.num_elements(), vt);
  kernels::AttentionShape shape;
  shape.batch = q.dim(0);
  shape.q_len = q.dim(1);
  shape.kv_len = k.dim(1);
  shape.heads = heads;
  shape.head_dim = hd / heads;
  kernels::AttentionOptions opt;
  opt.causal = causal;
  opt.num_threads = ctx.threads;
  TPUMESH_RETURN_IF_ERROR(kernels::AttentionF32(shape, qp, kp, vp, out.mutable_data<float>(), opt));
  return out;
}

StatusOr<Array> UpsampleNearest2x(const Ctx& ctx, const Array& x) {
  if (x.rank() != 4) return InvalidArgumentError("upsample: input " + ShapeToString(x.shape()) + " is not NCHW");
  const int64_t nc = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc({x.dim(0), x.dim(1), 2 * h, 2 * w}, "upsample"));
  OpScope op(ctx, "upsample_nearest2x", "data");
  op.Set(kernels::UpsampleNearest2xCost(x.dim(0), x.dim(1), h, w), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return y;
  for (int64_t p = 0; p < nc; ++p)
    for (int64_t oy = 0; oy < 2 * h; ++oy) {
      const float* src = x.data<float>() + (p * h + oy / 2) * w;
      float* dst = y.mutable_data<float>() + (p * 2 * h + oy) * 2 * w;
      for (int64_t ox = 0; ox < 2 * w; ++ox) dst[ox] = src[ox / 2];
    }
  return y;
}

StatusOr<Array> ConcatChannels(const Ctx& ctx, const Array& a, const Array& b) {
  if (a.rank() != 4 || b.rank() != 4 || a.dim(0) != b.dim(0) || a.dim(2) != b.dim(2) || a.dim(3) != b.dim(3))
    return InvalidArgumentError("concat: " + ShapeToString(a.shape()) + " and " + ShapeToString(b.shape()));
  const int64_t n = a.dim(0), hw = a.dim(2) * a.dim(3), ca = a.dim(1), cb = b.dim(1);
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc({n, ca + cb, a.dim(2), a.dim(3)}, "concat"));
  OpScope op(ctx, "concat", "data");
  op.Set(kernels::ConcatChannelsCost(n, ca, cb, hw), "a" + ShapeToString(a.shape()) + " b" + ShapeToString(b.shape()));
  if (ctx.dry_run) return y;
  for (int64_t i = 0; i < n; ++i) {
    float* dst = y.mutable_data<float>() + i * (ca + cb) * hw;
    std::memcpy(dst, a.data<float>() + i * ca * hw, ca * hw * sizeof(float));
    std::memcpy(dst + ca * hw, b.data<float>() + i * cb * hw, cb * hw * sizeof(float));
  }
  return y;
}

Status AddInPlace(const Ctx& ctx, Array& x, const Array& y) {
  if (x.shape() != y.shape())
    return InvalidArgumentError("add: " + ShapeToString(x.shape()) + " and " + ShapeToString(y.shape()));
  OpScope op(ctx, "add", "elementwise");
  op.Set(kernels::BinaryCost(x.num_elements()), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return OkStatus();
  float* p = x.mutable_data<float>();
  const float* q = y.data<float>();
  for (int64_t i = 0; i < x.num_elements(); ++i) p[i] += q[i];
  return OkStatus();
}

Status AddPerChannelInPlace(const Ctx& ctx, Array& x, const Array& v) {
  if (x.rank() < 2 || v.rank() != 2 || v.dim(0) != x.dim(0) || v.dim(1) != x.dim(1))
    return InvalidArgumentError("add per channel: " + ShapeToString(x.shape()) + " and " + ShapeToString(v.shape()));
  const int64_t nc = x.dim(0) * x.dim(1), inner = x.num_elements() / nc;
  OpScope op(ctx, "add_per_channel", "elementwise");
  op.Set(kernels::BroadcastChannelCost(x.dim(0), x.dim(1), inner, x.dim(1)), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return OkStatus();
  float* p = x.mutable_data<float>();
  for (int64_t i = 0; i < nc; ++i)
    for (int64_t e = 0; e < inner; ++e) p[i * inner + e] += v.data<float>()[i];
  return OkStatus();
}

StatusOr<Array> NchwToNlc(const Ctx& ctx, const Array& x) {
  if (x.rank() != 4) return InvalidArgumentError("nchw->nlc: " + ShapeToString(x.shape()));
  const int64_t n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3);
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc({n, hw, c}, "transpose"));
  // A layout change: XLA assigns layouts so that it costs nothing on the
  // chip; not recorded.
  if (ctx.dry_run) return y;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        y.mutable_data<float>()[(i * hw + p) * c + ch] = x.data<float>()[(i * c + ch) * hw + p];
  return y;
}

StatusOr<Array> NlcToNchw(const Ctx& ctx, const Array& x, int64_t h, int64_t w) {
  if (x.rank() != 3 || x.dim(1) != h * w) return InvalidArgumentError("nlc->nchw: " + ShapeToString(x.shape()));
  const int64_t n = x.dim(0), c = x.dim(2), hw = h * w;
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc({n, c, h, w}, "transpose"));
  if (ctx.dry_run) return y;  // a layout change, as NchwToNlc
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t ch = 0; ch < c; ++ch)
        y.mutable_data<float>()[(i * c + ch) * hw + p] = x.data<float>()[(i * hw + p) * c + ch];
  return y;
}

StatusOr<Array> TimestepEmbedding(const Ctx& ctx, const std::vector<float>& timesteps, int dim,
                                  bool flip_sin_to_cos, float shift) {
  if (dim < 2) return InvalidArgumentError("timestep embedding: dim must be >= 2");
  const int64_t b = static_cast<int64_t>(timesteps.size()), half = dim / 2;
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc({b, dim}, "time_proj"));
  OpScope op(ctx, "timestep_embedding", "elementwise");
  op.Set(kernels::TimestepEmbeddingCost(b, dim), "t[" + std::to_string(b) + "] dim " + std::to_string(dim));
  if (ctx.dry_run) return y;
  // As diffusers (float32 torch): exponent = -ln(10000) * i / (half - shift).
  const float log_max = std::log(10000.0f);
  for (int64_t r = 0; r < b; ++r) {
    float* row = y.mutable_data<float>() + r * dim;
    for (int64_t i = 0; i < half; ++i) {
      const float exponent = (-log_max * static_cast<float>(i)) / (static_cast<float>(half) - shift);
      const float arg = timesteps[r] * std::exp(exponent);
      const float sn = std::sin(arg), cs = std::cos(arg);
      row[flip_sin_to_cos ? half + i : i] = sn;
      row[flip_sin_to_cos ? i : half + i] = cs;
    }
    if (dim % 2 == 1) row[dim - 1] = 0.0f;
  }
  return y;
}

}  // namespace tpumesh::models
