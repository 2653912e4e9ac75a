// Per-target body of the kHighway matmul provider (kernels/matmul.h), compiled
// once per Highway target by kernels/matmul_highway.cc. Portable, and the
// reference the AVX512-BF16 kernel is checked against bit for bit.
//
// Micro-kernels (kV = 2 vectors of L lanes per row, so kCols = 2L columns of
// a 32-column panel: 32 on AVX3, 16 on AVX2, 8 on SSE4, 2 on SCALAR; kMr rows,
// 12 where there are 32 vector registers, else 6):
//   pair layout (kDefault/kHigh): per pair of k, for each row
//       acc += a[k+1]*b_odd; acc += a[k]*b_even, where b_odd is the high
//       bf16 half of B's 32-bit word (as f32 by masking) and b_even the low
//       half shifted up. A product of two bf16 values is exact in f32, so
//       FMA or multiply-then-add give the same bits, and the order matches
//       vdpbf16ps. Where there are 32 registers the kernel splits the words
//       as it goes (PairKernel). With 16 (AVX2, SSE4) the split's two ALU ops
//       per B vector cost ~15% of the FMA rate and its registers cap a tile
//       at 5 rows, so the driver splits each column tile's micro-panel into
//       f32 once per row block (SplitPanel, L1-resident) and SplitPairKernel
//       runs 6 rows on it: 12 accumulators, 2 B vectors, 1 broadcast.
//   f32 panels (kHighest): acc += a[k] * b[k], A packed k-major per row
//   group (PackAF32).
// For the pair layout A is packed per call into f32 rows (already rounded /
// split / expanded), or read in place when it is bf16 numbers already
// (CallArgs::a_rounded); B
// comes packed from PackedMatrix. Edges: rows by template (1..kMr), a column
// tile of at most L columns by one-vector kernels (SD's head_dim 40 is
// 16 + 16 + 8 on AVX2: no FMA spent on 8 zero columns), the rest of a partial
// tile through a small tile buffer, K odd by the zero pad of the pair layout. Each
// C element is one chain over k whatever the blocking (partial sums between
// K blocks resume the chain), so the bits equal the AVX512-BF16 kernel's.

#if defined(TPUMESH_KERNELS_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TPUMESH_KERNELS_MATMUL_INL_H_
#undef TPUMESH_KERNELS_MATMUL_INL_H_
#else
#define TPUMESH_KERNELS_MATMUL_INL_H_
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/bf16-inl.h"
#include "kernels/matmul_internal.h"

HWY_BEFORE_NAMESPACE();
namespace tpumesh::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace mi = ::tpumesh::kernels::matmul_internal;

