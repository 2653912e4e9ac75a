// AttentionF32: flash-style blocked attention with Highway micro-kernels.
// See attention.h for the definition, the blocking and the contract.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/ops_parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/bf16-inl.h"
#include "kernels/ops_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tpumesh::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
// Everything here is local to this file (no ODR clash with other
// per-target code in tpumesh::kernels::HWY_NAMESPACE).
namespace {

// Query rows per task, keys per block, rows per micro-kernel, key (and V)
// vectors per micro-kernel. With 32 vector registers, 4 rows x 4 vectors =
// 16 accumulators: enough independent FMA chains to hide the FMA latency,
// with 4 K vectors + 1 broadcast live (21 of 32). With 16 (AVX2, SSE4),
// 4 x 3 = 12 accumulators + 3 + 1 = 16: 4 x 4 spilled (the avx2 path's
// attention ran at 118 GFLOP/s, 44% of its FMA peak, on a Zen 5 core pair).
constexpr int64_t kBlockQ = 64;
constexpr int64_t kBlockK = 256;
constexpr int64_t kRows = 4;
constexpr int64_t kKeyVecs = HWY_MAX_BYTES >= 64 ? 4 : 3;

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// S[r, j0 : j0 + kVecs lanes) = scale * sum_dd Q[r, dd] KT[dd, j], kRows rows.
template <int kVecs, class D>
HWY_INLINE void ScoresTile(D d, const float* HWY_RESTRICT q0, int64_t head_dim,
                           const float* HWY_RESTRICT kcol, int64_t ldkt,
                           hn::Vec<D> vscale, float* HWY_RESTRICT s,
                           int64_t lds) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  hn::Vec<D> acc[kRows][kVecs];
  for (int64_t r = 0; r < kRows; ++r)
    for (int c = 0; c < kVecs; ++c) acc[r][c] = hn::Zero(d);
  for (int64_t dd = 0; dd < head_dim; ++dd) {
    hn::Vec<D> kv[kVecs];
    for (int c = 0; c < kVecs; ++c)
      kv[c] = hn::Load(d, kcol + dd * ldkt + c * lanes);
    for (int64_t r = 0; r < kRows; ++r) {
      const auto qv = hn::Set(d, q0[r * head_dim + dd]);
      for (int c = 0; c < kVecs; ++c)
        acc[r][c] = hn::MulAdd(qv, kv[c], acc[r][c]);
    }
  }
  for (int64_t r = 0; r < kRows; ++r)
    for (int c = 0; c < kVecs; ++c)
      hn::Store(hn::Mul(acc[r][c], vscale), d, s + r * lds + c * lanes);
}

// S[r, j] = scale * sum_dd Q[r, dd] KT[dd, j] for r < rows (a multiple of
// kRows), j < keys (a multiple of lanes). KT rows are aligned.
template <class D>
HWY_INLINE void ScoresBlock(D d, const float* HWY_RESTRICT qs, int64_t head_dim,
                            int64_t rows, const float* HWY_RESTRICT kt,
                            int64_t ldkt, int64_t keys, float scale,
                            float* HWY_RESTRICT s, int64_t lds) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto vscale = hn::Set(d, scale);
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const float* q0 = qs + r0 * head_dim;
    float* s0 = s + r0 * lds;
    int64_t j = 0;
    for (; j + kKeyVecs * lanes <= keys; j += kKeyVecs * lanes)
      ScoresTile<kKeyVecs>(d, q0, head_dim, kt + j, ldkt, vscale, s0 + j, lds);
    for (; j < keys; j += lanes)  // the last block's tail, a vector at a time
      ScoresTile<1>(d, q0, head_dim, kt + j, ldkt, vscale, s0 + j, lds);
  }
}

