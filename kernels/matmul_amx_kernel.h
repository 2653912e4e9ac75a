// Internal to the kAmx provider: the AMX tile micro-kernel and the block
// driver around it, for the pair-panel layout the kBf16 provider packs
// (matmul_internal.h), shared by the matmul (matmul_amx.cc) and the
// packed-weight conv (conv2d_bf16.cc) through the same Source contract as
// bf16_kernel::Bf16Driver. Every function that touches a tile carries the
// amx-tile/amx-bf16 target attribute (TPUMESH_TARGET_AMX), so the binary
// stays portable; nothing here may run unless AmxMatmulActive()
// (kernels/matmul.h): the amx path is active and the known-answer self-check
// of matmul_amx.h passed. docs/kernels.md ("The kAmx provider") has the
// contract and the numerics.
//
// Micro-kernel: a 32 x 32 block of C held in four 16 x 16 f32 accumulator
// tiles (tmm0: rows 0-15 x columns 0-15, tmm1: rows 0-15 x 16-31, tmm2: rows
// 16-31 x 0-15, tmm3: rows 16-31 x 16-31) across a whole K block; per 16
// pairs of k two A tiles (tmm4, tmm5: 16 rows x 16 pairs of the packed A
// block, row stride kAStride words) and two B tiles (tmm6, tmm7: 16 pairs x
// 16 columns of the B panel, row stride 32 words) are loaded and four
// tdpbf16ps (16 x 16 x 32 each) run. The packed layouts need no change: a
// B panel's P rows of 32 pair words are two B tiles side by side, a packed A
// row's pair words are an A tile row.
//
// Edges, exact: a row group of <= 16 rows uses one A tile (tmm4) and a panel
// of <= 16 valid columns one B tile (tmm6); rows past M inside a group read
// stale rows of the A block (their C rows are never stored); columns past N
// are the panel's zero padding; the last partial step of K (np % 16 pairs)
// reads A through words the driver zeroes after packing (up to a multiple of
// 16 pairs) and B through a zero-padded copy of the panel's last rows, so the
// pad contributes 0 * 0 products. Partial C tiles go through a local tile.
//
// Fixed K grouping: every K block but the last is a multiple of 16 pairs (48
// for kHigh, whose blocks hold whole original pairs), so tdpbf16ps always
// sums the pairs [16g, 16g + 16) of expanded K, whatever the rows, columns,
// blocks or threads: C is bit-identical for every thread count.
//
// A test may define TPUMESH_AMX_EMULATION before including this header (see
// the #else below) to run this driver on a software model of the tiles.
//
// Tile instructions are inline assembly with "memory" clobbers on loads and
// stores; GCC 12's _tile_loadd does not tell the compiler it reads memory
// (so stores into the buffers it reads could be moved past it). The tile
// configuration is a static constant loaded with _tile_loadconfig (GCC 12's
// declares an 8-byte read of the 64-byte configuration: harmless for data
// that is never stored at run time) and released with _tile_release at the
// end of every driver call.
#ifndef TPUMESH_KERNELS_MATMUL_AMX_KERNEL_H_
#define TPUMESH_KERNELS_MATMUL_AMX_KERNEL_H_

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/matmul.h"
#include "kernels/matmul_bf16_kernel.h"
#include "kernels/matmul_internal.h"

#if !defined(TPUMESH_AMX_EMULATION)
#define TPUMESH_AMX_NAMESPACE amx_kernel
#define TPUMESH_TARGET_AMX \
  __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl,avx512dq,amx-tile,amx-bf16")))
// One tile instruction each; T, C, A, B are tile numbers (literals).
#define TPUMESH_AMX_CONFIGURE(config) _tile_loadconfig(config)
#define TPUMESH_AMX_RELEASE() _tile_release()
#define TPUMESH_AMX_LOAD(T, ptr, stride_bytes)                                                   \
  asm volatile("tileloadd (%0,%1,1), %%tmm" #T : : "r"(ptr), "r"(static_cast<int64_t>(stride_bytes)) \
               : "memory")
#define TPUMESH_AMX_STORE(T, ptr, stride_bytes)                                                    \
  asm volatile("tilestored %%tmm" #T ", (%0,%1,1)" : : "r"(ptr), "r"(static_cast<int64_t>(stride_bytes)) \
               : "memory")