namespace matmul_hwy {

using DF = hn::ScalableTag<float>;
inline constexpr int64_t kL = HWY_LANES(float);
inline constexpr int64_t kV = 2;
inline constexpr int64_t kCols = kV * kL;
static_assert(mi::kPanelWidth % kCols == 0, "a micro-tile must divide a panel");
inline constexpr bool kSplitB = HWY_MAX_BYTES < 64;
inline constexpr int kMr = kSplitB ? 6 : 12;
// Pairs of k per block, so the B micro-panel stays in L1: 128 x 32 words
// = 16 KiB on AVX3; split, 160 x 2 x 16 floats = 20 KiB on AVX2, which runs
// SD's K = 320 projections in one block (Zen 3: 8192x320x320 71 -> 75-78%).
inline constexpr int64_t kKcPairs = kSplitB ? 160 : 128;
// Packed A row stride in floats: 2 per pair, plus 16 so rows spread over L1 sets.
inline constexpr int64_t kAStride = 2 * kKcPairs + 16;
// Rows per block. Split (AVX2): 192, so each B micro-panel split into f32
// serves twice the rows of the 96 used before; the packed A block (192 x 336
// floats, 252 KiB) still fits the 512 KiB L2 of a Zen 3 core. Zen 3 core
// pair, interleaved medians: 8192x2560x320 81.6 -> 80.2 ms, 2048^3 99.3 ->
// 97.7, 256x1280x11520 45.2 -> 43.9; 288 rows was no better.
inline constexpr int64_t kMc = kMr * (kSplitB ? 32 : 16);
// Columns per block (the partial sums: kMc x kNc floats, 768 KiB on AVX3).
inline constexpr int64_t kNc = 1024;
// kHighest: k per block, so a B micro-panel (128 x 32 floats, 16 KiB) stays
// in half an L1 (Zen 4, one thread, CPU time of 2048^3: 256 and 192 were no
// better).
inline constexpr int64_t kKc = 128;

// Every kernel's accumulators: kRows x kVecs vectors (kV, or 1 for a column
// tile of at most kL columns: head_dim 40 is 16 + 16 + 8 on AVX2), loaded
// from `in` (a partial-sum tile of row stride kCols) or zero when in is null,
// stored to `out` (row stride ld_out).
template <int kRows, int kVecs>
HWY_INLINE void LoadTile(const float* HWY_RESTRICT in, hn::Vec<DF> (&acc)[kRows][kVecs]) {
  const DF d;
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVecs; ++v) acc[r][v] = in != nullptr ? hn::LoadU(d, in + r * kCols + v * kL) : hn::Zero(d);
  }
}
template <int kRows, int kVecs>
HWY_INLINE void StoreTile(const hn::Vec<DF> (&acc)[kRows][kVecs], float* HWY_RESTRICT out, int64_t ld_out) {
  const DF d;
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVecs; ++v) hn::StoreU(acc[r][v], d, out + r * ld_out + v * kL);
  }
}

template <int kRows, int kVecs>
HWY_NOINLINE void PairKernel(int64_t pairs, const float* HWY_RESTRICT a, int64_t as,
                             const uint32_t* HWY_RESTRICT b, const float* HWY_RESTRICT in,
                             float* HWY_RESTRICT out, int64_t ld_out) {
  const DF d;
  const hn::RebindToUnsigned<DF> du;
  using V = hn::Vec<DF>;
  V acc[kRows][kVecs];
  LoadTile<kRows, kVecs>(in, acc);
  const auto high_half = hn::Set(du, 0xffff0000u);
  for (int64_t p = 0; p < pairs; ++p) {
    V b_odd[kVecs], b_even[kVecs];
    for (int v = 0; v < kVecs; ++v) {
      const auto w = hn::Load(du, b + p * mi::kPanelWidth + v * kL);
      b_odd[v] = hn::BitCast(d, hn::And(w, high_half));
      b_even[v] = hn::BitCast(d, hn::ShiftLeft<16>(w));
    }
    for (int r = 0; r < kRows; ++r) {
      const V a_odd = hn::Set(d, a[r * as + 2 * p + 1]);
      const V a_even = hn::Set(d, a[r * as + 2 * p]);
      for (int v = 0; v < kVecs; ++v) {
        acc[r][v] = hn::MulAdd(a_odd, b_odd[v], acc[r][v]);
        acc[r][v] = hn::MulAdd(a_even, b_even[v], acc[r][v]);
      }
    }
  }
  StoreTile<kRows, kVecs>(acc, out, ld_out);
}

// acc[r] += a[r * as] * b_row (kCols columns) for every row r: one k step of
// the f32 and split-pair kernels.
template <int kRows, int kVecs>
HWY_INLINE void RankOneUpdate(const float* HWY_RESTRICT a, int64_t as, const float* HWY_RESTRICT b_row,
                              hn::Vec<DF> (&acc)[kRows][kVecs]) {
  const DF d;
  hn::Vec<DF> bv[kVecs];
  for (int v = 0; v < kVecs; ++v) bv[v] = hn::Load(d, b_row + v * kL);
  for (int r = 0; r < kRows; ++r) {
    const auto av = hn::Set(d, a[r * as]);
    for (int v = 0; v < kVecs; ++v) acc[r][v] = hn::MulAdd(av, bv[v], acc[r][v]);
  }
}

