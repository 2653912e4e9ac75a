// Host bandwidth of all_gather and psum over 8 emulated devices, 1 MB to
// 256 MB, printed beside the modelled time of the same collective on a v5e
// 2x4 slice.
//
//   ./build/release/bench/mesh_collectives_bench --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true   (one command line)
//
// Sizes are the array size each device ends with: all_gather's output
// (each device contributes 1/8 of it), psum's input and output. Counters:
//   host_GBps     array bytes / host wall time of one pmap running the collective
//   modelled_us   the interconnect model's time on the emulated v5e slice
//   host_over_modelled  host wall time / modelled time
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "mesh/collectives.h"
#include "mesh/mesh.h"

namespace tpumesh::mesh {
namespace {

void Run(benchmark::State& state, CollectiveKind kind) {
  const int64_t bytes = state.range(0) << 20;
  auto mesh = std::move(Mesh::Create(V5eChip(), {2, 4}, {{"data", 8}})).value();
  const int n = mesh->num_devices();
  const int64_t per_device = kind == CollectiveKind::kAllGather ? bytes / n : bytes;
  DistributedArray in;
  for (int d = 0; d < n; ++d) {
    Array a = std::move(Array::Allocate(mesh->device(d), DType::kF32, {per_device / 4})).value();
    float* p = a.mutable_data<float>();
    for (int64_t i = 0; i < per_device / 4; ++i) p[i] = static_cast<float>(i % 97);
    in.shards.push_back(a);
  }
  const AxisNames axes = {"data"};
  auto body = [&](DeviceContext& ctx, std::span<const Array> args) -> StatusOr<std::vector<Array>> {
    StatusOr<Array> r = kind == CollectiveKind::kAllGather ? ctx.AllGather(args[0], axes, 0, true)
                                                          : ctx.Psum(args[0], axes);
    if (!r.ok()) return r.status();
    return std::vector<Array>{};
  };
  for (auto _ : state) {
    auto out = mesh->Pmap(body, std::span<const DistributedArray>(&in, 1));
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
  }
  std::vector<int> group(n);
  for (int d = 0; d < n; ++d) group[d] = d;
  const double modelled = ModelCollective(mesh->chip(), mesh->topology(), kind, group, per_device).seconds;
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["MB"] = static_cast<double>(bytes >> 20);
  state.counters["host_GBps"] = benchmark::Counter(static_cast<double>(bytes) / 1e9,
                                                   benchmark::Counter::kIsIterationInvariantRate);
  state.counters["modelled_us"] = modelled * 1e6;
  state.counters["modelled_GBps"] = static_cast<double>(bytes) / modelled / 1e9;
}

void BM_AllGather(benchmark::State& state) { Run(state, CollectiveKind::kAllGather); }
void BM_Psum(benchmark::State& state) { Run(state, CollectiveKind::kPsum); }

BENCHMARK(BM_AllGather)->ArgName("MB")->RangeMultiplier(4)->Range(1, 256)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Psum)->ArgName("MB")->RangeMultiplier(4)->Range(1, 256)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tpumesh::mesh

BENCHMARK_MAIN();
