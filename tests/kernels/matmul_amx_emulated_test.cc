// The kAmx driver (kernels/matmul_amx_kernel.h) on a software model of the
// AMX tiles, so that its indexing, edges, K grouping, partial sums and
// stores run on every CPU: the header's TPUMESH_AMX_EMULATION seam compiles
// the same driver into namespace amx_emulated with each tile instruction a
// call into the model below, which follows Intel's SDM (LDTILECFG palette 1,
// TILELOADD, TILESTORED, TILEZERO, TDPBF16PS with its even/odd f32 chains,
// DAZ/FTZ, round to nearest even) and counts every misuse as a fault: an
// instruction without a configuration, a shape TDPBF16PS rejects, reserved
// configuration bytes not zero, a configuration left loaded.
//
// What this checks: the driver gives, bit for bit, the scalar model of the
// same arithmetic (matmul_internal::AmxModelKernel), whose own bounds against
// the exact sum and kHighway matmul_amx_test.cc checks; the same bits for
// every split of C into blocks (the thread-count invariance); the
// StoreTile path (the conv's) hands over every row once, at most 16 at a
// time. What it cannot check: the real instructions (encodings, the CPU's
// arithmetic); matmul_amx_test.cc does that where the host has AMX.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/bf16.h"
#include "kernels/cpu_path.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_internal.h"
#include "tests/kernels/matmul_problem.h"

// ------------------------------------------------------- the model of tiles

namespace tpumesh_amx_emulation {

struct Tile {
  int rows = 0, colsb = 0;
  uint8_t data[16][64] = {};
};

thread_local bool configured = false;
thread_local Tile tiles[8];
thread_local int faults = 0;
thread_local int configurations = 0;

inline float Flush(float x) {
  return std::fabs(x) < std::numeric_limits<float>::min() ? std::copysign(0.0f, x) : x;
}

void Configure(const void* config) {
  const auto* b = static_cast<const uint8_t*>(config);
  if (b[0] != 1) ++faults;  // palette 1
  for (int i = 1; i < 16; ++i) faults += b[i] != 0;  // start_row and reserved bytes
  for (int t = 0; t < 16; ++t) {
    uint16_t colsb;
    std::memcpy(&colsb, b + 16 + 2 * t, 2);
    const int rows = b[48 + t];
    if (t >= 8) {
      faults += colsb != 0 || rows != 0;
      continue;
    }
    if (colsb > 64 || rows > 16 || colsb % 4 != 0) ++faults;
    tiles[t] = Tile{};
    tiles[t].rows = rows;
    tiles[t].colsb = colsb;
  }
  configured = true;
  ++configurations;
}

void Release() {
  if (!configured) ++faults;
  configured = false;
  for (Tile& t : tiles) t = Tile{};
}

Tile& Use(int t) {
  if (!configured || t < 0 || t >= 8 || tiles[t].rows == 0) ++faults;
  return tiles[t & 7];
}

void Load(int t, const void* p, int64_t stride) {
  Tile& tile = Use(t);
  for (int r = 0; r < 16; ++r) {
    std::memset(tile.data[r], 0, 64);
    if (r < tile.rows) std::memcpy(tile.data[r], static_cast<const uint8_t*>(p) + r * stride, tile.colsb);
  }
}

void Store(int t, void* p, int64_t stride) {
  const Tile& tile = Use(t);
  for (int r = 0; r < tile.rows; ++r) std::memcpy(static_cast<uint8_t*>(p) + r * stride, tile.data[r], tile.colsb);
}

void Zero(int t) {
  Tile& tile = Use(t);
  std::memset(tile.data, 0, sizeof tile.data);
}

float Bf16At(const Tile& tile, int row, int index) {
  uint16_t bits;
  std::memcpy(&bits, tile.data[row] + 2 * index, 2);
  uint32_t word = uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &word, 4);
  return Flush(f);  // DAZ
}