// PairKernel on a micro-panel split by SplitPanel: per pair 2 * kCols
// floats, the odd-k row then the even-k row.
template <int kRows, int kVecs>
HWY_NOINLINE void SplitPairKernel(int64_t pairs, const float* HWY_RESTRICT a, int64_t as,
                                  const float* HWY_RESTRICT b, const float* HWY_RESTRICT in,
                                  float* HWY_RESTRICT out, int64_t ld_out) {
  using V = hn::Vec<DF>;
  V acc[kRows][kVecs];
  LoadTile<kRows, kVecs>(in, acc);
  for (int64_t p = 0; p < pairs; ++p) {
    RankOneUpdate<kRows, kVecs>(a + 2 * p + 1, as, b + p * 2 * kCols, acc);      // odd k
    RankOneUpdate<kRows, kVecs>(a + 2 * p, as, b + p * 2 * kCols + kCols, acc);  // even k
  }
  StoreTile<kRows, kVecs>(acc, out, ld_out);
}

// Splits kCols columns of `pairs` rows of a pair panel (row stride
// kPanelWidth words) into SplitPairKernel's layout.
inline void SplitPanel(const uint32_t* HWY_RESTRICT panel, int64_t pairs, float* HWY_RESTRICT out) {
  const DF d;
  const hn::RebindToUnsigned<DF> du;
  const auto high_half = hn::Set(du, 0xffff0000u);
  for (int64_t p = 0; p < pairs; ++p) {
    for (int v = 0; v < kV; ++v) {
      const auto w = hn::Load(du, panel + p * mi::kPanelWidth + v * kL);
      hn::Store(hn::BitCast(d, hn::And(w, high_half)), d, out + p * 2 * kCols + v * kL);
      hn::Store(hn::BitCast(d, hn::ShiftLeft<16>(w)), d, out + p * 2 * kCols + kCols + v * kL);
    }
  }
}

// kHighest on an A micro-panel packed k-major (PackAF32): a[k * kRows + r].
template <int kRows, int kVecs>
HWY_NOINLINE void F32Kernel(int64_t ks, const float* HWY_RESTRICT a, int64_t /*as*/,
                            const float* HWY_RESTRICT b, const float* HWY_RESTRICT in,
                            float* HWY_RESTRICT out, int64_t ld_out) {
  using V = hn::Vec<DF>;
  V acc[kRows][kVecs];
  LoadTile<kRows, kVecs>(in, acc);
  for (int64_t k = 0; k < ks; ++k) RankOneUpdate<kRows, kVecs>(a + k * kRows, 1, b + k * mi::kPanelWidth, acc);
  StoreTile<kRows, kVecs>(acc, out, ld_out);
}

template <typename TB>
using KernelFn = void (*)(int64_t, const float*, int64_t, const TB*, const float*, float*, int64_t);

// A target's kernels for one B layout: [kVecs - 1][rows - 1], kVecs 1 (a
// column tile of at most kL columns) or kV. Only the tables a target runs
// are instantiated: SplitPairKernel on split micro-panels with 16 registers,
// PairKernel on the panels with 32, F32Kernel for kHighest.
enum class Kind { kPair, kSplitPair, kF32 };
template <Kind kKind, int kVecs, int... kRows>
constexpr auto KernelRow(std::integer_sequence<int, kRows...>) {
  if constexpr (kKind == Kind::kPair) {
    return std::array<KernelFn<uint32_t>, kMr>{&PairKernel<kRows + 1, kVecs>...};
  } else if constexpr (kKind == Kind::kSplitPair) {
    return std::array<KernelFn<float>, kMr>{&SplitPairKernel<kRows + 1, kVecs>...};
  } else {
    return std::array<KernelFn<float>, kMr>{&F32Kernel<kRows + 1, kVecs>...};
  }
}
template <Kind kKind>
constexpr auto KernelTable() {
  static_assert(kV == 2, "the table holds the 1- and kV-vector rows");
  constexpr auto rows = std::make_integer_sequence<int, kMr>{};
  using Row = decltype(KernelRow<kKind, 1>(rows));
  return std::array<Row, kV>{KernelRow<kKind, 1>(rows), KernelRow<kKind, kV>(rows)};
}

