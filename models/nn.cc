#include "models/nn.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/conv2d.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/ops_parallel.h"
#include "kernels/timestep_embedding.h"
#include "models/parallel.h"
#include "models/params.h"

namespace tpumesh::models {
namespace {

using mesh::DType;
using mesh::Shape;
using mesh::ShapeToString;

kernels::Precision KernelPrecision(Precision p) {
  return p == Precision::kHighest ? kernels::Precision::kHighest : kernels::Precision::kDefault;
}

template <typename T>
inline T Convert(float v);
template <>
inline float Convert<float>(float v) {
  return v;
}
template <>
inline kernels::bf16 Convert<kernels::bf16>(float v) {
  return kernels::F32ToBf16(v);
}

// Uninitialised, 64-byte aligned scratch for n T's (bf16 and float are
// implicit-lifetime types): for buffers whose every element is written
// before it is read, so no zero-filling pass (and no page-clearing twice).
struct AlignedDelete {
  void operator()(void* p) const { ::operator delete(p, std::align_val_t{64}); }
};
template <typename T>
using Scratch = std::unique_ptr<T[], AlignedDelete>;
template <typename T>
Scratch<T> MakeScratch(int64_t n) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T);
  return Scratch<T>(static_cast<T*>(::operator new(bytes, std::align_val_t{64})));
}

// dst[c * ld_dst + r] = src[r * ld_src + c * col_stride] for r < rows,
// c < cols, converted to T, in 16 x 16 tiles (the lines a tile reads and
// writes stay in L1 while it is done).
template <typename T>
void Transpose(const float* src, int64_t ld_src, int64_t col_stride, int64_t rows, int64_t cols, T* dst,
               int64_t ld_dst) {
  constexpr int64_t kTile = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t c = c0; c < c1; ++c) {
        T* d = dst + c * ld_dst;
        const float* s = src + c * col_stride;
        for (int64_t r = r0; r < r1; ++r) d[r] = Convert<T>(s[r * ld_src]);
      }
    }
  }
}

// Per batch entry, [rows, cols] -> [cols, rows] (f32), in tasks of row blocks.
void TransposeBatch(const Ctx& ctx, int64_t batch, int64_t rows, int64_t cols, const float* src, float* dst) {
  constexpr int64_t kRowsPerTask = 64;
  const int64_t blocks = (rows + kRowsPerTask - 1) / kRowsPerTask;
  kernels::ParallelForTasks(batch * blocks, ctx.threads, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t i = t / blocks, r0 = (t % blocks) * kRowsPerTask, r1 = std::min(rows, r0 + kRowsPerTask);
      Transpose(src + (i * rows + r0) * cols, cols, 1, r1 - r0, cols, dst + i * rows * cols + r0, rows);
    }
  });
}

// W [n, c * taps] (row-major; a conv's [O, C, kh, kw] with taps = kh kw) ->
// the packed B [taps * c, n] of the matmul kernel, row (j c + ci) holding
// W[:, ci taps + j]: K reordered tap-major, so that an im2col row of
// channels-last input is kh runs of kw*C contiguous elements. taps = 1 is a
// Linear layer's W^T. At kDefault the copy is made in bf16 (what the kernel
// packs; the same rounding as packing f32), at kHighest in f32.
template <typename T>
StatusOr<kernels::PackedMatrix> PackTransposedAs(const float* w, int64_t n, int64_t c, int64_t taps,
                                                 const kernels::MatmulOptions& opt, int threads) {
  const int64_t k = c * taps;
  Scratch<T> wt = MakeScratch<T>(n * k);
  // A task is 32 rows of W (under 1.5 MiB for SD's largest, K = 11520), read
  // from memory once and kept in L2/L3 while every tap is copied out of it
  // (taps as the outer loop would stream all of W once per tap); 32 rows
  // fill a 64-byte line of each bf16 output row.
  constexpr int64_t kRowsPerTask = 32;
  kernels::ParallelForTasks((n + kRowsPerTask - 1) / kRowsPerTask, threads, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t r0 = t * kRowsPerTask, r1 = std::min(n, r0 + kRowsPerTask);
      for (int64_t j = 0; j < taps; ++j) Transpose(w + r0 * k + j, k, taps, r1 - r0, c, wt.get() + j * c * n + r0, n);
    }
  });
  return kernels::PackedMatrix::Pack(k, n, wt.get(), n, opt);
}

StatusOr<kernels::PackedMatrix> PackTransposed(const float* w, int64_t n, int64_t c, int64_t taps,
                                               Precision precision, int threads) {
  kernels::MatmulOptions opt;
  opt.precision = KernelPrecision(precision);
  if (precision == Precision::kDefault) return PackTransposedAs<kernels::bf16>(w, n, c, taps, opt, threads);
  return PackTransposedAs<float>(w, n, c, taps, opt, threads);
}