// O[r, 0 : kVecs lanes) += sum_j P[r, j] V[j, 0 : kVecs lanes), kRows rows.
template <int kVecs, class D>
HWY_INLINE void PvTile(D d, const float* HWY_RESTRICT p, int64_t ldp,
                       int64_t keys, const float* HWY_RESTRICT v, int64_t ldv,
                       float* HWY_RESTRICT o, int64_t ldo) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  hn::Vec<D> acc[kRows][kVecs];
  for (int64_t r = 0; r < kRows; ++r)
    for (int c = 0; c < kVecs; ++c)
      acc[r][c] = hn::Load(d, o + r * ldo + c * lanes);
  for (int64_t j = 0; j < keys; ++j) {
    hn::Vec<D> vv[kVecs];
    for (int c = 0; c < kVecs; ++c)
      vv[c] = hn::Load(d, v + j * ldv + c * lanes);
    for (int64_t r = 0; r < kRows; ++r) {
      const auto pr = hn::Set(d, p[r * ldp + j]);
      for (int c = 0; c < kVecs; ++c)
        acc[r][c] = hn::MulAdd(pr, vv[c], acc[r][c]);
    }
  }
  for (int64_t r = 0; r < kRows; ++r)
    for (int c = 0; c < kVecs; ++c)
      hn::Store(acc[r][c], d, o + r * ldo + c * lanes);
}

// O[rows, dp] += P[rows, keys] V[keys, dp]; dp a multiple of lanes.
template <class D>
HWY_INLINE void PvBlock(D d, const float* p, int64_t ldp, int64_t rows,
                        int64_t keys, const float* v, int64_t dp, float* o) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d)), vecs = dp / lanes;
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    for (int64_t c0 = 0; c0 < vecs; c0 += kKeyVecs) {
      const float* pr = p + r0 * ldp;
      const float* vc = v + c0 * lanes;
      float* oc = o + r0 * dp + c0 * lanes;
      switch (std::min<int64_t>(kKeyVecs, vecs - c0)) {
        case 4:
          PvTile<4>(d, pr, ldp, keys, vc, dp, oc, dp);
          break;
        case 3:
          PvTile<3>(d, pr, ldp, keys, vc, dp, oc, dp);
          break;
        case 2:
          PvTile<2>(d, pr, ldp, keys, vc, dp, oc, dp);
          break;
        default:
          PvTile<1>(d, pr, ldp, keys, vc, dp, oc, dp);
          break;
      }
    }
  }
}

struct Packed {
  const float* kt;  // [B*H][D][kv_pad]
  const float* vp;  // [B*H][kv_pad][dp]
  int64_t kv_pad;
  int64_t dp;
};

// K^T and V of head (b, h) into their packed, zero-padded slots.
void PackHead(const AttentionShape& s, const float* k, const float* v,
              int64_t bh, float* kt, float* vp, int64_t kv_pad, int64_t dp) {
  const int64_t b = bh / s.heads, h = bh % s.heads, hd = s.hidden(),
                dh = s.head_dim;
  float* kt_h = kt + bh * dh * kv_pad;
  float* vp_h = vp + bh * kv_pad * dp;
  for (int64_t j = 0; j < s.kv_len; ++j) {
    const float* krow = k + (b * s.kv_len + j) * hd + h * dh;
    for (int64_t dd = 0; dd < dh; ++dd) kt_h[dd * kv_pad + j] = krow[dd];
    std::memcpy(vp_h + j * dp, v + (b * s.kv_len + j) * hd + h * dh,
                dh * sizeof(float));
    std::fill(vp_h + j * dp + dh, vp_h + (j + 1) * dp, 0.0f);
  }
  for (int64_t dd = 0; dd < dh; ++dd)
    std::fill(kt_h + dd * kv_pad + s.kv_len, kt_h + (dd + 1) * kv_pad, 0.0f);
  std::fill(vp_h + s.kv_len * dp, vp_h + kv_pad * dp, 0.0f);
}

struct Scratch {
  hwy::AlignedFreeUniquePtr<float[]> qs, sc, o, m, l;
};