template <typename TB>
using KernelTableOf = std::array<std::array<KernelFn<TB>, kMr>, kV>;

// Vectors per row of the kernel for a tile of cols <= kCols columns: one
// when cols <= kL.
inline constexpr int64_t TileVecs(int64_t cols) { return cols <= kL ? 1 : kV; }

// The kernel for a rows x cols tile. It writes TileVecs(cols) whole vectors
// per row (into a partial-sum tile, anything past cols is ignored).
template <typename TB>
HWY_INLINE KernelFn<TB> PickKernel(const KernelTableOf<TB>& kernels, int64_t rows, int64_t cols) {
  return kernels[TileVecs(cols) - 1][rows - 1];
}

// Runs the kernel for rows x cols of out; a column tile that is not whole
// vectors goes through a local buffer.
template <typename TB>
HWY_INLINE void RunTile(const KernelTableOf<TB>& kernels, int64_t ks, const float* a, int64_t as,
                        const TB* b, const float* in, float* out, int64_t ld_out, int64_t rows,
                        int64_t cols) {
  const KernelFn<TB> kernel = PickKernel(kernels, rows, cols);
  if (cols == TileVecs(cols) * kL) {
    kernel(ks, a, as, b, in, out, ld_out);
    return;
  }
  HWY_ALIGN float tile[kMr * kCols];
  kernel(ks, a, as, b, in, tile, kCols);
  for (int64_t r = 0; r < rows; ++r) std::memcpy(out + r * ld_out, tile + r * kCols, cols * sizeof(float));
}

// Rounds n f32 (or widens n bf16) into dst as bf16 values held in f32.
HWY_INLINE void RoundRow(const mi::CallArgs& args, int64_t row, int64_t e0, int64_t n, float* dst) {
  const DF d;
  int64_t e = 0;
  if (args.a_f32 != nullptr) {
    const float* src = args.a_f32 + row * args.lda + e0;
    for (; e + kL <= n; e += kL) hn::StoreU(RoundToBf16(d, hn::LoadU(d, src + e)), d, dst + e);
    for (; e < n; ++e) dst[e] = kernels::RoundToBf16(src[e]);
  } else {
    const bf16* src = args.a_bf16 + row * args.lda + e0;
    const uint16_t* bits = reinterpret_cast<const uint16_t*>(src);
    for (; e + kL <= n; e += kL) hn::StoreU(Bf16BitsToF32(d, bits + e), d, dst + e);
    for (; e < n; ++e) dst[e] = Bf16ToF32(src[e]);
  }
}

