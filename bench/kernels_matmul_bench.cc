// Matmul throughput per provider, precision and thread count, on 2048^3 and
// the matmul shapes of Stable Diffusion 1.5 (M x N x K):
//   4096 x 320 x 2880    UNet 64x64 conv 3x3, 320 -> 320 channels (im2col)
//   4096 x 1280 x 320    UNet 64x64 GEGLU/FF projection, 320 -> 1280
//   1024 x 640 x 5760    UNet 32x32 conv 3x3, 640 -> 640 (K = 640 * 9)
//   256 x 1280 x 11520   UNet 16x16 conv 3x3, 1280 -> 1280 (K = 1280 * 9)
//   77 x 768 x 3072      CLIP text encoder MLP fc2
// B is packed once outside the timed loop (as a plan would); the time is one
// Matmul call. BM_Pack times that plan-time packing alone. Counters: FLOP/s (2MNK per second, a rate), and the cost
// model's time on a v5e (4 MXUs of 128x128 at 1.5 GHz) and MXU utilisation.
// BM_BlisSgemm is the f32 peer: BLIS's own multi-threaded sgemm, unwrapped.
// BM_Onednn (built where Debian's libdnnl-dev is installed) is the peer
// issue 31 names: oneDNN's matmul primitive with C in f32 and B reordered
// once into the layout the primitive picks (format_tag::any, as a plan
// packs), OpenMP threads as asked, in four forms: bf16 (A and B in bf16; A
// given already converted, oneDNN's best case), bf16_from_f32 (the same
// with A's f32 -> bf16 reorder in the timed loop: what our kDefault call
// does, f32 activations in), f32_as_bf16 (A and B f32 with
// fpmath_mode::bf16, which lets oneDNN compute in bf16) and f32.
//
//   build-kernels/bench/kernels_matmul_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true --benchmark_filter='bf16/default'
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "blis.h"
#ifdef TPUMESH_HAVE_DNNL
#include <omp.h>

#include "oneapi/dnnl/dnnl.hpp"
#endif
#include "kernels/matmul.h"
#include "kernels/matmul_cost.h"

namespace tpumesh::kernels {
namespace {

struct BenchShape {
  int64_t m, n, k;
};

const BenchShape kShapes[] = {
    {2048, 2048, 2048}, {4096, 320, 2880}, {4096, 1280, 320},
    {1024, 640, 5760},  {256, 1280, 11520}, {77, 768, 3072},
};

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

void BM_Matmul(benchmark::State& state, Provider provider, Precision precision, int threads) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const std::vector<float> a = Random(m * k, 1), b = Random(k * n, 2);
  std::vector<float> c(static_cast<size_t>(m * n));
  StatusOr<PackedMatrix> packed = PackedMatrix::Pack(k, n, b.data(), n, {precision, provider});
  if (!packed.ok()) {
    state.SkipWithError(packed.status().ToString().c_str());
    return;
  }
  for (auto _ : state) {
    const Status s = Matmul(m, a.data(), k, *packed, c.data(), n, threads);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(m) * n * k;
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  // The v5e's numbers (mesh::ChipSpec's v5e preset will feed these later).
  const MatmulCostFigures v5e = MatmulCost(m, n, k, precision, SystolicArray(128, 128, 4, 1.5e9));
  state.counters["v5e_us"] = v5e.seconds * 1e6;
  state.counters["v5e_util"] = v5e.utilisation;
}

// The f32 peer: BLIS 0.9's own sgemm on plain row-major A, B, C, threaded by
// BLIS itself (rntm with `threads` ways, its small-matrix "sup" path allowed),
// i.e. BLIS at its best, no packing outside the timed loop. The "f32 path >=
// BLIS sgemm" comparison is BM_Matmul/{blis,highway}/highest/tT against this.
void BM_BlisSgemm(benchmark::State& state, int threads) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  std::vector<float> a = Random(m * k, 1), b = Random(k * n, 2);
  std::vector<float> c(static_cast<size_t>(m * n));
  float alpha = 1.0f, beta = 0.0f;
  for (auto _ : state) {
    rntm_t rntm;
    bli_rntm_init(&rntm);
    bli_rntm_set_num_threads(threads, &rntm);
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, a.data(), k, 1, b.data(), n, 1,
                 &beta, c.data(), n, 1, nullptr, &rntm);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m) * n * k, benchmark::Counter::kIsIterationInvariantRate);
}

