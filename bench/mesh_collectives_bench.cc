// Host bandwidth of all_gather and psum over 8 emulated devices, 1 MB to
// 256 MB, printed beside the modelled time of the same collective on a v5e
// 2x4 slice; in one process, or with the mesh spread over MPI ranks
// (docs/cluster.md):
//
//   ./build/release/bench/mesh_collectives_bench --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true   (one command line)
//   mpirun -np 2 ./build/release/bench/mesh_collectives_bench --benchmark_filter=Psum
//       (as root: mpirun --allow-run-as-root; 2 cores: --oversubscribe)
//
// Sizes are the array size each device ends with: all_gather's output
// (each device contributes 1/8 of it), psum's input and output.
//   BM_AllGather, BM_Psum   data=8, over `data`: with R ranks every group
//                           spans them all (cross-rank)
//   BM_PsumModel4           data=2,model=4, over `model`: groups of 4 that
//                           stay inside a rank with 1 or 2 ranks (in-rank)
// Counters:
//   host_GBps     array bytes / host wall time of one pmap running the collective
//   modelled_us   the interconnect model's time on the emulated v5e slice
//   ranks         the processes the mesh spans
// Every benchmark runs one untimed warm-up and a fixed number of iterations
// (under mpirun the ranks must run the same pmaps); rank 0 reports.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "mesh/cluster.h"
#include "mesh/collectives.h"
#include "mesh/mesh.h"

namespace tpumesh::mesh {
namespace {

Cluster* g_cluster = nullptr;

void Run(benchmark::State& state, CollectiveKind kind, const std::vector<MeshAxis>& mesh_axes,
         const AxisNames& axes) {
  const int64_t bytes = state.range(0) << 20;
  MeshOptions options;
  options.cluster = g_cluster;
  auto mesh = std::move(Mesh::Create(V5eChip(), {2, 4}, mesh_axes, options)).value();
  const int n = mesh->num_devices();
  const std::vector<int> group = *mesh->Group(0, axes);
  const int64_t per_device = kind == CollectiveKind::kAllGather ? bytes / static_cast<int64_t>(group.size()) : bytes;
  DistributedArray in;
  in.shards.resize(n);
  for (int d = mesh->first_local(); d < mesh->first_local() + mesh->num_local(); ++d) {
    Array a = std::move(Array::Allocate(mesh->device(d), DType::kF32, {per_device / 4})).value();
    float* p = a.mutable_data<float>();
    for (int64_t i = 0; i < per_device / 4; ++i) p[i] = static_cast<float>(i % 97);
    in.shards[d] = a;
  }
  auto body = [&](DeviceContext& ctx, std::span<const Array> args) -> StatusOr<std::vector<Array>> {
    StatusOr<Array> r = kind == CollectiveKind::kAllGather ? ctx.AllGather(args[0], axes, 0, true)
                                                          : ctx.Psum(args[0], axes);
    if (!r.ok()) return r.status();
    return std::vector<Array>{};
  };
  // One untimed run: first-touch page faults of the outputs (and, across
  // ranks, of the receive buffers) are not the collective's cost.
  if (auto warm = mesh->Pmap(body, std::span<const DistributedArray>(&in, 1)); !warm.ok()) g_cluster->Fail(warm.status());
  for (auto _ : state) {
    auto out = mesh->Pmap(body, std::span<const DistributedArray>(&in, 1));
    if (!out.ok()) g_cluster->Fail(out.status());  // never leave the other ranks waiting
  }
  const double modelled = ModelCollective(mesh->chip(), mesh->topology(), kind, group, per_device).seconds;
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["MB"] = static_cast<double>(bytes >> 20);
  state.counters["ranks"] = g_cluster->size();
  state.counters["host_GBps"] = benchmark::Counter(static_cast<double>(bytes) / 1e9,
                                                   benchmark::Counter::kIsIterationInvariantRate);
  state.counters["modelled_us"] = modelled * 1e6;
  state.counters["modelled_GBps"] = static_cast<double>(bytes) / modelled / 1e9;
}

const std::vector<MeshAxis> kData8 = {{"data", 8}};
const std::vector<MeshAxis> kData2Model4 = {{"data", 2}, {"model", 4}};

void BM_AllGather(benchmark::State& state) { Run(state, CollectiveKind::kAllGather, kData8, {"data"}); }
void BM_Psum(benchmark::State& state) { Run(state, CollectiveKind::kPsum, kData8, {"data"}); }
void BM_PsumModel4(benchmark::State& state) { Run(state, CollectiveKind::kPsum, kData2Model4, {"model"}); }

// Reports nothing: ranks other than 0 under mpirun.
class Silent : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace
}  // namespace tpumesh::mesh

int main(int argc, char** argv) {
  using namespace tpumesh::mesh;
  benchmark::Initialize(&argc, argv);
  auto cluster = ConnectCluster();
  if (!cluster.ok()) {
    std::fprintf(stderr, "mesh_collectives_bench: %s\n", cluster.status().ToString().c_str());
    return 1;
  }
  g_cluster = *cluster;
  for (auto [name, fn] : {std::pair{"BM_AllGather", &BM_AllGather}, std::pair{"BM_Psum", &BM_Psum},
                          std::pair{"BM_PsumModel4", &BM_PsumModel4}}) {
    for (int mb = 1; mb <= 256; mb *= 4) {
      // A fixed iteration count: every rank must run the same pmaps (an
      // adaptive count would differ), and one process runs the same.
      benchmark::RegisterBenchmark(name, fn)->ArgName("MB")->Arg(mb)->Unit(benchmark::kMillisecond)->UseRealTime()
          ->Iterations(std::max(3, 64 / mb));
    }
  }
  if (g_cluster->rank() == 0) {
    std::printf("mesh over %d rank(s), %s\n", g_cluster->size(), g_cluster->transport().c_str());
    benchmark::RunSpecifiedBenchmarks();
  } else {
    Silent silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  return 0;
}