// Packs rows [i0, i0 + rows) of A, expanded pairs [p0, p0 + np), as f32 rows
// of 2*np values at dst + r*kAStride (see matmul_internal.h for the expansion).
inline void PackAPairs(const mi::CallArgs& args, int64_t i0, int64_t rows, int64_t p0, int64_t np,
                       float* dst) {
  const DF d;
  const int64_t k = args.b->k;
  if (args.b->precision != Precision::kHigh) {
    const int64_t e0 = 2 * p0;
    const int64_t ne = std::min<int64_t>(2 * np, k - e0);
    for (int64_t r = 0; r < rows; ++r) {
      float* out = dst + r * kAStride;
      RoundRow(args, i0 + r, e0, ne, out);
      for (int64_t e = ne; e < 2 * np; ++e) out[e] = 0.0f;
    }
    return;
  }
  const int64_t q0 = p0 / 3, nq = np / 3;  // whole original pairs
  const int64_t e0 = 2 * q0;
  const int64_t ne = std::min<int64_t>(2 * nq, k - e0);
  HWY_ALIGN float hi[2 * kKcPairs], lo[2 * kKcPairs];
  for (int64_t r = 0; r < rows; ++r) {
    RoundRow(args, i0 + r, e0, ne, hi);
    for (int64_t e = ne; e < 2 * nq; ++e) hi[e] = 0.0f;
    if (args.a_f32 != nullptr) {
      const float* src = args.a_f32 + (i0 + r) * args.lda + e0;
      int64_t e = 0;
      for (; e + kL <= ne; e += kL) {
        const auto x = hn::LoadU(d, src + e);
        const auto h = hn::Load(d, hi + e);
        // lo = 0 where hi is Inf or NaN, as matmul_internal::SplitBf16.
        hn::Store(RoundToBf16(d, hn::IfThenElseZero(hn::IsFinite(h), hn::Sub(x, h))), d, lo + e);
      }
      for (; e < ne; ++e) lo[e] = std::isfinite(hi[e]) ? kernels::RoundToBf16(src[e] - hi[e]) : 0.0f;
      for (; e < 2 * nq; ++e) lo[e] = 0.0f;
    } else {
      std::fill(lo, lo + 2 * nq, 0.0f);
    }
    float* out = dst + r * kAStride;
    for (int64_t q = 0; q < nq; ++q) {
      out[6 * q + 0] = hi[2 * q];
      out[6 * q + 1] = hi[2 * q + 1];
      out[6 * q + 2] = std::isfinite(hi[2 * q]) ? hi[2 * q] : 0.0f;  // cross
      out[6 * q + 3] = std::isfinite(hi[2 * q + 1]) ? hi[2 * q + 1] : 0.0f;
      out[6 * q + 4] = lo[2 * q];
      out[6 * q + 5] = lo[2 * q + 1];
    }
  }
}