// Query block qb of head (b, h): rows [qb*kBlockQ, ...) of out.
void QueryBlock(const AttentionShape& s, const float* q, const Packed& pk,
                float scale, bool causal, int64_t task, Scratch& w,
                float* out) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t qblocks = (s.q_len + kBlockQ - 1) / kBlockQ;
  const int64_t bh = task / qblocks, i0 = (task % qblocks) * kBlockQ;
  const int64_t b = bh / s.heads, h = bh % s.heads, hd = s.hidden(),
                dh = s.head_dim, dp = pk.dp;
  const int64_t rows = std::min(kBlockQ, s.q_len - i0),
                rows_pad = RoundUp(rows, kRows);
  const float* kt_h = pk.kt + bh * dh * pk.kv_pad;
  const float* vp_h = pk.vp + bh * pk.kv_pad * dp;
  float* qs = w.qs.get();
  float* sc = w.sc.get();
  float* o = w.o.get();
  float* m = w.m.get();
  float* l = w.l.get();

  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(qs + r * dh, q + (b * s.q_len + i0 + r) * hd + h * dh,
                dh * sizeof(float));
  std::fill(qs + rows * dh, qs + rows_pad * dh, 0.0f);
  std::fill(o, o + rows_pad * dp, 0.0f);
  std::fill(m, m + rows_pad, kNegInf);
  std::fill(l, l + rows_pad, 0.0f);

  // Keys past the last row's causal limit are never needed.
  const int64_t kv_end = causal ? std::min(s.kv_len, i0 + rows) : s.kv_len;
  for (int64_t j0 = 0; j0 < kv_end; j0 += kBlockK) {
    const int64_t valid_keys = std::min(kBlockK, kv_end - j0);
    const int64_t keys = RoundUp(valid_keys, lanes);  // <= kv_pad - j0
    ScoresBlock(d, qs, dh, rows_pad, kt_h + j0, pk.kv_pad, keys, scale, sc,
                kBlockK);
    for (int64_t r = 0; r < rows_pad; ++r) {
      float* sr = sc + r * kBlockK;
      const int64_t valid = std::clamp<int64_t>(
          causal ? std::min(valid_keys, i0 + r + 1 - j0) : valid_keys, 0, keys);
      std::fill(sr + valid, sr + keys, kNegInf);
      auto vmax = hn::Set(d, kNegInf);
      for (int64_t j = 0; j < keys; j += lanes)
        vmax = hn::Max(vmax, hn::Load(d, sr + j));
      const float m_new = std::max(m[r], ReduceMax(d, vmax));
      if (m_new == kNegInf) {  // nothing visible yet: contributes nothing
        std::fill(sr, sr + keys, 0.0f);
        continue;
      }
      const auto vm = hn::Set(d, m_new);
      auto vsum = hn::Zero(d);
      for (int64_t j = 0; j < keys; j += lanes) {
        const auto p = hn::Exp(d, hn::Sub(hn::Load(d, sr + j), vm));
        hn::Store(p, d, sr + j);
        vsum = hn::Add(vsum, p);
      }
      // O and l are rescaled by the same alpha, so its rounding cancels in O /
      // l.
      const float alpha = std::exp(m[r] - m_new);
      l[r] = l[r] * alpha + ReduceSum(d, vsum);
      m[r] = m_new;
      if (alpha != 1.0f) {
        const auto va = hn::Set(d, alpha);
        for (int64_t c = 0; c < dp; c += lanes)
          hn::Store(hn::Mul(hn::Load(d, o + r * dp + c), va), d,
                    o + r * dp + c);
      }
    }
    // P is exactly 0 past valid_keys (and V rows there are zero): skipping
    // them changes no bit. With the one-vector score tail this took SD's
    // cross-attention (4096 x 77 keys) from 11.6 to 8.1 ms on one thread.
    PvBlock(d, sc, kBlockK, rows_pad, valid_keys, vp_h + j0 * dp, dp, o);
  }

  for (int64_t r = 0; r < rows; ++r) {
    const auto inv = hn::Set(d, 1.0f / l[r]);
    float* dst = out + (b * s.q_len + i0 + r) * hd + h * dh;
    int64_t c = 0;
    for (; c + lanes <= dh; c += lanes)
      hn::StoreU(hn::Mul(hn::Load(d, o + r * dp + c), inv), d, dst + c);
    // The tail must not spill into head h+1's columns (another task writes
    // them).
    if (c < dh)
      StoreTail(d, hn::Mul(hn::Load(d, o + r * dp + c), inv), dst + c,
                static_cast<size_t>(dh - c));
  }
}