// TDPBF16PS tc, ta, tb as the SDM's pseudo-code.
void Dot(int c, int a, int b) {
  Tile& tc = Use(c);
  const Tile& ta = Use(a);
  const Tile& tb = Use(b);
  if (ta.colsb / 4 != tb.rows || tc.colsb != tb.colsb || tc.rows != ta.rows) ++faults;
  for (int m = 0; m < tc.rows; ++m) {
    float temp[32] = {};
    for (int k = 0; k < ta.colsb / 4; ++k) {
      for (int n = 0; n < tc.colsb / 4; ++n) {
        temp[2 * n] = Flush(std::fma(Bf16At(ta, m, 2 * k), Bf16At(tb, k, 2 * n), temp[2 * n]));
        temp[2 * n + 1] = Flush(std::fma(Bf16At(ta, m, 2 * k + 1), Bf16At(tb, k, 2 * n + 1), temp[2 * n + 1]));
      }
    }
    for (int n = 0; n < tc.colsb / 4; ++n) {
      float acc;
      std::memcpy(&acc, tc.data[m] + 4 * n, 4);
      acc = Flush(Flush(acc) + Flush(temp[2 * n] + temp[2 * n + 1]));
      std::memcpy(tc.data[m] + 4 * n, &acc, 4);
    }
  }
}

}  // namespace tpumesh_amx_emulation

#define TPUMESH_AMX_EMULATION
#include "kernels/matmul_amx_kernel.h"

namespace tpumesh::kernels {
namespace {

namespace emu = ::tpumesh_amx_emulation;
namespace ae = matmul_internal::amx_emulated;
using matmul_internal::AmxScratch;
using matmul_internal::CallArgs;
using matmul_internal::PackedData;

// A Source on plain scalar code (no AVX-512), the pair words as
// PackMatmulA writes them: kDefault bf16(x), kHigh (hi, cross, lo).
struct ScalarSource {
  static constexpr bool kWritesC = true;
  const CallArgs& args;
  float* c;
  int64_t ldc;
  const float* bias;

  uint16_t Piece(int64_t row, int64_t e) const {
    const PackedData& b = *args.b;
    auto element = [&](int64_t kk) -> float {
      if (kk >= b.k) return 0.0f;
      return args.a_f32 != nullptr ? args.a_f32[row * args.lda + kk] : Bf16ToF32(args.a_bf16[row * args.lda + kk]);
    };
    if (b.precision != Precision::kHigh) return F32ToBf16(element(e)).bits;
    const int64_t p = e / 2, q = p / 3, role = p % 3;
    bf16 hi, lo, cross;
    matmul_internal::SplitBf16(element(2 * q + e % 2), &hi, &lo, &cross);
    return (role == 0 ? hi : role == 1 ? cross : lo).bits;
  }
  void PackA(int64_t i0, int64_t rows, int64_t p0, int64_t np, uint32_t* dst) const {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t p = 0; p < np; ++p) {
        const int64_t e = 2 * (p0 + p);
        dst[r * matmul_internal::bf16_kernel::kAStride + p] = Piece(i0 + r, e) | (uint32_t{Piece(i0 + r, e + 1)} << 16);
      }
    }
  }
  void PrefetchRow(int64_t, int64_t, int64_t) const {}
};

// The same A, C handed over by StoreTile (the conv's path): each element
// must arrive exactly once, in tiles of at most 16 rows.
struct TileSinkSource {
  static constexpr bool kWritesC = false;
  ScalarSource inner;
  float* c;
  int64_t ldc;
  std::vector<int>* writes;
  int* bad_tiles;

  void PackA(int64_t i0, int64_t rows, int64_t p0, int64_t np, uint32_t* dst) const {
    inner.PackA(i0, rows, p0, np, dst);
  }
  void PrefetchRow(int64_t, int64_t, int64_t) const {}
  void StoreTile(const float* tile, int64_t row, int64_t rows, int64_t col, int64_t cols) const {
    if (rows < 1 || rows > 16 || cols < 1 || cols > 32) ++*bad_tiles;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < cols; ++j) {
        c[(row + r) * ldc + col + j] = tile[r * 32 + j] + (inner.bias != nullptr ? inner.bias[col + j] : 0.0f);
        ++(*writes)[(row + r) * ldc + col + j];
      }
    }
  }
};

// A problem with B packed for the driver (kHighway's pair panels).
struct Problem : MatmulProblem {
  PackedMatrix packed;
};