// A weight's values as f32: its own storage, or (stored bf16, as a model
// file in bf16 keeps it) widened into `tmp`, exactly.
const float* F32Values(const Array& w, std::vector<float>& tmp) {
  if (w.dtype() == DType::kF32) return w.data<float>();
  tmp.resize(static_cast<size_t>(w.num_elements()));
  const kernels::bf16* p = w.data<kernels::bf16>();
  for (size_t i = 0; i < tmp.size(); ++i) tmp[i] = kernels::Bf16ToF32(p[i]);
  return tmp.data();
}

StatusOr<kernels::PackedMatrix> PackWeight(const Array& w, Precision precision, int threads) {
  const int64_t taps = w.rank() == 4 ? w.dim(2) * w.dim(3) : 1;
  std::vector<float> tmp;
  return PackTransposed(F32Values(w, tmp), w.dim(0), w.dim(1), taps, precision, threads);
}

// The packed form of a Linear or conv weight (WeightPacks::Get): from
// ctx.packs, or packed into `local` for this call when the Ctx has none.
StatusOr<const kernels::PackedMatrix*> PackedWeight(const Ctx& ctx, const Array& w, kernels::PackedMatrix& local) {
  if (ctx.packs != nullptr) return ctx.packs->Get(w, ctx.precision, ctx.threads);
  TPUMESH_ASSIGN_OR_RETURN(local, PackWeight(w, ctx.precision, ctx.threads));
  return &local;
}

// The module of the last op with a named weight recorded on this thread
// ("unet/down_blocks.0.resnets.0.conv1"): ops without a weight are named
// after its parent (Ctx::params).
thread_local std::string t_last_module;

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
    if (rec_.module.empty()) {
      const std::string prefix = std::string(ctx_.scope) + "/";
      const size_t dot = t_last_module.rfind('.');
      if (t_last_module.rfind(prefix, 0) == 0 && dot != std::string::npos && dot > prefix.size())
        rec_.module = t_last_module.substr(0, dot);
    }
    if (!ctx_.dry_run)
      rec_.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    ctx_.ops->push_back(std::move(rec_));
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
  // Names the record after its weight's parameter (Ctx::params), without
  // the ".weight". Under FSDP (Ctx::fsdp) a Linear or conv weight is
  // all_gathered first (ModelAxis::GatherWeight): the record awaits it and
  // the gathered weight's HBM is held until the layer ends.
  Status Weight(const Array& w) {
    if (ctx_.ops == nullptr || ctx_.params == nullptr) return OkStatus();
    const std::string* name = ctx_.params->NameOf(w);
    if (name == nullptr) return OkStatus();
    const size_t cut = name->size() >= 7 && name->compare(name->size() - 7, 7, ".weight") == 0 ? name->size() - 7
                                                                                              : name->size();
    rec_.module = std::string(ctx_.scope) + "/" + name->substr(0, cut);
    t_last_module = rec_.module;
    if (ctx_.fsdp != nullptr && OnlyPacked(*name, w.shape())) {
      TPUMESH_ASSIGN_OR_RETURN(ModelAxis::GatheredWeight g, ctx_.fsdp->GatherWeight(ctx_, w, rec_.module));
      if (g.async_id != 0) rec_.awaits.push_back(g.async_id);
      gathered_ = std::move(g.held);
    }
    return OkStatus();
  }
  // The figures of this call (f32 bytes, as kernels count them; the
  // matmuls' operand bytes too; an attention's element bytes).
  void Set(kernels::OpCost cost, std::string shape, std::vector<mesh::MxuMatmul> mxu = {},
           mesh::AttentionSite attention = {}) {
    if (ctx_.ops == nullptr) return;
    rec_.cost = cost;
    rec_.shape = std::move(shape);
    rec_.mxu = std::move(mxu);
    rec_.attention = attention;
    if (ctx_.precision == Precision::kDefault) mesh::CountBytesAsBf16(rec_);  // bf16 in HBM
    set_ = true;
  }

 private:
  const Ctx& ctx_;
  std::chrono::steady_clock::time_point t0_;
  mesh::OpRecord rec_;
  bool set_ = false;
  Array gathered_;  // an FSDP weight gathered for this call
};

Status CheckF32(const Array& a, std::string_view op, std::string_view what) {
  if (a.dtype() != DType::kF32)
    return InvalidArgumentError(std::string(op) + ": " + std::string(what) + " is " + a.ToString() +
                                ", expected f32");
  return OkStatus();
}

}  // namespace

namespace {

Status DroppedError(const Array& w) {
  return FailedPreconditionError("weight packs: " + w.ToString() +
                                 ": the model's packed weights were given back after its last use (ParamMap::GiveBack); "
                                 "load the model again");
}

}  // namespace

std::shared_ptr<WeightPacks::Entry> WeightPacks::Find(const Array& w, Precision precision) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = entries_[std::make_pair(w.raw(), precision)];
  if (slot == nullptr) slot = std::make_shared<Entry>();
  return slot;
}

