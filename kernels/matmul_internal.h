// Internal to the matmul providers (kernels/matmul*.cc): the packed layouts of
// B, the per-call arguments, and each provider's block driver. Not part of
// the public API; docs/kernels.md describes the layouts.
//
// Pair layout (kDefault/kHigh, shared by kBf16, kAmx and kHighway). The K axis is
// first "expanded": kDefault keeps K, padded with one zero row when odd, so
// there are P = ceil(K/2) pairs of k; kHigh turns each original pair q
// (k = 2q, 2q+1) into three expanded pairs 3q, 3q+1, 3q+2 holding
//   A:  (a_hi, a_cross, a_lo)     B:  (b_hi, b_lo, b_cross)
// so P = 3*ceil(K/2) and the sum over expanded k is a_hi*b_hi + a_hi*b_lo +
// a_lo*b_hi per original k (cross = hi except for Inf/NaN, see SplitBf16).
// B is stored as 32-column panels; panel q holds
// P rows of 32 uint32 words, word (p, j) = bf16(B'[2p][j]) in the low half and
// bf16(B'[2p+1][j]) in the high half (what vdpbf16ps multiplies). Columns past
// N are zero. Panel q starts at words + q*P*32; 64-byte aligned.
//
// F32 panel layout (kHighest, kHighway): panel q holds K rows of 32 floats.
//
// Row-major layout (kBlis): B' as a plain [K', N] f32 matrix, K' = K
// (kDefault, values rounded to bf16), 3K (kHigh: rows (b_hi, b_lo, b_cross)
// per k, A expanded to (a_hi, a_cross, a_lo) per k at call time) or K
// (kHighest).
//
// Every block driver computes C rows [i0, i1) x columns [j0, j1) over the
// whole of K and writes them (beta = 0). j0 is a multiple of 32 for the panel
// layouts. Drivers accumulate each C element in one chain over expanded k in
// increasing pair order, k+1 before k inside a pair, so how rows, columns or
// K are blocked never changes a result. kAmx's driver (matmul_amx_kernel.h)
// sums each group of 16 pairs in tdpbf16ps's own order instead, with the
// groups fixed by K alone, so its results do not depend on the blocking
// either.
#ifndef TPUMESH_KERNELS_MATMUL_INTERNAL_H_
#define TPUMESH_KERNELS_MATMUL_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "kernels/bf16.h"
#include "kernels/matmul.h"

namespace tpumesh::kernels::matmul_internal {

inline constexpr int64_t kPanelWidth = 32;  // columns per B panel (both panel layouts)

enum class Layout { kPairs, kF32Panels, kRowMajor };

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// 64-byte aligned, zero-initialised storage.
template <typename T>
using AlignedArray = std::unique_ptr<T[], FreeDeleter>;

template <typename T>
AlignedArray<T> AllocateAligned(size_t count);

// The ThreadScratch slots, one per buffer a thread may hold at once (a
// (T, slot) pair is one buffer): the block drivers' packed A, their partial
// sums, and the split B micro-panel (Highway on AVX2) or the second packed A
// block (kBf16, uint32_t); attention's scores; the portable conv's im2col
// rows and output tile, which hold across the matmul calls they feed.
enum ScratchSlot : int {
  kPackedASlot = 0,
  kPartialSlot = 1,
  kSecondSlot = 2,
  kScoresSlot = 3,
  kConvColSlot = 4,
  kConvTileSlot = 5,
};

// Per-thread scratch of at least `count` T's (T = float, bf16 or uint32_t),
// grown on demand and kept for the thread's lifetime. A buffer is valid
// until the same thread asks for the same (T, kSlot) again. nullptr when the
// memory cannot be had.
template <typename T, int kSlot>
T* ThreadScratch(size_t count) {
  thread_local AlignedArray<T> buffer;
  thread_local size_t capacity = 0;
  if (count > capacity) {
    buffer = AllocateAligned<T>(count);
    capacity = buffer != nullptr ? count : 0;
  }
  return buffer.get();
}

struct PackedData {
  int64_t k = 0;
  int64_t n = 0;
  Precision precision = Precision::kDefault;
  Provider provider = Provider::kHighway;
  Layout layout = Layout::kPairs;
  int64_t pairs = 0;       // kPairs: expanded pairs P
  int64_t panels = 0;      // panel layouts: ceil(n / 32)
  int64_t k_rows = 0;      // kRowMajor: rows K' of the stored matrix (ld = n)
  AlignedArray<uint32_t> words;  // kPairs
  AlignedArray<float> floats;    // kF32Panels, kRowMajor
  size_t bytes = 0;