void AttentionImplF32(const AttentionShape& s, const float* q, const float* k,
                      const float* v, float* out, float scale, bool causal,
                      int num_threads) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t kv_pad = RoundUp(s.kv_len, lanes),
                dp = RoundUp(s.head_dim, lanes);
  const int64_t bh = s.batch * s.heads,
                qblocks = (s.q_len + kBlockQ - 1) / kBlockQ;
  auto kt = hwy::AllocateAligned<float>(
      static_cast<size_t>(bh * s.head_dim * kv_pad));
  auto vp = hwy::AllocateAligned<float>(static_cast<size_t>(bh * kv_pad * dp));
  const Packed pk{kt.get(), vp.get(), kv_pad, dp};
  RunPhases(num_threads, [&](int inner) {
    ParallelForTasks(bh, inner, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        PackHead(s, k, v, t, kt.get(), vp.get(), kv_pad, dp);
    });
    ParallelForTasks(bh * qblocks, inner, [&](int64_t begin, int64_t end) {
      Scratch w;
      w.qs = hwy::AllocateAligned<float>(
          static_cast<size_t>(kBlockQ * s.head_dim));
      w.sc =
          hwy::AllocateAligned<float>(static_cast<size_t>(kBlockQ * kBlockK));
      w.o = hwy::AllocateAligned<float>(static_cast<size_t>(kBlockQ * dp));
      w.m = hwy::AllocateAligned<float>(kBlockQ);
      w.l = hwy::AllocateAligned<float>(kBlockQ);
      for (int64_t t = begin; t < end; ++t)
        QueryBlock(s, q, pk, scale, causal, t, w, out);
    });
  });
}

}  // namespace

// The matmul path's softmax numerators (attention.h): rows [0, rows) of s,
// each `keys` long at stride lds, in place: e = exp(scale * s - m) with m
// the row's largest scale * s over the visible keys (causal: key j <=
// query first_row + r), 0 past them; inv[r] = 1 / sum e (0 when no key is
// visible). Rounding is monotonic, so m = scale * max s for scale >= 0 and
// scale * min s below: the first pass only reads. kCoarse (kDefault) stores
// e rounded to bf16, the MXU operand P V reads in place, and sums e as
// computed.
template <bool kCoarse>
void ScaledExpRowsImpl(float* s, int64_t lds, int64_t rows, int64_t keys, float scale, bool causal,
                       int64_t first_row, float* inv) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const auto vscale = hn::Set(d, scale);
  for (int64_t r = 0; r < rows; ++r) {
    float* x = s + r * lds;
    const int64_t n = causal ? std::clamp<int64_t>(first_row + r + 1, 0, keys) : keys;
    std::fill(x + n, x + keys, 0.0f);
    auto vmax = hn::Set(d, -kInf), vmin = hn::Set(d, kInf);
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) {
      const auto v = hn::LoadU(d, x + i);
      vmax = hn::Max(vmax, v);
      vmin = hn::Min(vmin, v);
    }
    if (i < n) {
      const auto t = hn::FirstN(d, static_cast<size_t>(n - i));
      const auto v = LoadTail(d, x + i, static_cast<size_t>(n - i), 0.0f);
      vmax = hn::Max(vmax, hn::IfThenElse(t, v, hn::Set(d, -kInf)));
      vmin = hn::Min(vmin, hn::IfThenElse(t, v, hn::Set(d, kInf)));
    }
    const float mx = scale >= 0 ? scale * ReduceMax(d, vmax) : scale * -ReduceMax(d, hn::Neg(vmin));
    if (n == 0 || mx == -kInf) {  // nothing visible
      std::fill(x, x + n, 0.0f);
      inv[r] = 0.0f;
      continue;
    }
    // exp(scale * s - m) stored and summed in the same pass: two f32
    // accumulators per chunk of kSumChunk keys, each chunk folded into a
    // double.
    const auto vm = hn::Set(d, mx);
    constexpr float kLog2E = 1.44269504088896341f;
    const auto va = hn::Set(d, scale * kLog2E), vb = hn::Set(d, -mx * kLog2E);
    auto e_of = [&](hn::Vec<decltype(d)> v) {
      if constexpr (kCoarse) return Exp2NonPositiveCoarse(d, hn::MulAdd(v, va, vb));
      else return ExpNonPositive(d, hn::Sub(hn::Mul(v, vscale), vm));
    };
    auto stored = [&](hn::Vec<decltype(d)> e) {
      if constexpr (kCoarse) return RoundNonNanToBf16(d, e);  // e is never NaN (y clamped by Max)
      else return e;
    };
    double sum = 0;
    for (int64_t c0 = 0; c0 < n; c0 += kSumChunk) {
      const int64_t c1 = std::min(n, c0 + kSumChunk);
      auto a0 = hn::Zero(d), a1 = hn::Zero(d);
      for (i = c0; i + 2 * lanes <= c1; i += 2 * lanes) {
        const auto e0 = e_of(hn::LoadU(d, x + i));
        const auto e1 = e_of(hn::LoadU(d, x + i + lanes));
        hn::StoreU(stored(e0), d, x + i);
        hn::StoreU(stored(e1), d, x + i + lanes);
        a0 = hn::Add(a0, e0);
        a1 = hn::Add(a1, e1);
      }
      if (i + lanes <= c1) {
        const auto e = e_of(hn::LoadU(d, x + i));
        hn::StoreU(stored(e), d, x + i);
        a0 = hn::Add(a0, e);
        i += lanes;
      }
      if (i < c1) {
        const size_t t = static_cast<size_t>(c1 - i);
        const auto e = hn::IfThenElseZero(hn::FirstN(d, t), e_of(LoadTail(d, x + i, t, 0.0f)));
        StoreTail(d, stored(e), x + i, t);
        a1 = hn::Add(a1, e);
      }
      sum += ReduceSum(d, hn::Add(a0, a1));
    }
    inv[r] = static_cast<float>(1.0 / sum);
  }
}