StatusOr<const kernels::PackedMatrix*> WeightPacks::Get(const Array& w, Precision precision, int threads,
                                                         bool release) {
  if ((w.dtype() != DType::kF32 && w.dtype() != DType::kBF16) || (w.rank() != 2 && w.rank() != 4))
    return InvalidArgumentError("weight packs: " + w.ToString() + " is not an f32 or bf16 Linear or conv weight");
  const int64_t n = w.dim(0), c = w.dim(1), taps = w.rank() == 4 ? w.dim(2) * w.dim(3) : 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dropped_) return DroppedError(w);
    auto it = released_.find(w.raw());
    if (it != released_.end() && it->second != precision)
      return FailedPreconditionError("weight packs: " + w.ToString() + " was packed at precision " +
                                     (it->second == Precision::kDefault ? "default" : "highest") +
                                     " and its loaded copy released; it cannot be packed at another precision "
                                     "(load the model again)");
  }
  std::shared_ptr<Entry> e = Find(w, precision);
  // Packed outside the map's lock: other weights pack concurrently, callers
  // of this one wait here until it is done.
  std::call_once(e->once, [&] {
    StatusOr<kernels::PackedMatrix> p = PackWeight(w, precision, threads);
    if (p.ok()) {
      e->packed = std::move(p).value();
      if (release) {  // the packer was the loaded copy's last reader
        {
          std::lock_guard<std::mutex> lock(mu_);
          released_.emplace(w.raw(), precision);
        }
        w.ReleaseHostPages();
      }
    } else {
      e->status = p.status();
    }
    e->done.store(true, std::memory_order_release);
  });
  TPUMESH_RETURN_IF_ERROR(e->status);
  if (e->packed.k() != c * taps || e->packed.n() != n)
    return InternalError("weight packs: " + w.ToString() + " was packed with another shape");
  return &e->packed;
}

Status WeightPacks::PackAll(const std::vector<const Array*>& weights, Precision precision, int threads,
                            bool release) {
  std::vector<const Array*> todo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dropped_ && !weights.empty()) return DroppedError(*weights.front());
    for (const Array* w : weights) {
      auto it = entries_.find(std::make_pair(w->raw(), precision));
      if (it == entries_.end() || !it->second->done.load(std::memory_order_acquire)) todo.push_back(w);
    }
  }
  if (todo.empty()) return OkStatus();
  // Largest first, dealt alternately to the two halves of the list, so the
  // contiguous ranges a static partition gives each thread weigh about the
  // same.
  std::stable_sort(todo.begin(), todo.end(),
                   [](const Array* a, const Array* b) { return a->num_elements() > b->num_elements(); });
  std::vector<const Array*> order(todo.size());
  const size_t half = (todo.size() + 1) / 2;
  for (size_t i = 0; i < todo.size(); ++i) order[i % 2 == 0 ? i / 2 : half + i / 2] = todo[i];
  // Pass 1: the weights no other caller has claimed, one task each.
  kernels::ParallelForTasks(static_cast<int64_t>(order.size()), threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      if (!Find(*order[i], precision)->claimed.exchange(true)) (void)Get(*order[i], precision, 1, release);
  });
  // Pass 2: wait for the ones others are packing (and report any error).
  for (const Array* w : order) TPUMESH_RETURN_IF_ERROR(Get(*w, precision, threads, release).status());
  return OkStatus();
}

size_t WeightPacks::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [k, e] : entries_)
    if (e->done.load(std::memory_order_acquire)) n += e->packed.size_bytes();
  return n;
}

void WeightPacks::Drop() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [k, e] : entries_) e->packed = kernels::PackedMatrix();
  dropped_ = true;
}

int64_t WeightPacks::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const auto& [k, e] : entries_)
    if (e->done.load(std::memory_order_acquire) && e->status.ok()) ++n;
  return n;
}

StatusOr<Precision> ParsePrecision(std::string_view s) {
  if (s == "default") return Precision::kDefault;
  if (s == "highest") return Precision::kHighest;
  return InvalidArgumentError("unknown precision '" + std::string(s) + "' (default or highest)");
}

StatusOr<Array> Ctx::Alloc(Shape shape, std::string_view what) const {
  // A dry run writes nothing: its arrays reserve no host memory.
  if (device != nullptr) return Array::Allocate(*device, DType::kF32, std::move(shape), what, dry_run);
  if (dry_run) return Array::LazyZeros(DType::kF32, std::move(shape));
  return Array::Host(DType::kF32, std::move(shape));
}