// Both drivers: column blocks of kNc > row blocks of kMc > K blocks > column
// tiles > row groups. Between K blocks the sums wait in a private panel-major
// buffer (tile (column tile, row) at partial + (col - jb) * kMc + row * kCols),
// not in C: C is never read (beta = 0), and the next row group's loads do not
// 4 KiB-alias the previous group's pending stores (see matmul_bf16.cc).
inline void PairsBlock(const mi::CallArgs& args, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  static constexpr auto kKernels = KernelTable<kSplitB ? Kind::kSplitPair : Kind::kPair>();
  const mi::PackedData& b = *args.b;
  const int64_t kc =
      mi::PairBlockSize(b.pairs, kKcPairs, b.precision == Precision::kHigh ? 3 : 1);
  // An A of bf16 numbers (CallArgs::a_rounded) is read where it lies.
  const bool a_in_place = args.a_rounded && b.precision == Precision::kDefault;
  float* a_block =
      a_in_place ? nullptr : mi::ThreadScratch<float, mi::kPackedASlot>(static_cast<size_t>(kMc * kAStride));
  const int64_t as = a_in_place ? args.lda : kAStride;
  float* partial = b.pairs > kc ? mi::ThreadScratch<float, mi::kPartialSlot>(static_cast<size_t>(kMc * kNc)) : nullptr;
  float* split = kSplitB ? mi::ThreadScratch<float, mi::kSecondSlot>(static_cast<size_t>(2 * kc * kCols)) : nullptr;
  // The micro-panel of the column tile at c, from pair p on.
  auto micro_panel = [&](int64_t c, int64_t p) {
    return b.pair_panel(c / mi::kPanelWidth) + p * mi::kPanelWidth + c % mi::kPanelWidth;
  };
  for (int64_t jb = j0; jb < j1; jb += kNc) {
    const int64_t je = std::min(j1, jb + kNc);
    for (int64_t ib = i0; ib < i1; ib += kMc) {
      const int64_t rows = std::min<int64_t>(kMc, i1 - ib);
      for (int64_t p0 = 0; p0 < b.pairs; p0 += kc) {
        const int64_t np = std::min(kc, b.pairs - p0);
        const bool first = p0 == 0, last = p0 + np == b.pairs;
        const float* a_rows = a_in_place ? args.a_f32 + ib * args.lda + 2 * p0 : a_block;
        if (!a_in_place) PackAPairs(args, ib, rows, p0, np, a_block);
        for (int64_t col = jb; col < je; col += kCols) {
          const uint32_t* panel = micro_panel(col, p0);
          float* tile = partial == nullptr ? nullptr : partial + (col - jb) * kMc;
          const auto* b_tile = [&] {
            if constexpr (kSplitB) {
              SplitPanel(panel, np, split);
              return static_cast<const float*>(split);
            } else {
              return panel;
            }
          }();
          const int64_t cols = std::min(kCols, je - col);
          // The next micro-panel (the next column tile, else the next K
          // block's first), fetched a share per row group while this one
          // runs: it comes from L3 or DRAM (a weight read once per row block).
          const uint32_t* next = nullptr;
          int64_t next_pairs = 0;
          if (col + kCols < je) {
            next = micro_panel(col + kCols, p0);
            next_pairs = np;
          } else if (!last) {
            next = micro_panel(jb, p0 + np);
            next_pairs = std::min(kc, b.pairs - p0 - np);
          }
          const int64_t groups = (rows + kMr - 1) / kMr;
          const int64_t per_group = (next_pairs + groups - 1) / groups;
          for (int64_t r0 = 0, fetched = 0; r0 < rows; r0 += kMr) {
            for (const int64_t until = std::min(next_pairs, fetched + per_group); fetched < until; ++fetched) {
              for (int64_t w = 0; w < kCols; w += 16) hwy::Prefetch(next + fetched * mi::kPanelWidth + w);
            }
            const int64_t mr = std::min<int64_t>(kMr, rows - r0);
            const float* in = first ? nullptr : tile + r0 * kCols;
            const float* a = a_rows + r0 * as;
            if (last) {
              float* c = args.c + (ib + r0) * args.ldc + col;
              RunTile(kKernels, np, a, as, b_tile, in, c, args.ldc, mr, cols);
              if (args.bias != nullptr) mi::AddBiasTile(c, args.ldc, mr, cols, args.bias + col);
            } else {
              PickKernel(kKernels, mr, cols)(np, a, as, b_tile, in, tile + r0 * kCols, kCols);
            }
          }
        }
      }
    }
  }
}

// Packs rows [i0, i0 + rows) of A, columns [k0, k0 + nk), for F32Kernel:
// row group g (kMr rows, fewer in the last) at dst + g * kMr * kKc, k-major,
// so a k step's broadcasts read one contiguous run.
inline void PackAF32(const mi::CallArgs& args, int64_t i0, int64_t rows, int64_t k0, int64_t nk,
                     float* HWY_RESTRICT dst) {
  for (int64_t g0 = 0; g0 < rows; g0 += kMr) {
    const int64_t mr = std::min<int64_t>(kMr, rows - g0);
    float* group = dst + g0 * kKc;
    for (int64_t r = 0; r < mr; ++r) {
      const int64_t row = i0 + g0 + r;
      if (args.a_f32 != nullptr) {
        const float* src = args.a_f32 + row * args.lda + k0;
        for (int64_t k = 0; k < nk; ++k) group[k * mr + r] = src[k];
      } else {
        const bf16* src = args.a_bf16 + row * args.lda + k0;
        for (int64_t k = 0; k < nk; ++k) group[k * mr + r] = Bf16ToF32(src[k]);
      }
    }
  }
}