  const uint32_t* pair_panel(int64_t q) const { return words.get() + q * pairs * kPanelWidth; }
  const float* f32_panel(int64_t q) const { return floats.get() + q * k * kPanelWidth; }
};

// One call: A (f32 or bf16), B packed, C.
struct CallArgs {
  const float* a_f32 = nullptr;  // exactly one of a_f32 / a_bf16 is set
  const bf16* a_bf16 = nullptr;
  int64_t lda = 0;
  const PackedData* b = nullptr;
  float* c = nullptr;
  int64_t ldc = 0;
  const float* bias = nullptr;  // when set, C[i][j] += bias[j] once the sum is done
  // a_f32 holds bf16 numbers (each its own bf16 rounding) and, when K is odd,
  // a readable 0 at column K of each row: a kDefault driver may read A in
  // place instead of rounding it into a packed copy (MatmulRoundedA).
  bool a_rounded = false;
};

// The bias epilogue of a stored C tile (rows x cols at c, cache-hot): one f32
// add per element after the whole sum, the bits of adding it afterwards.
inline void AddBiasTile(float* c, int64_t ldc, int64_t rows, int64_t cols, const float* bias) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    for (int64_t j = 0; j < cols; ++j) row[j] += bias[j];
  }
}

// Blocking hints a driver gives the frame: rows per micro-tile, preferred
// rows per block (its A block fits L2 at that size).
struct DriverShape {
  int64_t mr;
  int64_t mc;
};

using BlockFn = void (*)(const CallArgs& args, int64_t i0, int64_t i1, int64_t j0, int64_t j1);

// kBf16: AVX512-BF16 (matmul_bf16.cc). Only call when Avx512Bf16Active().
DriverShape Bf16DriverShape();
void Bf16Block(const CallArgs& args, int64_t i0, int64_t i1, int64_t j0, int64_t j1);

// kAmx: AMX tiles on the same pair panels (matmul_amx.cc; the self-check in
// matmul_amx.h). Only call when AmxMatmulActive().
// The buffers of one AMX driver call, owned by the caller: two A blocks of
// amx_kernel::kMc x bf16_kernel::kAStride words, and kMc x kNc floats of
// partial sums (only read when K has more than one block; may be null then).
struct AmxScratch {
  uint32_t* a_blocks[2] = {nullptr, nullptr};
  float* partial = nullptr;
};
DriverShape AmxDriverShape();
void AmxBlock(const CallArgs& args, int64_t i0, int64_t i1, int64_t j0, int64_t j1);

// kHighway (matmul_highway.cc): the function of the target Highway picks now.
DriverShape HighwayDriverShape();
BlockFn HighwayBlockFn();

// kBlis (matmul_blis.cc).
DriverShape BlisDriverShape();
void BlisBlock(const CallArgs& args, int64_t i0, int64_t i1, int64_t j0, int64_t j1);

// The shape of a resolved provider's driver (kHighway's for kAuto).
DriverShape DriverShapeOf(Provider provider);

// Matmul (kernels/matmul.h) for an A that is already bf16 numbers held in
// f32, each equal to its bf16 rounding, with a 0 at column b.k() of each row
// when b.k() is odd (so lda > b.k() then): attention's softmax numerators,
// rounded as they are written. At kDefault the Highway driver reads such an
// A in place (no packed copy of A); every provider gives Matmul's bits.
Status MatmulRoundedA(int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c,
                      int64_t ldc, int threads = 1);

// kHigh's pieces of an f32: hi = bf16(x), lo = bf16(x - hi), and `cross`,
// the copy of hi that multiplies the other operand's lo piece. For finite hi,
// cross = hi; for Inf or NaN hi, lo = 0 and cross = 0, so that Inf * finite
// stays Inf instead of meeting Inf - Inf or Inf * 0 in a cross term
// (a_hi*b_hi + a_cross*b_lo + a_lo*b_cross is then Inf or NaN exactly where
// a*b is).
inline bool Bf16IsFinite(bf16 h) { return (h.bits & 0x7f80u) != 0x7f80u; }
inline void SplitBf16(float x, bf16* hi, bf16* lo, bf16* cross) {
  *hi = F32ToBf16(x);
  const bool finite = Bf16IsFinite(*hi);
  *lo = finite ? F32ToBf16(x - Bf16ToF32(*hi)) : bf16{0};
  *cross = finite ? *hi : bf16{0};
}

// Pair blocks over K: `pairs` split into ceil(pairs / max_pairs) blocks of
// near-equal size, each a multiple of `multiple` (3 for kHigh, so a block
// holds whole original pairs) except possibly the last.
inline int64_t PairBlockSize(int64_t pairs, int64_t max_pairs, int64_t multiple) {
  max_pairs = max_pairs / multiple * multiple;
  const int64_t blocks = (pairs + max_pairs - 1) / max_pairs;
  int64_t size = (pairs + blocks - 1) / blocks;
  size = (size + multiple - 1) / multiple * multiple;
  return size < max_pairs ? size : max_pairs;
}

}  // namespace tpumesh::kernels::matmul_internal

#endif  // TPUMESH_KERNELS_MATMUL_INTERNAL_H_