StatusOr<Array> Linear(const Ctx& ctx, const Array& x, const Array& w, const Array* b) {
  TPUMESH_RETURN_IF_ERROR(CheckF32(x, "linear", "input"));
  const bool conv1x1 = w.rank() == 4 && w.dim(2) == 1 && w.dim(3) == 1;
  if ((w.rank() != 2 && !conv1x1) || x.rank() < 1 || x.dim(x.rank() - 1) != w.dim(1) ||
      (b != nullptr && (b->rank() != 1 || b->dim(0) != w.dim(0)))) {
    return InvalidArgumentError("linear: input " + ShapeToString(x.shape()) + " does not fit weight " +
                                ShapeToString(w.shape()) +
                                (b ? " and bias " + ShapeToString(b->shape()) : std::string()));
  }
  const int64_t in = w.dim(1), out = w.dim(0), rows = x.num_elements() / std::max<int64_t>(in, 1);
  Shape s = x.shape();
  s.back() = out;
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc(s, "linear"));
  OpScope op(ctx, conv1x1 ? "conv2d" : "linear", conv1x1 ? "conv" : "matmul");
  TPUMESH_RETURN_IF_ERROR(op.Weight(w));
  {
    kernels::OpCost c;
    c.flops = 2.0 * rows * in * out + (b ? static_cast<double>(rows) * out : 0);
    c.bytes_read = 4.0 * (rows * in + in * out + (b ? out : 0));
    c.bytes_written = 4.0 * rows * out;
    op.Set(c, "x" + ShapeToString(x.shape()) + " w" + ShapeToString(w.shape()),
           {{rows, out, in, 1, 4.0 * rows * in, 4.0 * in * out, 4.0 * rows * out}});
  }
  if (ctx.dry_run) return y;
  kernels::PackedMatrix local;
  TPUMESH_ASSIGN_OR_RETURN(const kernels::PackedMatrix* packed, PackedWeight(ctx, w, local));
  float* yp = y.mutable_data<float>();
  // The bias in the matmul's epilogue: the same bits as adding it after.
  TPUMESH_RETURN_IF_ERROR(kernels::Matmul(rows, x.data<float>(), in, *packed, yp, out, ctx.threads,
                                          b != nullptr ? b->data<float>() : nullptr));
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
  kernels::Conv2dShape shape;
  shape.batch = x.dim(0);
  shape.in_channels = x.dim(1);
  shape.height = x.dim(2);
  shape.width = x.dim(3);
  shape.out_channels = w.dim(0);
  shape.kernel_h = w.dim(2);
  shape.kernel_w = w.dim(3);
  shape.stride = stride;
  shape.pad_top = pt;
  shape.pad_left = pl;
  shape.pad_bottom = pb;
  shape.pad_right = pr;
  if (Status st = kernels::CheckConv2d(shape); !st.ok())
    return InvalidArgumentError("conv2d: input " + ShapeToString(x.shape()) + " and weight " +
                                ShapeToString(w.shape()) + ": " + std::string(st.message()));
  const int64_t n = shape.batch, c = shape.in_channels, o = shape.out_channels;
  const int64_t ho = shape.out_height(), wo = shape.out_width();
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc({n, o, ho, wo}, "conv2d"));
  OpScope op(ctx, "conv2d", "conv");
  TPUMESH_RETURN_IF_ERROR(op.Weight(w));
  op.Set(kernels::Conv2dCost(shape, b != nullptr), "x" + ShapeToString(x.shape()) + " w" + ShapeToString(w.shape()),
         {{n * ho * wo, o, c * shape.kernel_h * shape.kernel_w, 1, 4.0 * static_cast<double>(x.num_elements()),
           4.0 * static_cast<double>(w.num_elements()), 4.0 * static_cast<double>(n) * o * ho * wo}});
  if (ctx.dry_run) return y;
  kernels::PackedMatrix local;
  TPUMESH_ASSIGN_OR_RETURN(const kernels::PackedMatrix* packed, PackedWeight(ctx, w, local));
  const float* bias = b ? b->data<float>() : nullptr;
  TPUMESH_RETURN_IF_ERROR(
      kernels::Conv2dPacked(shape, x.data<float>(), *packed, bias, y.mutable_data<float>(), ctx.threads));
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
  const int64_t n = x.dim(0), c = x.dim(1), inner = x.num_elements() / (n * c);
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc(x.shape(), "group_norm"));
  OpScope op(ctx, silu ? "group_norm_silu" : "group_norm", "norm");
  TPUMESH_RETURN_IF_ERROR(op.Weight(gamma));
  op.Set(kernels::GroupNormCost({x.dim(0), x.dim(1), x.num_elements() / std::max<int64_t>(1, x.dim(0) * x.dim(1)), groups},
                                true, silu),
         "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return y;
  TPUMESH_RETURN_IF_ERROR(kernels::GroupNormF32({n, c, inner, groups}, eps, x.data<float>(), gamma.data<float>(),
                                                beta.data<float>(), y.mutable_data<float>(), silu, ctx.threads));
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
  TPUMESH_RETURN_IF_ERROR(op.Weight(gamma));
  op.Set(kernels::LayerNormCost(rows, d), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return y;
  TPUMESH_RETURN_IF_ERROR(kernels::LayerNormF32(rows, d, eps, x.data<float>(), gamma.data<float>(), beta.data<float>(),
                                                y.mutable_data<float>(), ctx.threads));
  return y;
}

void SiluInPlace(const Ctx& ctx, Array& x) {
  OpScope op(ctx, "silu", "elementwise");
  op.Set(kernels::ActivationCost(kernels::Activation::kSilu, x.num_elements()), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return;
  float* p = x.mutable_data<float>();
  (void)kernels::ActivationF32(kernels::Activation::kSilu, x.num_elements(), p, p, ctx.threads);  // cannot fail
}

void GeluInPlace(const Ctx& ctx, Array& x) {
  OpScope op(ctx, "gelu", "elementwise");
  op.Set(kernels::ActivationCost(kernels::Activation::kGeluErf, x.num_elements()), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return;
  float* p = x.mutable_data<float>();
  (void)kernels::ActivationF32(kernels::Activation::kGeluErf, x.num_elements(), p, p, ctx.threads);  // cannot fail
}

void QuickGeluInPlace(const Ctx& ctx, Array& x) {
  OpScope op(ctx, "quick_gelu", "elementwise");
  op.Set(kernels::ActivationCost(kernels::Activation::kQuickGelu, x.num_elements()), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return;
  float* p = x.mutable_data<float>();
  (void)kernels::ActivationF32(kernels::Activation::kQuickGelu, x.num_elements(), p, p, ctx.threads);  // cannot fail
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
  TPUMESH_RETURN_IF_ERROR(kernels::GegluF32(rows, f, x.data<float>(), y.mutable_data<float>(), ctx.threads));
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
         {{q.dim(1), k.dim(1), hd / heads, static_cast<double>(bh)}, {q.dim(1), hd / heads, k.dim(1), static_cast<double>(bh)}},
         {static_cast<double>(bh), q.dim(1), k.dim(1), hd / heads, 4});
  if (ctx.dry_run) return out;
  kernels::AttentionShape shape;
  shape.batch = q.dim(0);
  shape.q_len = q.dim(1);
  shape.kv_len = k.dim(1);
  shape.heads = heads;
  shape.head_dim = hd / heads;
  kernels::AttentionOptions opt;
  opt.causal = causal;
  opt.num_threads = ctx.threads;
  opt.precision = KernelPrecision(ctx.precision);  // both matmuls at the model's precision, P an operand too
  TPUMESH_RETURN_IF_ERROR(
      kernels::AttentionF32(shape, q.data<float>(), k.data<float>(), v.data<float>(), out.mutable_data<float>(), opt));
  return out;
}

StatusOr<Array> UpsampleNearest2x(const Ctx& ctx, const Array& x) {
  if (x.rank() != 4) return InvalidArgumentError("upsample: input " + ShapeToString(x.shape()) + " is not NCHW");
  const int64_t h = x.dim(2), w = x.dim(3);
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc({x.dim(0), x.dim(1), 2 * h, 2 * w}, "upsample"));
  OpScope op(ctx, "upsample_nearest2x", "data");
  op.Set(kernels::UpsampleNearest2xCost(x.dim(0), x.dim(1), h, w), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return y;
  TPUMESH_RETURN_IF_ERROR(kernels::UpsampleNearest2xF32(x.dim(0), x.dim(1), h, w, x.data<float>(),
                                                        y.mutable_data<float>(), ctx.threads));
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
  TPUMESH_RETURN_IF_ERROR(kernels::ConcatChannelsF32(n, ca, cb, hw, a.data<float>(), b.data<float>(),
                                                     y.mutable_data<float>(), ctx.threads));
  return y;
}

Status AddInPlace(const Ctx& ctx, Array& x, const Array& y) {
  if (x.shape() != y.shape())
    return InvalidArgumentError("add: " + ShapeToString(x.shape()) + " and " + ShapeToString(y.shape()));
  OpScope op(ctx, "add", "elementwise");
  op.Set(kernels::BinaryCost(x.num_elements()), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return OkStatus();
  float* p = x.mutable_data<float>();
  return kernels::BinaryF32(kernels::BinaryOp::kAdd, x.num_elements(), p, y.data<float>(), p, ctx.threads);
}

Status AddPerChannelInPlace(const Ctx& ctx, Array& x, const Array& v) {
  if (x.rank() < 2 || v.rank() != 2 || v.dim(0) != x.dim(0) || v.dim(1) != x.dim(1))
    return InvalidArgumentError("add per channel: " + ShapeToString(x.shape()) + " and " + ShapeToString(v.shape()));
  const int64_t nc = x.dim(0) * x.dim(1), inner = x.num_elements() / nc;
  OpScope op(ctx, "add_per_channel", "elementwise");
  op.Set(kernels::BroadcastChannelCost(x.dim(0), x.dim(1), inner, x.dim(1)), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return OkStatus();
  float* p = x.mutable_data<float>();
  return kernels::BroadcastChannelF32(kernels::BinaryOp::kAdd, x.dim(0), x.dim(1), inner, p, v.data<float>(),
                                      x.dim(1), p, ctx.threads);
}

Status AddBiasInPlace(const Ctx& ctx, Array& x, const Array& b, int dim) {
  if (dim < 0 || dim >= x.rank() || b.rank() != 1 || b.dim(0) != x.dim(dim) || b.dtype() != DType::kF32)
    return InvalidArgumentError("add bias along dim " + std::to_string(dim) + ": x" + ShapeToString(x.shape()) +
                                " and b" + ShapeToString(b.shape()));
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= x.dim(i);
  for (int i = dim + 1; i < x.rank(); ++i) inner *= x.dim(i);
  OpScope op(ctx, "add_bias", "elementwise");
  op.Set(kernels::BroadcastChannelCost(outer, x.dim(dim), inner, 0), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return OkStatus();
  float* p = x.mutable_data<float>();
  return kernels::BroadcastChannelF32(kernels::BinaryOp::kAdd, outer, x.dim(dim), inner, p, b.data<float>(), 0, p,
                                      ctx.threads);
}

StatusOr<Array> NchwToNlc(const Ctx& ctx, const Array& x) {
  if (x.rank() != 4) return InvalidArgumentError("nchw->nlc: " + ShapeToString(x.shape()));
  const int64_t n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3);
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc({n, hw, c}, "transpose"));
  // A layout change: XLA assigns layouts so that it costs nothing on the
  // chip; not recorded.
  if (ctx.dry_run) return y;
  TransposeBatch(ctx, n, c, hw, x.data<float>(), y.mutable_data<float>());
  return y;
}

StatusOr<Array> NlcToNchw(const Ctx& ctx, const Array& x, int64_t h, int64_t w) {
  if (x.rank() != 3 || x.dim(1) != h * w) return InvalidArgumentError("nlc->nchw: " + ShapeToString(x.shape()));
  const int64_t n = x.dim(0), c = x.dim(2), hw = h * w;
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc({n, c, h, w}, "transpose"));
  if (ctx.dry_run) return y;  // a layout change, as NchwToNlc
  TransposeBatch(ctx, n, hw, c, x.data<float>(), y.mutable_data<float>());
  return y;
}

StatusOr<Array> RmsNorm(const Ctx& ctx, const Array& x, const Array& gamma, float eps) {
  TPUMESH_RETURN_IF_ERROR(CheckF32(x, "rms_norm", "input"));
  const int64_t d = gamma.num_elements();
  if (x.rank() < 1 || d == 0 || gamma.dtype() != DType::kF32 || x.dim(x.rank() - 1) % d != 0)
    return InvalidArgumentError("rms_norm: input " + ShapeToString(x.shape()) + " and scale " +
                                ShapeToString(gamma.shape()));
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc(x.shape(), "rms_norm"));
  const int64_t rows = x.num_elements() / d;
  OpScope op(ctx, "rms_norm", "norm");
  op.Weight(gamma);
  op.Set(kernels::LayerNormCost(rows, d, /*affine=*/false), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return y;
  const float* g = gamma.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data<float>() + r * d;
    float* yr = y.mutable_data<float>() + r * d;
    float ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += xr[j] * xr[j];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(d) + eps);
    for (int64_t j = 0; j < d; ++j) yr[j] = g[j] * (xr[j] * inv);
  }
  return y;
}

namespace {

// Chunk j of mod [B, k*D] for batch entry i, or nullptr when it does not fit.
Status CheckChunks(std::string_view op, const Array& x, const Array& mod, std::initializer_list<int> chunks) {
  const int64_t d = x.rank() == 3 ? x.dim(2) : 0;
  bool ok = x.rank() == 3 && mod.rank() == 2 && mod.dim(0) == x.dim(0) && d > 0 && mod.dim(1) % d == 0 &&
            mod.dtype() == DType::kF32;
  for (int c : chunks) ok = ok && c < (d > 0 ? mod.dim(1) / d : 0);
  if (!ok)
    return InvalidArgumentError(std::string(op) + ": input " + ShapeToString(x.shape()) + " and modulation " +
                                ShapeToString(mod.shape()));
  return OkStatus();
}

}  // namespace

StatusOr<Array> ModulatedLayerNorm(const Ctx& ctx, const Array& x, const Array& mod, int shift, int scale, float eps) {
  TPUMESH_RETURN_IF_ERROR(CheckF32(x, "modulated_layer_norm", "input"));
  TPUMESH_RETURN_IF_ERROR(CheckChunks("modulated_layer_norm", x, mod, {shift, scale}));
  const int64_t b = x.dim(0), l = x.dim(1), d = x.dim(2);
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc(x.shape(), "modulated_layer_norm"));
  OpScope op(ctx, "modulated_layer_norm", "norm");
  kernels::OpCost c = kernels::LayerNormCost(b * l, d, /*affine=*/false);
  c.flops += 3.0 * x.num_elements();  // 1 + scale, times, plus shift
  c.bytes_read += 4.0 * 2 * b * d;
  op.Set(c, "x" + ShapeToString(x.shape()) + " mod" + ShapeToString(mod.shape()));
  if (ctx.dry_run) return y;
  for (int64_t i = 0; i < b; ++i) {
    const float* sh = mod.data<float>() + i * mod.dim(1) + shift * d;
    const float* sc = mod.data<float>() + i * mod.dim(1) + scale * d;
    for (int64_t t = 0; t < l; ++t) {
      const float* xr = x.data<float>() + (i * l + t) * d;
      float* yr = y.mutable_data<float>() + (i * l + t) * d;
      float mean = 0, var = 0;
      for (int64_t j = 0; j < d; ++j) mean += xr[j];
      mean /= static_cast<float>(d);
      for (int64_t j = 0; j < d; ++j) var += (xr[j] - mean) * (xr[j] - mean);
      const float inv = 1.0f / std::sqrt(var / static_cast<float>(d) + eps);
      for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mean) * inv * (1.0f + sc[j]) + sh[j];
    }
  }
  return y;
}