#define TPUMESH_AMX_ZERO(T) asm volatile("tilezero %%tmm" #T ::)
// C += A x B (AT&T order: B, A, C).
#define TPUMESH_AMX_DOT(C, A, B) asm volatile("tdpbf16ps %%tmm" #B ", %%tmm" #A ", %%tmm" #C ::)
#else
// The test seam (tests/kernels/matmul_amx_emulated_test.cc): the same driver
// in namespace amx_emulated, every tile instruction a call into a software
// model of the tiles that the including file defines first, in namespace
// ::tpumesh_amx_emulation (Configure, Release, Load, Store, Zero, Dot), so
// the driver's indexing, edges and blocking run on any CPU.
#define TPUMESH_AMX_NAMESPACE amx_emulated
#define TPUMESH_TARGET_AMX
#define TPUMESH_AMX_CONFIGURE(config) ::tpumesh_amx_emulation::Configure(config)
#define TPUMESH_AMX_RELEASE() ::tpumesh_amx_emulation::Release()
#define TPUMESH_AMX_LOAD(T, ptr, stride_bytes) ::tpumesh_amx_emulation::Load(T, ptr, stride_bytes)
#define TPUMESH_AMX_STORE(T, ptr, stride_bytes) ::tpumesh_amx_emulation::Store(T, ptr, stride_bytes)
#define TPUMESH_AMX_ZERO(T) ::tpumesh_amx_emulation::Zero(T)
#define TPUMESH_AMX_DOT(C, A, B) ::tpumesh_amx_emulation::Dot(C, A, B)
#endif

namespace tpumesh::kernels::matmul_internal::TPUMESH_AMX_NAMESPACE {

using bf16_kernel::kAStride;
using Scratch = AmxScratch;

inline constexpr int64_t kTile = 16;          // rows, pairs and f32 columns of a tile
inline constexpr int64_t kMr = 2 * kTile;     // rows per micro-tile: two A tiles
inline constexpr int64_t kNr = kPanelWidth;   // a B panel: two B tiles
// Pairs per K block, a multiple of 16 (kDefault) or 48 (kHigh: 240). The A
// rows of a block, padded to a multiple of 16 pairs, fit kAStride.
inline constexpr int64_t kKcPairs = 256;
static_assert(kKcPairs % kTile == 0 && kKcPairs <= kAStride);
// Rows per A block (a multiple of kMr, so a group's second A tile stays
// inside the block): 128 x 1088 bytes = 136 KiB.
inline constexpr int64_t kMc = 128;
static_assert(kMc % kMr == 0);
// Columns per block: the partial sums between K blocks, kMc x kNc floats.
inline constexpr int64_t kNc = 1024;

// Byte strides of the tiles' rows.
inline constexpr int64_t kAStrideBytes = kAStride * 4;  // a packed A row
inline constexpr int64_t kTileStrideBytes = kNr * 4;    // B panel rows, partial and local C tiles

// Palette 1, every tile 16 rows x 64 bytes; bytes 1-15 and the unused
// fields zero (ldtilecfg faults on nonzero reserved bytes).
struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64);
inline constexpr TileConfig kTileConfig = {
    1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0}, {16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0}};

// The pairs of a K block: multiples of 16 (48 for kHigh) but the last.
inline int64_t AmxPairBlock(const PackedData& b) {
  return PairBlockSize(b.pairs, kKcPairs, b.precision == Precision::kHigh ? 3 * kTile : kTile);
}

// Per-thread Scratch for a call on `b` (ThreadScratch's slots; the partial
// sums only when K has more than one block). Defined in matmul_amx.cc.
Scratch ThreadScratchFor(const PackedData& b);

// The accumulators of one micro-tile: zeroed, or loaded from a partial-sum
// tile (row stride 32 floats).
template <bool kTwoRows, bool kTwoCols>
TPUMESH_TARGET_AMX inline void LoadAccumulators(const float* in) {
  if (in == nullptr) {
    TPUMESH_AMX_ZERO(0);
    if constexpr (kTwoCols) TPUMESH_AMX_ZERO(1);
    if constexpr (kTwoRows) TPUMESH_AMX_ZERO(2);
    if constexpr (kTwoRows && kTwoCols) TPUMESH_AMX_ZERO(3);
    return;
  }
  TPUMESH_AMX_LOAD(0, in, kTileStrideBytes);
  if constexpr (kTwoCols) TPUMESH_AMX_LOAD(1, in + kTile, kTileStrideBytes);
  if constexpr (kTwoRows) TPUMESH_AMX_LOAD(2, in + kTile * kNr, kTileStrideBytes);
  if constexpr (kTwoRows && kTwoCols) TPUMESH_AMX_LOAD(3, in + kTile * kNr + kTile, kTileStrideBytes);
}