// kHighest: the frame of PairsBlock on f32 panels, with A packed by PackAF32
// (read in place, a row group's 12 rows at a power-of-two lda share one L1
// set) and the next B micro-panel fetched a share per row group while this
// one runs.
inline void F32Block(const mi::CallArgs& args, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  static constexpr auto kKernels = KernelTable<Kind::kF32>();
  const mi::PackedData& b = *args.b;
  const int64_t k = b.k;
  float* a_block = mi::ThreadScratch<float, mi::kPackedASlot>(static_cast<size_t>(kMc * kKc));
  float* partial = k > kKc ? mi::ThreadScratch<float, mi::kPartialSlot>(static_cast<size_t>(kMc * kNc)) : nullptr;
  auto micro_panel = [&](int64_t c, int64_t k0) {
    return b.f32_panel(c / mi::kPanelWidth) + k0 * mi::kPanelWidth + c % mi::kPanelWidth;
  };
  for (int64_t jb = j0; jb < j1; jb += kNc) {
    const int64_t je = std::min(j1, jb + kNc);
    for (int64_t ib = i0; ib < i1; ib += kMc) {
      const int64_t rows = std::min<int64_t>(kMc, i1 - ib);
      for (int64_t k0 = 0; k0 < k; k0 += kKc) {
        const int64_t nk = std::min(kKc, k - k0);
        const bool first = k0 == 0, last = k0 + nk == k;
        PackAF32(args, ib, rows, k0, nk, a_block);
        for (int64_t col = jb; col < je; col += kCols) {
          const float* panel = micro_panel(col, k0);
          float* tile = partial == nullptr ? nullptr : partial + (col - jb) * kMc;
          const int64_t cols = std::min(kCols, je - col);
          const float* next = nullptr;
          int64_t next_k = 0;
          if (col + kCols < je) {
            next = micro_panel(col + kCols, k0);
            next_k = nk;
          } else if (!last) {
            next = micro_panel(jb, k0 + nk);
            next_k = std::min(kKc, k - k0 - nk);
          }
          const int64_t groups = (rows + kMr - 1) / kMr;
          const int64_t per_group = (next_k + groups - 1) / groups;
          for (int64_t r0 = 0, fetched = 0; r0 < rows; r0 += kMr) {
            for (const int64_t until = std::min(next_k, fetched + per_group); fetched < until; ++fetched) {
              for (int64_t w = 0; w < kCols; w += 16) hwy::Prefetch(next + fetched * mi::kPanelWidth + w);
            }
            const int64_t mr = std::min<int64_t>(kMr, rows - r0);
            const float* in = first ? nullptr : tile + r0 * kCols;
            const float* a = a_block + r0 * kKc;
            if (last) {
              float* c = args.c + (ib + r0) * args.ldc + col;
              RunTile(kKernels, nk, a, 1, panel, in, c, args.ldc, mr, cols);
              if (args.bias != nullptr) mi::AddBiasTile(c, args.ldc, mr, cols, args.bias + col);
            } else {
              PickKernel(kKernels, mr, cols)(nk, a, 1, panel, in, tile + r0 * kCols, kCols);
            }
          }
        }
      }
    }
  }
}

}  // namespace matmul_hwy

// The block driver HWY_EXPORTed by matmul_highway.cc (see matmul_internal.h).
inline void HwyMatmulBlock(const mi::CallArgs& args, int64_t i0, int64_t i1, int64_t j0,
                           int64_t j1) {
  if (args.b->layout == mi::Layout::kPairs) {
    matmul_hwy::PairsBlock(args, i0, i1, j0, j1);
  } else {
    matmul_hwy::F32Block(args, i0, i1, j0, j1);
  }
}

inline int64_t HwyMatmulTarget() { return HWY_TARGET; }

inline int64_t HwyMatmulRowsPerBlock() { return matmul_hwy::kMc; }
inline int64_t HwyMatmulRowsPerTile() { return matmul_hwy::kMr; }

}  // namespace tpumesh::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TPUMESH_KERNELS_MATMUL_INL_H_