Problem MakeProblem(int64_t m, int64_t n, int64_t k, Precision q, bool bf16_a, bool bias, uint32_t seed) {
  Problem p{MakeMatmulProblem(m, n, k, q, bf16_a, bias, seed), PackedMatrix()};
  StatusOr<PackedMatrix> packed = PackedMatrix::Pack(k, n, p.b.data(), n, {q, Provider::kHighway});
  EXPECT_TRUE(packed.ok()) << packed.status().ToString();
  if (packed.ok()) p.packed = std::move(*packed);
  return p;
}

constexpr auto Name = MatmulProblemName;

CallArgs Args(const Problem& p, float* c) {
  CallArgs args;
  args.a_f32 = p.bf16_a ? nullptr : p.a.data();
  args.a_bf16 = p.bf16_a ? p.a16.data() : nullptr;
  args.lda = p.k;
  args.b = p.packed.internal_data();
  args.c = c;
  args.ldc = p.n;
  args.bias = p.bias ? p.bias_v.data() : nullptr;
  return args;
}

struct Buffers {
  matmul_internal::AlignedArray<uint32_t> a0, a1;
  matmul_internal::AlignedArray<float> partial;
  AmxScratch scratch;
  Buffers() {
    a0 = matmul_internal::AllocateAligned<uint32_t>(static_cast<size_t>(ae::kMc * ae::kAStride));
    a1 = matmul_internal::AllocateAligned<uint32_t>(static_cast<size_t>(ae::kMc * ae::kAStride));
    partial = matmul_internal::AllocateAligned<float>(static_cast<size_t>(ae::kMc * ae::kNc));
    scratch.a_blocks[0] = a0.get();
    scratch.a_blocks[1] = a1.get();
    scratch.partial = partial.get();
  }
};

std::vector<float> Model(const Problem& p) {
  std::vector<float> c(static_cast<size_t>(p.m * p.n));
  matmul_internal::AmxModelKernel(Args(p, c.data()), p.m, p.n, AmxScratch{});
  return c;
}

// The driver over C split into row blocks of `rows` (a multiple of 32) and
// column blocks of `cols` (a multiple of 32), as the matmul frame's tasks.
std::vector<float> Driver(const Problem& p, Buffers& buf, int64_t rows, int64_t cols) {
  std::vector<float> c(static_cast<size_t>(p.m * p.n), std::numeric_limits<float>::quiet_NaN());
  const CallArgs args = Args(p, c.data());
  const ScalarSource src{args, c.data(), p.n, args.bias};
  for (int64_t i0 = 0; i0 < p.m; i0 += rows) {
    for (int64_t j0 = 0; j0 < p.n; j0 += cols) {
      ae::AmxDriver(src, *args.b, i0, std::min(p.m, i0 + rows), j0, std::min(p.n, j0 + cols), buf.scratch);
    }
  }
  return c;
}

int BitDifferences(const std::vector<float>& x, const std::vector<float>& y, std::string* first) {
  int count = 0;
  for (size_t e = 0; e < x.size(); ++e) {
    if (std::memcmp(&x[e], &y[e], 4) != 0) {
      if (count++ == 0) *first = "element " + std::to_string(e) + ": " + std::to_string(x[e]) + " vs " + std::to_string(y[e]);
    }
  }
  return count;
}

std::vector<Problem> Problems() {
  std::vector<Problem> v;
  uint32_t seed = 11;
  for (Precision q : {Precision::kDefault, Precision::kHigh}) {
    for (int64_t s : {1, 15, 16, 17, 31, 33, 100, 257}) {
      v.push_back(MakeProblem(s, 33, 31, q, false, false, seed));
      v.push_back(MakeProblem(17, s, 37, q, seed % 2 == 0, true, seed + 1));
      v.push_back(MakeProblem(15, 17, s, q, false, seed % 3 == 0, seed + 2));
      seed += 3;
    }
    // Several K blocks with a tail; rows over one A block (128) with a
    // partial micro-tile; columns over one column block (1024).
    v.push_back(MakeProblem(33, 65, 1031, q, true, true, seed++));
    v.push_back(MakeProblem(161, 47, 530, q, false, false, seed++));
    v.push_back(MakeProblem(40, 1057, 64, q, false, true, seed++));
  }
  return v;
}

