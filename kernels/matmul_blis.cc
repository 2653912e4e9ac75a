// The kBlis matmul provider: BLIS sgemm through the typed expert API with a
// per-call rntm_t of one thread (the frame in matmul.cc runs blocks on TBB, so
// BLIS's OpenMP pool never competes with the device arenas). kDefault and
// kHigh multiply the bf16-rounded (and split) operands in f32, which is exact
// per product, so only the summation order differs from the MXU.
//
// BLIS's small/unpacked ("sup") path is disabled: it is chosen by the
// dimensions of each call, so blocks of different sizes could be summed in
// different orders and C would depend on the thread count.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "blis.h"
#include "kernels/matmul_internal.h"

namespace tpumesh::kernels::matmul_internal {
namespace {

// Row chunks of the expanded A: at most 16 MiB of scratch, at least 64 rows.
constexpr int64_t kScratchBytes = 16 << 20;

float LoadA(const CallArgs& args, int64_t i, int64_t k) {
  return args.a_f32 != nullptr ? args.a_f32[i * args.lda + k] : Bf16ToF32(args.a_bf16[i * args.lda + k]);
}

// A row expanded as the packed B' rows were (see matmul_internal.h).
void ExpandRow(const CallArgs& args, int64_t i, float* out) {
  const int64_t k = args.b->k;
  switch (args.b->precision) {
    case Precision::kDefault:
      for (int64_t kk = 0; kk < k; ++kk) out[kk] = RoundToBf16(LoadA(args, i, kk));
      break;
    case Precision::kHigh:
      for (int64_t kk = 0; kk < k; ++kk) {
        bf16 hi, lo, cross;
        SplitBf16(LoadA(args, i, kk), &hi, &lo, &cross);
        out[3 * kk] = Bf16ToF32(hi);
        out[3 * kk + 1] = Bf16ToF32(cross);
        out[3 * kk + 2] = Bf16ToF32(lo);
      }
      break;
    case Precision::kHighest:
      for (int64_t kk = 0; kk < k; ++kk) out[kk] = LoadA(args, i, kk);
      break;
  }
}

void Sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
           int64_t ldb, float* c, int64_t ldc) {
  float alpha = 1.0f, beta = 0.0f;
  rntm_t rntm;
  bli_rntm_init(&rntm);
  bli_rntm_set_num_threads(1, &rntm);
  bli_rntm_disable_l3_sup(&rntm);
  bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, const_cast<float*>(a), lda, 1,
               const_cast<float*>(b), ldb, 1, &beta, c, ldc, 1, nullptr, &rntm);
}

}  // namespace

DriverShape BlisDriverShape() { return {16, 4096}; }

void BlisBlock(const CallArgs& args, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  const PackedData& b = *args.b;
  const float* bb = b.floats.get() + j0;
  float* c = args.c + i0 * args.ldc + j0;
  const int64_t n = j1 - j0, k = b.k_rows;
  if (b.precision == Precision::kHighest && args.a_f32 != nullptr) {
    Sgemm(i1 - i0, n, k, args.a_f32 + i0 * args.lda, args.lda, bb, b.n, c, args.ldc);
    if (args.bias != nullptr) AddBiasTile(c, args.ldc, i1 - i0, n, args.bias + j0);
    return;
  }
  const int64_t chunk = std::max<int64_t>(64, kScratchBytes / (4 * k));
  float* a = ThreadScratch<float, kPackedASlot>(static_cast<size_t>(std::min(chunk, i1 - i0) * k));
  for (int64_t i = i0; i < i1; i += chunk) {
    const int64_t rows = std::min(chunk, i1 - i);
    for (int64_t r = 0; r < rows; ++r) ExpandRow(args, i + r, a + r * k);
    Sgemm(rows, n, k, a, k, bb, b.n, args.c + i * args.ldc + j0, args.ldc);
    if (args.bias != nullptr) AddBiasTile(args.c + i * args.ldc + j0, args.ldc, rows, n, args.bias + j0);
  }
}

}  // namespace tpumesh::kernels::matmul_internal

namespace tpumesh::kernels {

BlisConfig ClassifyBlisConfig(std::string_view name, CpuPath active) {
  BlisConfig c;
  c.name = std::string(name);
  struct Known {
    std::string_view name;
    CpuPath path;
  };
  static constexpr Known kKnown[] = {
      {"skx", CpuPath::kAvx512},           {"knl", CpuPath::kAvx512},
      {"haswell", CpuPath::kAvx2},         {"zen", CpuPath::kAvx2},
      {"zen2", CpuPath::kAvx2},            {"zen3", CpuPath::kAvx2},
      {"sandybridge", CpuPath::kBaseline}, {"penryn", CpuPath::kBaseline},
      {"excavator", CpuPath::kBaseline},   {"steamroller", CpuPath::kBaseline},
      {"piledriver", CpuPath::kBaseline},  {"bulldozer", CpuPath::kBaseline},
  };
  for (const Known& k : kKnown) {
    if (k.name != name) continue;
    c.optimized = true;
    c.path = k.path;
    c.note = std::string(CpuPathName(k.path)) + " kernels";
    // The vector width a path's FMAs have: avx512bf16 and amx are avx512's.
    const CpuPath width = std::min(active, CpuPath::kAvx512);
    if (k.path < width) c.note += ", below this process's " + std::string(CpuPathName(active)) + " path";
    return c;
  }
  c.note = "reference kernels: libblis has no configuration for this CPU";
  return c;
}

const BlisConfig& ProcessBlisConfig() {
  static const BlisConfig config = [] {
    bli_init();  // bli_arch_query_id answers only once BLIS is initialised
    return ClassifyBlisConfig(bli_arch_string(bli_arch_query_id()), ActiveCpuPath());
  }();
  return config;
}

}  // namespace tpumesh::kernels