Status GatedAddInPlace(const Ctx& ctx, Array& x, const Array& y, const Array& mod, int gate) {
  if (x.shape() != y.shape())
    return InvalidArgumentError("gated add: " + ShapeToString(x.shape()) + " and " + ShapeToString(y.shape()));
  if (gate >= 0) TPUMESH_RETURN_IF_ERROR(CheckChunks("gated add", x, mod, {gate}));
  OpScope op(ctx, gate >= 0 ? "gated_add" : "add", "elementwise");
  kernels::OpCost c = kernels::BinaryCost(x.num_elements());
  if (gate >= 0) {
    c.flops *= 2;
    c.bytes_read += 4.0 * x.dim(0) * x.dim(2);
  }
  op.Set(c, "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return OkStatus();
  const int64_t n = x.num_elements();
  float* p = x.mutable_data<float>();
  const float* q = y.data<float>();
  if (gate < 0) {
    for (int64_t e = 0; e < n; ++e) p[e] += q[e];
    return OkStatus();
  }
  const int64_t b = x.dim(0), l = x.dim(1), d = x.dim(2);
  for (int64_t i = 0; i < b; ++i) {
    const float* g = mod.data<float>() + i * mod.dim(1) + gate * d;
    for (int64_t t = 0; t < l; ++t)
      for (int64_t j = 0; j < d; ++j) {
        const int64_t e = (i * l + t) * d + j;
        p[e] += g[j] * q[e];
      }
  }
  return OkStatus();
}

void GeluTanhInPlace(const Ctx& ctx, Array& x) {
  OpScope op(ctx, "gelu_tanh", "elementwise");
  op.Set(kernels::ActivationCost(kernels::Activation::kGeluTanh, x.num_elements()), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return;
  float* p = x.mutable_data<float>();
  (void)kernels::ActivationF32(kernels::Activation::kGeluTanh, x.num_elements(), p, p, ctx.threads);  // cannot fail
}

Status MulInPlace(const Ctx& ctx, Array& x, const Array& y) {
  if (x.shape() != y.shape())
    return InvalidArgumentError("mul: " + ShapeToString(x.shape()) + " and " + ShapeToString(y.shape()));
  OpScope op(ctx, "mul", "elementwise");
  op.Set(kernels::BinaryCost(x.num_elements()), "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return OkStatus();
  float* p = x.mutable_data<float>();
  return kernels::BinaryF32(kernels::BinaryOp::kMul, x.num_elements(), p, y.data<float>(), p, ctx.threads);
}

Status RopeInPlace(const Ctx& ctx, Array& x, const Array& cos_sin) {
  if (x.rank() != 3 || cos_sin.rank() != 3 || cos_sin.dim(0) != x.dim(1) || cos_sin.dim(1) != 2 ||
      cos_sin.dim(2) % 2 != 0 || cos_sin.dim(2) == 0 || x.dim(2) % cos_sin.dim(2) != 0)
    return InvalidArgumentError("rope: x " + ShapeToString(x.shape()) + " and table " +
                                ShapeToString(cos_sin.shape()));
  const int64_t b = x.dim(0), l = x.dim(1), hd = cos_sin.dim(2), heads = x.dim(2) / hd;
  OpScope op(ctx, "rope", "elementwise");
  kernels::OpCost c;
  c.flops = 3.0 * x.num_elements();
  c.bytes_read = 4.0 * (x.num_elements() + cos_sin.num_elements());
  c.bytes_written = 4.0 * x.num_elements();
  op.Set(c, "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return OkStatus();
  float* p = x.mutable_data<float>();
  for (int64_t i = 0; i < b; ++i)
    for (int64_t t = 0; t < l; ++t) {
      const float* cs = cos_sin.data<float>() + t * 2 * hd;
      const float* sn = cs + hd;
      for (int64_t h = 0; h < heads; ++h) {
        float* v = p + ((i * l + t) * heads + h) * hd;
        for (int64_t j = 0; j < hd; j += 2) {
          const float re = v[j], im = v[j + 1];
          v[j] = re * cs[j] + (-im) * sn[j];
          v[j + 1] = im * cs[j + 1] + re * sn[j + 1];
        }
      }
    }
  return OkStatus();
}

StatusOr<Array> Concat(const Ctx& ctx, const Array& a, const Array& b, int dim) {
  bool ok = a.rank() == b.rank() && a.rank() >= 2 && (dim == 1 || dim == a.rank() - 1) && dim < a.rank();
  for (int i = 0; ok && i < a.rank(); ++i) ok = i == dim || a.dim(i) == b.dim(i);
  if (!ok)
    return InvalidArgumentError("concat along " + std::to_string(dim) + ": " + ShapeToString(a.shape()) + " and " +
                                ShapeToString(b.shape()));
  Shape s = a.shape();
  s[dim] += b.dim(dim);
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc(s, "concat"));
  int64_t outer = 1;
  for (int i = 0; i < dim; ++i) outer *= a.dim(i);
  const int64_t na = a.num_elements() / outer, nb = b.num_elements() / outer;
  OpScope op(ctx, "concat", "data");
  kernels::OpCost c;
  c.bytes_read = 4.0 * (a.num_elements() + b.num_elements());
  c.bytes_written = c.bytes_read;
  op.Set(c, "a" + ShapeToString(a.shape()) + " b" + ShapeToString(b.shape()));
  if (ctx.dry_run) return y;
  for (int64_t o = 0; o < outer; ++o) {
    float* d = y.mutable_data<float>() + o * (na + nb);
    std::memcpy(d, a.data<float>() + o * na, na * sizeof(float));
    std::memcpy(d + na, b.data<float>() + o * nb, nb * sizeof(float));
  }
  return y;
}

StatusOr<Array> SliceRows(const Ctx& ctx, const Array& x, int64_t begin, int64_t len) {
  if (x.rank() < 2 || begin < 0 || len < 1 || begin + len > x.dim(1))
    return InvalidArgumentError("slice [" + std::to_string(begin) + ", +" + std::to_string(len) + ") of " +
                                ShapeToString(x.shape()));
  Shape s = x.shape();
  s[1] = len;
  TPUMESH_ASSIGN_OR_RETURN(Array y, ctx.Alloc(s, "slice"));
  const int64_t inner = x.num_elements() / (x.dim(0) * x.dim(1));
  OpScope op(ctx, "slice", "data");
  kernels::OpCost c;
  c.bytes_read = 4.0 * y.num_elements();
  c.bytes_written = c.bytes_read;
  op.Set(c, "x" + ShapeToString(x.shape()));
  if (ctx.dry_run) return y;
  for (int64_t i = 0; i < x.dim(0); ++i)
    std::memcpy(y.mutable_data<float>() + i * len * inner, x.data<float>() + (i * x.dim(1) + begin) * inner,
                len * inner * sizeof(float));
  return y;
}

StatusOr<Array> BiasedAttention(const Ctx& ctx, const Array& q, const Array& k, const Array& v, int heads,
                                const Array& bias) {
  if (q.rank() != 3 || k.rank() != 3 || v.shape() != k.shape() || q.dim(0) != k.dim(0) || q.dim(2) != k.dim(2) ||
      heads < 1 || q.dim(2) % heads != 0 || bias.rank() != 3 || bias.dim(0) != heads || bias.dim(1) != q.dim(1) ||
      bias.dim(2) != k.dim(1))
    return InvalidArgumentError("biased attention: q " + ShapeToString(q.shape()) + ", k " + ShapeToString(k.shape()) +
                                ", v " + ShapeToString(v.shape()) + ", bias " + ShapeToString(bias.shape()) +
                                " with " + std::to_string(heads) + " heads");
  const int64_t b = q.dim(0), lq = q.dim(1), lk = k.dim(1), hd = q.dim(2) / heads, bh = b * heads;
  TPUMESH_ASSIGN_OR_RETURN(Array out, ctx.Alloc(q.shape(), "attention"));
  OpScope op(ctx, "biased_attention", "attention");
  kernels::OpCost c = kernels::AttentionCost({b, lq, lk, heads, hd});
  c.flops += static_cast<double>(bh) * lq * lk;  // + bias
  c.bytes_read += 4.0 * bias.num_elements();
  op.Set(c, "q" + ShapeToString(q.shape()) + " kv" + ShapeToString(k.shape()) + " heads " + std::to_string(heads),
         {{lq, lk, hd, static_cast<double>(bh)}, {lq, hd, lk, static_cast<double>(bh)}});
  if (ctx.dry_run) return out;
  const bool round = ctx.precision == Precision::kDefault;
  auto at = [round](const Array& a, int64_t e) {
    const float f = a.data<float>()[e];
    return round ? kernels::Bf16ToF32(kernels::F32ToBf16(f)) : f;
  };
  const int64_t w = q.dim(2);
  std::vector<float> p(static_cast<size_t>(lk));
  for (int64_t i = 0; i < b; ++i)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t r = 0; r < lq; ++r) {
        float mx = -INFINITY;
        for (int64_t j = 0; j < lk; ++j) {
          float dot = 0;
          for (int64_t e = 0; e < hd; ++e) dot += at(q, (i * lq + r) * w + h * hd + e) * at(k, (i * lk + j) * w + h * hd + e);
          p[j] = dot + bias.data<float>()[(h * lq + r) * lk + j];
          mx = std::max(mx, p[j]);
        }
        float sum = 0;
        for (int64_t j = 0; j < lk; ++j) sum += (p[j] = std::exp(p[j] - mx));
        float* o = out.mutable_data<float>() + (i * lq + r) * w + h * hd;
        for (int64_t e = 0; e < hd; ++e) {
          float acc = 0;
          for (int64_t j = 0; j < lk; ++j) acc += p[j] * at(v, (i * lk + j) * w + h * hd + e);
          o[e] = acc / sum;
        }
      }
  return out;
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