#ifdef TPUMESH_HAVE_DNNL
// oneDNN's matmul: A [M,K] and B [K,N] in `dt` (bf16 or f32), C f32;
// `fpmath_bf16`: f32 operands that oneDNN may round to bf16; `convert_a`:
// A's reorder from f32 runs in the timed loop.
void BM_Onednn(benchmark::State& state, dnnl::memory::data_type dt, bool fpmath_bf16, bool convert_a,
               int threads) {
  using dnnl::memory;
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  omp_set_num_threads(threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::vector<float> a = Random(m * k, 1), b = Random(k * n, 2);
  const memory::desc a_f32({m, k}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc b_f32({k, n}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc a_md({m, k}, dt, memory::format_tag::ab);
  const memory::desc b_any({k, n}, dt, memory::format_tag::any);
  const memory::desc c_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::primitive_attr attr;
  if (fpmath_bf16) attr.set_fpmath_mode(dnnl::fpmath_mode::bf16);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), attr, eng);
  memory a_src(a_f32, eng, a.data()), b_src(b_f32, eng, b.data());
  memory a_mem(a_md, eng), b_mem(pd.weights_desc(), eng), c_mem(c_md, eng);
  dnnl::reorder(a_src, a_mem).execute(strm, a_src, a_mem);
  dnnl::reorder(b_src, b_mem).execute(strm, b_src, b_mem);
  strm.wait();
  dnnl::matmul mm(pd);
  dnnl::reorder convert(a_src, a_mem);
  for (auto _ : state) {
    if (convert_a) convert.execute(strm, a_src, a_mem);
    mm.execute(strm, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
    strm.wait();
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m) * n * k, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(pd.impl_info_str());
}
#endif

// Plan time: packing B (K x N) once, per layout.
void BM_Pack(benchmark::State& state, Provider provider, Precision precision) {
  const int64_t n = state.range(1), k = state.range(2);
  const std::vector<float> b = Random(k * n, 2);
  for (auto _ : state) {
    StatusOr<PackedMatrix> packed = PackedMatrix::Pack(k, n, b.data(), n, {precision, provider});
    if (!packed.ok()) {
      state.SkipWithError(packed.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(packed->internal_data());
  }
  state.counters["B_elems/s"] =
      benchmark::Counter(static_cast<double>(k) * n, benchmark::Counter::kIsIterationInvariantRate);
}

void RegisterAll() {
  for (int threads : {1, 2}) {
    const std::string name = "BM_BlisSgemm/t" + std::to_string(threads);
    auto* bm = benchmark::RegisterBenchmark(name.c_str(), BM_BlisSgemm, threads);
    bm->ArgNames({"M", "N", "K"})->Unit(benchmark::kMillisecond)->UseRealTime();
    for (const BenchShape& s : kShapes) bm->Args({s.m, s.n, s.k});
  }
#ifdef TPUMESH_HAVE_DNNL
  struct OnednnForm {
    const char* name;
    dnnl::memory::data_type dt;
    bool fpmath_bf16, convert_a;
  };
  for (const OnednnForm& f : {OnednnForm{"bf16", dnnl::memory::data_type::bf16, false, false},
                              OnednnForm{"bf16_from_f32", dnnl::memory::data_type::bf16, false, true},
                              OnednnForm{"f32_as_bf16", dnnl::memory::data_type::f32, true, false},
                              OnednnForm{"f32", dnnl::memory::data_type::f32, false, false}}) {
    for (int threads : {1, 2}) {
      const std::string name = "BM_Onednn/" + std::string(f.name) + "/t" + std::to_string(threads);
      auto* bm = benchmark::RegisterBenchmark(name.c_str(), BM_Onednn, f.dt, f.fpmath_bf16, f.convert_a, threads);
      bm->ArgNames({"M", "N", "K"})->Unit(benchmark::kMillisecond)->UseRealTime();
      for (const BenchShape& s : kShapes) bm->Args({s.m, s.n, s.k});
    }
  }
#endif
  struct Config {
    Provider provider;
    Precision precision;
  };
  const Config configs[] = {
      {Provider::kBf16, Precision::kDefault},    {Provider::kHighway, Precision::kDefault},
      {Provider::kBlis, Precision::kDefault},    {Provider::kBf16, Precision::kHigh},
      {Provider::kHighway, Precision::kHighest}, {Provider::kBlis, Precision::kHighest},
  };
  for (const Config& cfg : configs) {
    if (cfg.provider == Provider::kBf16 && !Avx512Bf16Active()) continue;
    for (int threads : {1, 2}) {
      const std::string name = "BM_Matmul/" + std::string(ProviderName(cfg.provider)) + "/" +
                               std::string(PrecisionName(cfg.precision)) + "/t" +
                               std::to_string(threads);
      auto* bm = benchmark::RegisterBenchmark(name.c_str(), BM_Matmul, cfg.provider, cfg.precision,
                                              threads);
      bm->ArgNames({"M", "N", "K"})->Unit(benchmark::kMillisecond)->UseRealTime();
      for (const BenchShape& s : kShapes) bm->Args({s.m, s.n, s.k});
    }
    if (cfg.provider != Provider::kBf16 || cfg.precision == Precision::kHigh) {
      // kBf16 and kHighway share the pair layout at kDefault: one Pack entry.
      const std::string name = "BM_Pack/" + std::string(ProviderName(cfg.provider)) + "/" +
                               std::string(PrecisionName(cfg.precision));
      auto* bm = benchmark::RegisterBenchmark(name.c_str(), BM_Pack, cfg.provider, cfg.precision);
      bm->ArgNames({"M", "N", "K"})->Unit(benchmark::kMillisecond)->UseRealTime();
      for (const BenchShape& s : kShapes) bm->Args({s.m, s.n, s.k});
    }
  }
}

}  // namespace
}  // namespace tpumesh::kernels

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  tpumesh::kernels::RegisterAll();
  benchmark::AddCustomContext("highway_target", std::string(tpumesh::kernels::HighwayTargetName()));
  benchmark::AddCustomContext("avx512_bf16", tpumesh::kernels::Avx512Bf16Active() ? "yes" : "no");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