// coarse: 2^(s scale log2 e - m log2 e) by Exp2NonPositiveCoarse, for P
// rounded to bf16 next (kDefault); else exp(scale s - m) by ExpNonPositive.
void ScaledExpRows(float* s, int64_t lds, int64_t rows, int64_t keys, float scale, bool causal,
                   int64_t first_row, bool coarse, float* inv) {
  if (coarse) ScaledExpRowsImpl<true>(s, lds, rows, keys, scale, causal, first_row, inv);
  else ScaledExpRowsImpl<false>(s, lds, rows, keys, scale, causal, first_row, inv);
}

}  // namespace HWY_NAMESPACE
}  // namespace tpumesh::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tpumesh::kernels {

HWY_EXPORT(AttentionImplF32);
HWY_EXPORT(ScaledExpRows);

namespace {

// The matmul path (kDefault, kHigh): see attention.h.
Status AttentionOnMatmuls(const AttentionShape& s, const float* q,
                          const float* k, const float* v, float* out,
                          float scale, const AttentionOptions& options) {
  const MatmulOptions mo{options.precision, options.provider};
  TPUMESH_ASSIGN_OR_RETURN(const Provider provider,
                           ResolveProvider(mo.provider, mo.precision));
  // Query rows per task: whole micro-tiles of the provider's kernel, about
  // 64 (60 on AVX2). Each task splits or reads all of K^T and V once, so 64
  // rows halve that per row against 32; the scores block (64 x 4112 f32 at
  // SD's 4096 keys, 1 MiB) outgrows L2 without a measurable cost (keys 1024
  // and 4096 ran at the same GFLOP/s). callgrind, 1 thread, `bench attention
  // --shape 1,1024,1024,2,40`: 163.1 -> 159.8 M instructions (the driver's
  // splits 9.4 -> 6.1 M); same bits.
  const int64_t mr = matmul_internal::DriverShapeOf(provider).mr;
  const int64_t block_q = mr * std::max<int64_t>(1, 64 / mr);
  const int64_t bh = s.batch * s.heads, hd = s.hidden(), dh = s.head_dim;
  const int64_t qblocks = (s.q_len + block_q - 1) / block_q;
  // The scores' row stride: 16 floats over a multiple of 1 KiB, so a column
  // tile's rows (kv_len 4096: 16 KiB apart) do not all fall in one L1 set;
  // even, so an odd kv_len leaves room for the zero that pads P's last pair.
  const int64_t lds = s.kv_len % 256 == 0 ? s.kv_len + 16 : s.kv_len + s.kv_len % 2;
  std::vector<PackedMatrix> kt(static_cast<size_t>(bh)),
      vp(static_cast<size_t>(bh));
  std::mutex mu;
  Status first_error;
  auto keep = [&](const Status& st) {
    if (st.ok()) return true;
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.ok()) first_error = st;
    return false;
  };
  const auto exp_rows = HWY_DYNAMIC_DISPATCH(ScaledExpRows);
  const bool coarse = options.precision == Precision::kDefault;
  RunPhases(options.num_threads, [&](int inner) {
    // K^T [D, Lk] and V [Lk, D] of each head, packed as matmul B operands.
    ParallelForTasks(bh, inner, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t b = t / s.heads, h = t % s.heads;
        auto kp = PackedMatrix::PackTransposed(
            dh, s.kv_len, k + b * s.kv_len * hd + h * dh, hd, mo);
        if (!keep(kp.status())) return;
        kt[t] = std::move(*kp);
        auto vpk = PackedMatrix::Pack(s.kv_len, dh,
                                      v + b * s.kv_len * hd + h * dh, hd, mo);
        if (!keep(vpk.status())) return;
        vp[t] = std::move(*vpk);
      }
    });
    if (!first_error.ok()) return;
    // Per task, block_q query rows of one head: S = Q K^T, softmax in place,
    // out = P V straight into the head's columns.
    ParallelForTasks(bh * qblocks, inner, [&](int64_t begin, int64_t end) {
      float* sc = matmul_internal::ThreadScratch<float, matmul_internal::kScoresSlot>(
          static_cast<size_t>(block_q * lds));
      std::vector<float> inv(static_cast<size_t>(block_q));
      for (int64_t t = begin; t < end; ++t) {
        const int64_t head = t / qblocks, i0 = (t % qblocks) * block_q;
        const int64_t b = head / s.heads, h = head % s.heads;
        const int64_t rows = std::min(block_q, s.q_len - i0);
        const float* qr = q + (b * s.q_len + i0) * hd + h * dh;
        float* outr = out + (b * s.q_len + i0) * hd + h * dh;
        if (!keep(Matmul(rows, qr, hd, kt[head], sc, lds, 1)))
          return;
        exp_rows(sc, lds, rows, s.kv_len, scale, options.causal, i0, coarse, inv.data());
        // kDefault: P is bf16 numbers already, read in place by P V.
        if (coarse && s.kv_len % 2 != 0) {
          for (int64_t r = 0; r < rows; ++r) sc[r * lds + s.kv_len] = 0.0f;
        }
        const Status pv = coarse ? matmul_internal::MatmulRoundedA(rows, sc, lds, vp[head], outr, hd, 1)
                                 : Matmul(rows, sc, lds, vp[head], outr, hd, 1);
        if (!keep(pv)) return;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < dh; ++j) outr[r * hd + j] *= inv[static_cast<size_t>(r)];
      }
    });
  });
  return first_error;
}

}  // namespace