TEST(AmxEmulatedDriverTest, GivesTheModelsBitsOnOddShapes) {
  Buffers buf;
  for (const Problem& p : Problems()) {
    emu::faults = 0;
    const int configurations = emu::configurations;
    const std::vector<float> got = Driver(p, buf, p.m, p.n);
    EXPECT_EQ(emu::faults, 0) << Name(p);
    EXPECT_FALSE(emu::configured) << Name(p) << ": the tile configuration was not released";
    EXPECT_EQ(emu::configurations, configurations + 1) << Name(p) << ": one configuration per driver call";
    std::string first;
    EXPECT_EQ(BitDifferences(got, Model(p), &first), 0) << Name(p) << ": " << first;
  }
}

TEST(AmxEmulatedDriverTest, EverySplitOfCGivesTheSameBits) {
  Buffers buf;
  // Two K blocks, a column block and a bit, a row block and a bit.
  const Problem p = MakeProblem(161, 1057, 530, Precision::kDefault, false, true, 99);
  emu::faults = 0;
  const std::vector<float> whole = Driver(p, buf, p.m, p.n);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{32, 64}, {96, 1024}, {160, 96}}) {
    std::string first;
    EXPECT_EQ(BitDifferences(Driver(p, buf, rows, cols), whole, &first), 0)
        << Name(p) << " in blocks of " << rows << " x " << cols << ": " << first;
  }
  EXPECT_EQ(emu::faults, 0);
}

TEST(AmxEmulatedDriverTest, StoreTileGetsEveryElementOnceInTilesOfAtMost16Rows) {
  Buffers buf;
  const Problem problems[] = {MakeProblem(161, 70, 530, Precision::kDefault, false, true, 3),
                             MakeProblem(17, 33, 37, Precision::kDefault, false, false, 4),
                             MakeProblem(1, 1, 1, Precision::kDefault, false, false, 5)};
  for (const Problem& p : problems) {
    std::vector<float> c(static_cast<size_t>(p.m * p.n), std::numeric_limits<float>::quiet_NaN());
    std::vector<int> writes(c.size(), 0);
    int bad_tiles = 0;
    const CallArgs args = Args(p, c.data());
    const TileSinkSource src{ScalarSource{args, c.data(), p.n, args.bias}, c.data(), p.n, &writes, &bad_tiles};
    emu::faults = 0;
    ae::AmxDriver(src, *args.b, 0, p.m, 0, p.n, buf.scratch);
    EXPECT_EQ(emu::faults, 0) << Name(p);
    EXPECT_EQ(bad_tiles, 0) << Name(p);
    for (size_t e = 0; e < writes.size(); ++e) ASSERT_EQ(writes[e], 1) << Name(p) << " element " << e;
    std::string first;
    EXPECT_EQ(BitDifferences(c, Model(p), &first), 0) << Name(p) << ": " << first;
  }
}

// The real A packing (PackMatmulA, AVX512-BF16) under the emulated driver:
// the same bits as the scalar packing above.
TEST(AmxEmulatedDriverTest, TheMatmulsOwnPackingGivesTheSameBits) {
  if (!Avx512Bf16Active()) GTEST_SKIP() << "AVX512-BF16 (the A packing) not active here";
  Buffers buf;
  const Problem problems[] = {MakeProblem(100, 257, 257, Precision::kDefault, true, true, 21),
                             MakeProblem(33, 65, 1031, Precision::kHigh, false, false, 22),
                             MakeProblem(17, 33, 37, Precision::kHigh, true, true, 23)};
  for (const Problem& p : problems) {
    std::vector<float> c(static_cast<size_t>(p.m * p.n), std::numeric_limits<float>::quiet_NaN());
    const CallArgs args = Args(p, c.data());
    ae::AmxDriver(matmul_internal::bf16_kernel::MatmulSource{args, c.data(), p.n, args.bias}, *args.b, 0, p.m, 0,
                  p.n, buf.scratch);
    std::string first;
    EXPECT_EQ(BitDifferences(c, Model(p), &first), 0) << Name(p) << ": " << first;
  }
}

}  // namespace
}  // namespace tpumesh::kernels
