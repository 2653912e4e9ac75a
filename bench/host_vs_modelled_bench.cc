// Host wall time against modelled chip time, per op type, for the `tiny`
// architecture (init's seed-0 weights, 64x64 images) generating on 1 and 8
// emulated devices (10 steps, 8 images).
// A table for docs/cost-model.md; not a pass/fail test.
//
//   ./build/release/bench/host_vs_modelled_bench
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include "pipeline/generate.h"
#include "pipeline/init_model.h"

int main() {
  using namespace tpumesh;
  pipeline::InitOptions init;
  init.output = "/tmp/tpumesh-bench-tiny-" + std::to_string(getpid()) + ".h5";
  if (auto st = pipeline::InitModel(init); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.status().message().c_str());
    return 1;
  }
  struct Remove {
    std::string p;
    ~Remove() { std::remove(p.c_str()); }
  } remove{init.output};
  std::printf("%-8s %-12s %7s %12s %14s %10s\n", "devices", "op type", "count", "host s", "modelled s", "host/mod");
  for (int devices : {1, 8}) {
    pipeline::GeneratorOptions o;
    o.model = init.output;
    o.mesh.devices = devices;
    auto gen = pipeline::Generator::Open(o);
    if (!gen.ok()) {
      std::fprintf(stderr, "%s\n", gen.status().message().c_str());
      return 1;
    }
    pipeline::GenerateRequest r;
    r.prompts = {"a photograph of an astronaut riding a horse"};
    r.steps = 10;
    r.batch_per_device = 8 / devices;
    (void)(*gen)->Generate(r);  // the first call packs the weights
    auto res = (*gen)->Generate(r);
    if (!res.ok()) {
      std::fprintf(stderr, "%s\n", res.status().message().c_str());
      return 1;
    }
    // Summed over devices: the host ran them all on the same 2 cores.
    std::map<std::string, mesh::OpTypeTotals> sum;
    mesh::OpTypeTotals total;
    for (const auto& log : res->report.logs) {
      for (const auto& [type, t] : log.by_type()) {
        sum[type].count += t.count;
        sum[type].host_seconds += t.host_seconds;
        sum[type].modelled_seconds += t.modelled_seconds;
      }
    }
    for (auto& [type, t] : sum) {
      std::printf("%-8d %-12s %7lld %12.4f %14.6f %10.0f\n", devices, type.c_str(), static_cast<long long>(t.count),
                  t.host_seconds, t.modelled_seconds, t.modelled_seconds > 0 ? t.host_seconds / t.modelled_seconds : 0);
      total.count += t.count;
      total.host_seconds += t.host_seconds;
      total.modelled_seconds += t.modelled_seconds;
    }
    std::printf("%-8d %-12s %7lld %12.4f %14.6f %10.0f   (run: host wall %.3f s, modelled %.6f s)\n", devices,
                "total", static_cast<long long>(total.count), total.host_seconds, total.modelled_seconds,
                total.host_seconds / total.modelled_seconds, res->run_seconds, res->modelled_seconds);
  }
  return 0;
}