// One step of 16 pairs: a = the group's first A row at the step's first
// pair, b = the panel row of the step's first pair.
template <bool kTwoRows, bool kTwoCols>
TPUMESH_TARGET_AMX inline void DotStep(const uint32_t* a, const uint32_t* b) {
  TPUMESH_AMX_LOAD(4, a, kAStrideBytes);
  TPUMESH_AMX_LOAD(6, b, kTileStrideBytes);
  TPUMESH_AMX_DOT(0, 4, 6);
  if constexpr (kTwoCols) {
    TPUMESH_AMX_LOAD(7, b + kTile, kTileStrideBytes);
    TPUMESH_AMX_DOT(1, 4, 7);
  }
  if constexpr (kTwoRows) {
    TPUMESH_AMX_LOAD(5, a + kTile * kAStride, kAStrideBytes);
    TPUMESH_AMX_DOT(2, 5, 6);
    if constexpr (kTwoCols) TPUMESH_AMX_DOT(3, 5, 7);
  }
}

// Stores the accumulators as a 32 x 32 tile (row stride `ld` floats) at out.
template <bool kTwoRows, bool kTwoCols>
TPUMESH_TARGET_AMX inline void StoreAccumulators(float* out, int64_t ld) {
  const int64_t stride = ld * 4;
  TPUMESH_AMX_STORE(0, out, stride);
  if constexpr (kTwoCols) TPUMESH_AMX_STORE(1, out + kTile, stride);
  if constexpr (kTwoRows) TPUMESH_AMX_STORE(2, out + kTile * ld, stride);
  if constexpr (kTwoRows && kTwoCols) TPUMESH_AMX_STORE(3, out + kTile * ld + kTile, stride);
}

// The micro-tile over one K block: `in` the partial sums (null: from zero),
// `steps` full steps of 16 pairs, then (b_tail non-null) one step on the
// zero-padded copy of the block's last pairs. The result stays in tiles.
template <bool kTwoRows, bool kTwoCols>
TPUMESH_TARGET_AMX void RunMicroTile(const float* in, const uint32_t* a, const uint32_t* b, int64_t steps,
                                     const uint32_t* b_tail) {
  LoadAccumulators<kTwoRows, kTwoCols>(in);
  for (int64_t t = 0; t < steps; ++t) DotStep<kTwoRows, kTwoCols>(a + t * kTile, b + t * kTile * kNr);
  if (b_tail != nullptr) DotStep<kTwoRows, kTwoCols>(a + steps * kTile, b_tail);
}

// The four shapes of a micro-tile: rows > 16, valid columns > 16.
struct MicroTile {
  bool two_rows, two_cols;

  TPUMESH_TARGET_AMX void Run(const float* in, const uint32_t* a, const uint32_t* b, int64_t steps,
                              const uint32_t* b_tail) const {
    if (two_rows && two_cols) return RunMicroTile<true, true>(in, a, b, steps, b_tail);
    if (two_rows) return RunMicroTile<true, false>(in, a, b, steps, b_tail);
    if (two_cols) return RunMicroTile<false, true>(in, a, b, steps, b_tail);
    RunMicroTile<false, false>(in, a, b, steps, b_tail);
  }
  TPUMESH_TARGET_AMX void Store(float* out, int64_t ld) const {
    if (two_rows && two_cols) return StoreAccumulators<true, true>(out, ld);
    if (two_rows) return StoreAccumulators<true, false>(out, ld);
    if (two_cols) return StoreAccumulators<false, true>(out, ld);
    StoreAccumulators<false, false>(out, ld);
  }
};

// One step of the driver: rows [ib, ib + rows) x K pairs [p0, p0 + np) of A
// against columns [jb, je).
struct Step {
  int64_t jb, je, ib, rows, p0, np;
};