Status CheckAttention(const AttentionShape& s) {
  if (s.batch < 1 || s.q_len < 1 || s.kv_len < 1 || s.heads < 1 ||
      s.head_dim < 1) {
    return InvalidArgumentError(
        "attention: batch " + std::to_string(s.batch) + ", q_len " +
        std::to_string(s.q_len) + ", kv_len " + std::to_string(s.kv_len) +
        ", heads " + std::to_string(s.heads) + ", head_dim " +
        std::to_string(s.head_dim) + " must all be >= 1");
  }
  return OkStatus();
}

Status AttentionF32(const AttentionShape& s, const float* q, const float* k,
                    const float* v, float* out,
                    const AttentionOptions& options) {
  TPUMESH_RETURN_IF_ERROR(CheckAttention(s));
  const float scale =
      options.scale.value_or(1.0f / std::sqrt(static_cast<float>(s.head_dim)));
  if (options.precision != Precision::kHighest)
    return AttentionOnMatmuls(s, q, k, v, out, scale, options);
  HWY_DYNAMIC_DISPATCH(AttentionImplF32)
  (s, q, k, v, out, scale, options.causal, options.num_threads);
  return OkStatus();
}

OpCost AttentionCost(const AttentionShape& s) {
  const double bh = static_cast<double>(s.batch) * s.heads;
  const double scores = bh * s.q_len * s.kv_len;
  OpCost c;
  c.flops =
      4.0 * scores * s.head_dim + 4.0 * scores + bh * s.q_len * s.head_dim;
  c.transcendentals = scores;
  c.bytes_read = 4.0 * s.batch * (s.q_len + 2.0 * s.kv_len) * s.hidden();
  c.bytes_written = 4.0 * s.batch * s.q_len * s.hidden();
  return c;
}

}  // namespace tpumesh::kernels
#endif  // HWY_ONCE
