// One UNet2DConditionModel forward on this host, as docs/models.md reports
// it: the plan-time packing of every weight (WeightPacks, what a model's
// first Forward does), a first call, then steady-state calls, their median, the matmul GFLOP/s (models/flops.h) and
// the share of the host's peak for the instruction the matmul provider runs
// (vdpbf16ps for kBf16, f32 FMAs otherwise; measured here with
// kernels/peak.h), and of the fixed 434 GFLOP/s of the design notes'
// TOOLCHAIN.md (2 Zen 4 cores).
// Inputs are N(0, 1) (seed 0); timestep 981. A plain program, not a
// pass/fail test.
//
//   tpumesh init --arch sd15 --dtype bf16 -o sd15.h5
//   models_unet_bench sd15.h5 [runs=3] [batch=2] [latent=64] [default|highest] [threads=0] [shapes]
//
// `shapes` adds the last call's time per layer and shape, the costliest
// first.
//
// threads 0 runs in the default TBB arena (every core), as one emulated
// device owning the host.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "io/model_file.h"
#include "kernels/matmul.h"
#include "kernels/peak.h"
#include "mesh/cost_model.h"
#include "models/flops.h"
#include "models/unet.h"
#include "pipeline/loader.h"

namespace {

using namespace tpumesh;

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

mesh::Array Normal(mesh::Shape shape, std::mt19937& rng) {
  mesh::Array a = mesh::Array::Host(mesh::DType::kF32, std::move(shape));
  std::normal_distribution<float> n01;
  float* p = a.mutable_data<float>();
  for (int64_t i = 0; i < a.num_elements(); ++i) p[i] = n01(rng);
  return a;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "models_unet_bench: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.h5 [runs=3] [batch=2] [latent=64] [default|highest] [threads=0] [shapes]\n",
                 argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int runs = argc > 2 ? std::atoi(argv[2]) : 3;
  const int64_t batch = argc > 3 ? std::atoll(argv[3]) : 2;
  const int64_t latent = argc > 4 ? std::atoll(argv[4]) : 64;
  auto precision = models::ParsePrecision(argc > 5 ? argv[5] : "default");
  if (!precision.ok()) return Fail(precision.status());
  const int threads = argc > 6 ? std::atoi(argv[6]) : 0;
  const bool by_shape = argc > 7 && std::string(argv[7]) == "shapes";

  auto t0 = std::chrono::steady_clock::now();
  auto file = pipeline::ModelFile::Open(path);
  if (!file.ok()) return Fail(file.status());
  auto unet = pipeline::LoadUNet(**file);
  if (!unet.ok()) return Fail(unet.status());
  const double load_s = Seconds(t0);
  const models::UNetConfig& c = unet->config();

  std::mt19937 rng(0);
  const mesh::Array sample = Normal({batch, c.in_channels, latent, latent}, rng);
  const mesh::Array ehs = Normal({batch, 77, c.cross_attention_dim[0]}, rng);
  const std::vector<float> t(batch, 981.0f);
  models::Ctx ctx{nullptr, *precision};
  ctx.threads = threads;

  // The plan-time packing on its own (what the first Forward would do).
  t0 = std::chrono::steady_clock::now();
  if (Status st = unet->params().PackMatmulWeights(ctx.WithPacks(unet->params().packs())); !st.ok()) return Fail(st);
  const double pack_s = Seconds(t0);

  std::vector<double> times;
  std::vector<mesh::OpRecord> ops;  // of the last call
  for (int r = 0; r <= runs; ++r) {  // call 0: first touches of the scratch
    ops.clear();
    ctx.ops = r == runs ? &ops : nullptr;
    t0 = std::chrono::steady_clock::now();
    auto y = unet->Forward(ctx, sample, t, ehs);
    if (!y.ok()) return Fail(y.status());
    times.push_back(Seconds(t0));
  }
  std::vector<double> steady(times.begin() + 1, times.end());
  std::sort(steady.begin(), steady.end());
  const double median = steady.empty() ? times[0] : steady[steady.size() / 2];
  const models::MatmulFlops f = models::UNetMatmulFlops(c, batch, latent, latent, 77);
  const double rate = f.total() / median;
  // Against the host's best peak over every active path, on the step's threads.
  auto peak = kernels::MeasureBestPeak(threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()));

  std::printf("unet %s: batch %lld, %lldx%lld latents, precision %s, threads %d (0: all)\n", path.c_str(),
              static_cast<long long>(batch), static_cast<long long>(latent), static_cast<long long>(latent),
              argc > 5 ? argv[5] : "default", threads);
  std::printf("load %.2f s; packing every weight once %.2f s (%.2f GB packed); first call after it %.3f s\n", load_s,
              pack_s, unet->params().packs()->bytes() / 1e9, times[0]);
  std::printf("steady calls:");
  for (size_t i = 1; i < times.size(); ++i) std::printf(" %.3f", times[i]);
  std::printf(" s; median %.3f s\n", median);
  std::printf("matmul flops %.1f GFLOP (conv %.1f, linear %.1f, attention %.1f): %.1f GFLOP/s",
              f.total() / 1e9, f.conv / 1e9, f.linear / 1e9, f.attention / 1e9, rate / 1e9);
  if (peak.ok())
    std::printf(" = %.1f%% of the host's best peak, %.0f GFLOP/s (%s, measured now)", 100 * rate / peak->flops,
                peak->flops / 1e9, std::string(kernels::CpuPathName(peak->path)).c_str());
  std::printf("\n");
  // Where the last call's time went, by op type (Ctx::ops' host times).
  struct Sum {
    int count = 0;
    double seconds = 0, mxu_flops = 0;
  };
  std::map<std::string, Sum> by_type;
  for (const mesh::OpRecord& op : ops) {
    Sum& s = by_type[op.type];
    ++s.count;
    s.seconds += op.host_seconds;
    for (const mesh::MxuMatmul& m : op.mxu) s.mxu_flops += 2.0 * m.m * m.n * m.k * m.count;
  }
  std::printf("last call by op type: %-12s %6s %9s %9s\n", "type", "ops", "seconds", "GFLOP/s");
  for (const auto& [type, s] : by_type)
    std::printf("                      %-12s %6d %9.3f %9.1f\n", type.c_str(), s.count, s.seconds,
                s.mxu_flops > 0 ? s.mxu_flops / s.seconds / 1e9 : 0.0);
  if (by_shape) {  // the same ops grouped by layer and shape, the costliest first
    std::map<std::string, Sum> groups;
    for (const mesh::OpRecord& op : ops) {
      Sum& s = groups[op.name + " " + op.shape];
      ++s.count;
      s.seconds += op.host_seconds;
      for (const mesh::MxuMatmul& m : op.mxu) s.mxu_flops += 2.0 * m.m * m.n * m.k * m.count;
    }
    std::vector<std::pair<std::string, Sum>> sorted(groups.begin(), groups.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    std::printf("last call by layer and shape: %6s %9s %9s  %s\n", "ops", "seconds", "GFLOP/s", "layer shape");
    for (const auto& [what, s] : sorted)
      std::printf("                              %6d %9.3f %9.1f  %s\n", s.count, s.seconds,
                  s.mxu_flops > 0 ? s.mxu_flops / s.seconds / 1e9 : 0.0, what.c_str());
  }
  return 0;
}