// The driver: C rows [i0, i1) x columns [j0, j1) = A x B over the whole of
// K, B packed in pair panels (j0 a multiple of 32), with bf16_kernel's
// Source contract (Bf16Driver), except that StoreTile is handed at most 16
// rows at a time. Loop order: column block (kNc) > row block (kMc) > K block
// (AmxPairBlock) > 32-column panel > 32-row group; the next A block is
// packed a few rows per micro-tile into the other buffer, as Bf16Driver does.
// No allocation: every buffer is in `scratch` or on the stack.
template <class Source>
TPUMESH_TARGET_AMX void AmxDriver(const Source& src, const PackedData& b, int64_t i0, int64_t i1, int64_t j0,
                                  int64_t j1, const Scratch& scratch) {
  if (i0 >= i1 || j0 >= j1 || b.pairs == 0) return;
  const int64_t pairs = b.pairs;
  const int64_t kc = AmxPairBlock(b);
  float* partial = pairs > kc ? scratch.partial : nullptr;
  alignas(64) float out_tile[kMr * kNr];
  alignas(64) uint32_t b_tail[kTile * kNr];

  auto make_step = [&](int64_t jb, int64_t ib, int64_t p0) {
    return Step{jb, std::min(j1, jb + kNc), ib, std::min(kMc, i1 - ib), p0, std::min(kc, pairs - p0)};
  };
  auto next_step = [&](const Step& s, Step* next) {
    int64_t jb = s.jb, ib = s.ib, p0 = s.p0 + kc;
    if (p0 >= pairs) {
      p0 = 0;
      ib += kMc;
      if (ib >= i1) {
        ib = i0;
        jb += kNc;
        if (jb >= j1) return false;
      }
    }
    *next = make_step(jb, ib, p0);
    return true;
  };
  // Packs rows [r, r + n) of a block and zeroes each row's words from np up
  // to the next multiple of 16 pairs (the last step's A pad).
  auto pack = [&](const Step& s, int64_t r, int64_t n, uint32_t* block) {
    src.PackA(s.ib + r, n, s.p0, s.np, block + r * kAStride);
    const int64_t pad = (s.np + kTile - 1) / kTile * kTile - s.np;
    if (pad == 0) return;
    for (int64_t row = r; row < r + n; ++row) std::memset(block + row * kAStride + s.np, 0, pad * sizeof(uint32_t));
  };

  TPUMESH_AMX_CONFIGURE(&kTileConfig);
  Step s = make_step(j0, i0, 0);
  pack(s, 0, s.rows, scratch.a_blocks[0]);
  for (int64_t si = 0;; ++si) {
    Step next{};
    const bool has_next = next_step(s, &next);
    const bool first = s.p0 == 0, last = s.p0 + s.np == pairs;
    const uint32_t* a_block = scratch.a_blocks[si & 1];
    uint32_t* next_block = scratch.a_blocks[(si + 1) & 1];
    const int64_t groups = (s.rows + kMr - 1) / kMr;
    const int64_t calls = ((s.je - s.jb + kNr - 1) / kNr) * groups;
    const int64_t per_call = has_next ? (next.rows + calls - 1) / calls : 0;
    int64_t next_e0 = 0, next_ne = 0;
    if (has_next) {
      const bf16_kernel::Step ns{next.jb, next.je, next.ib, next.rows, next.p0, next.np};
      bf16_kernel::ElementRange(b, ns, &next_e0, &next_ne);
    }
    int64_t packed = 0, prefetched = 0;
    auto pack_ahead = [&] {
      if (!has_next) return;
      const int64_t want = std::min(next.rows, packed + 2 * per_call);
      for (; prefetched < want; ++prefetched) src.PrefetchRow(next.ib + prefetched, next_e0, next_ne);
      const int64_t n = std::min(per_call, next.rows - packed);
      if (n > 0) pack(next, packed, n, next_block);
      packed += n;
    };
    const int64_t steps = s.np / kTile, tail = s.np % kTile;
    for (int64_t col = s.jb; col < s.je; col += kNr) {
      const int64_t cols = std::min(kNr, s.je - col);
      const uint32_t* b_panel = b.pair_panel(col / kNr) + s.p0 * kNr;
      if (tail != 0) {
        std::memcpy(b_tail, b_panel + steps * kTile * kNr, tail * kNr * sizeof(uint32_t));
        std::memset(b_tail + tail * kNr, 0, (kTile - tail) * kNr * sizeof(uint32_t));
      }
      float* tile = partial == nullptr ? nullptr : partial + (col - s.jb) * kMc;
      for (int64_t r0 = 0; r0 < s.rows; r0 += kMr) {
        const int64_t mr = std::min(kMr, s.rows - r0);
        pack_ahead();
        const MicroTile micro{mr > kTile, cols > kTile};
        micro.Run(first ? nullptr : tile + r0 * kNr, a_block + r0 * kAStride, b_panel, steps,
                  tail != 0 ? b_tail : nullptr);
        if (!last) {
          micro.Store(tile + r0 * kNr, kNr);
          continue;
        }
        if constexpr (Source::kWritesC) {
          float* c = src.c + (s.ib + r0) * src.ldc + col;
          if (mr == kMr && cols == kNr) {
            micro.Store(c, src.ldc);
          } else {
            micro.Store(out_tile, kNr);
            for (int64_t r = 0; r < mr; ++r) std::memcpy(c + r * src.ldc, out_tile + r * kNr, cols * sizeof(float));
          }
          if (src.bias != nullptr) AddBiasTile(c, src.ldc, mr, cols, src.bias + col);
        } else {
          micro.Store(out_tile, kNr);
          src.StoreTile(out_tile, s.ib + r0, std::min(kTile, mr), col, cols);
          if (mr > kTile) src.StoreTile(out_tile + kTile * kNr, s.ib + r0 + kTile, mr - kTile, col, cols);
        }
      }
    }
    while (has_next && packed < next.rows) pack_ahead();
    if (!has_next) break;
    s = next;
  }
  TPUMESH_AMX_RELEASE();
}

}  // namespace tpumesh::kernels::matmul_internal::TPUMESH_AMX_NAMESPACE

#endif  // TPUMESH_KERNELS_MATMUL_AMX_KERNEL_H_
