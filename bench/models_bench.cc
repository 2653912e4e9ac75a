// One forward of a model component on this host, as docs/models.md reports
// it: the plan-time packing of its weights (WeightPacks, what a model's
// first call does), a first call, then steady-state calls, their median, the
// matmul GFLOP/s (models/flops.h) and the share of the host's best peak over
// the active SIMD paths (kernels/peak.h, probed on the same threads before
// and after the calls, the higher taken; a warning when they differ > 10%).
// A plain program, not a pass/fail test.
//
//   tpumesh init --arch sd15 --dtype bf16 -o sd15.h5
//   models_bench sd15.h5 unet [runs=3] [batch=2] [latent=64] [default|highest] [threads=0] [shapes]
//   models_bench sd15.h5 vae-decode 3 1 64      # latents 64x64 -> one 512x512 image
//   models_bench sd15.h5 text 3 2               # CLIP text encoder, 2 prompts of 77 tokens
//
// Components: unet (UNet2DConditionModel on N(0, 1) latents and text states,
// timestep 981; batch 2 = one CFG step), vae-decode (AutoencoderKL.decode of
// N(0, 1) latents), text (the first text encoder on token ids 0..76). Inputs
// from seed 0. `shapes` adds the last call's time per layer and shape, the
// costliest first. threads 0 runs in the default TBB arena (every core), as
// one emulated device owning the host.
#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
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
#include "models/clip.h"
#include "models/unet.h"
#include "models/vae.h"
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
  std::fprintf(stderr, "models_bench: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  tpumesh::mesh::BoundHostHeap();
  const std::string usage = std::string("usage: ") + argv[0] +
                            " MODEL.h5 unet|vae-decode|text [runs=3] [batch=2] [latent=64] [default|highest]"
                            " [threads=0] [shapes]\n";
  if (argc < 3) {
    std::fputs(usage.c_str(), stderr);
    return 2;
  }
  const std::string path = argv[1], component = argv[2];
  const int runs = argc > 3 ? std::atoi(argv[3]) : 3;
  const int64_t batch = argc > 4 ? std::atoll(argv[4]) : 2;
  const int64_t latent = argc > 5 ? std::atoll(argv[5]) : 64;
  auto precision = models::ParsePrecision(argc > 6 ? argv[6] : "default");
  if (!precision.ok()) return Fail(precision.status());
  const int threads = argc > 7 ? std::atoi(argv[7]) : 0;
  const bool by_shape = argc > 8 && std::string(argv[8]) == "shapes";
  if (runs < 1 || batch < 1 || latent < 1) {
    std::fputs(usage.c_str(), stderr);
    return 2;
  }

  auto t0 = std::chrono::steady_clock::now();
  auto file = pipeline::ModelFile::Open(path);
  if (!file.ok()) return Fail(file.status());
  std::mt19937 rng(0);
  models::Ctx ctx{nullptr, *precision};
  ctx.threads = threads;
  // The component: its parameters, one call, and the FLOPs of that call.
  const models::ParamMap* params = nullptr;
  std::function<StatusOr<mesh::Array>(const models::Ctx&)> call;
  models::MatmulFlops f;
  std::string inputs;
  std::optional<models::UNetModel> unet;
  std::optional<models::VaeModel> vae;
  std::optional<models::ClipTextModel> text;
  mesh::Array x, ehs;
  std::vector<float> t;
  if (component == "unet") {
    auto m = pipeline::LoadUNet(**file);
    if (!m.ok()) return Fail(m.status());
    unet.emplace(std::move(*m));
    const models::UNetConfig& c = unet->config();
    x = Normal({batch, c.in_channels, latent, latent}, rng);
    ehs = Normal({batch, 77, c.cross_attention_dim[0]}, rng);
    t.assign(static_cast<size_t>(batch), 981.0f);
    params = &unet->params();
    call = [&](const models::Ctx& cx) { return unet->Forward(cx, x, t, ehs); };
    f = models::UNetMatmulFlops(c, batch, latent, latent, 77);
    inputs = std::to_string(latent) + "x" + std::to_string(latent) + " latents, 77 text tokens";
  } else if (component == "vae-decode") {
    auto m = pipeline::LoadVae(**file);
    if (!m.ok()) return Fail(m.status());
    vae.emplace(std::move(*m));
    const models::VaeConfig& c = vae->config();
    x = Normal({batch, c.latent_channels, latent, latent}, rng);
    params = &vae->params();
    call = [&](const models::Ctx& cx) { return vae->Decode(cx, x); };
    f = models::VaeDecoderMatmulFlops(c, batch, latent, latent);
    inputs = std::to_string(latent) + "x" + std::to_string(latent) + " latents";
  } else if (component == "text") {
    auto m = pipeline::LoadTextEncoder(**file);
    if (!m.ok()) return Fail(m.status());
    text.emplace(std::move(*m));
    x = mesh::Array::Host(mesh::DType::kI32, {batch, 77});
    int32_t* ids = x.mutable_data<int32_t>();
    for (int64_t i = 0; i < x.num_elements(); ++i) ids[i] = static_cast<int32_t>(i % 77);
    params = &text->params();
    call = [&](const models::Ctx& cx) { return text->Forward(cx, x); };
    f = models::ClipTextMatmulFlops(text->config(), batch, 77);
    inputs = "77 token ids";
  } else {
    std::fputs(usage.c_str(), stderr);
    return 2;
  }
  const double load_s = Seconds(t0);

  // The plan-time packing on its own, where it is what the first call would
  // do: the UNet packs every weight. The VAE decoder and the text encoder
  // pack a subset (not the encoder half, not the embeddings): their first
  // call packs it.
  double pack_s = -1;
  if (component == "unet") {
    t0 = std::chrono::steady_clock::now();
    if (Status st = params->PackMatmulWeights(ctx.WithPacks(params->packs())); !st.ok()) return Fail(st);
    pack_s = Seconds(t0);
  }

  // The host's best peak over every active path, on the step's threads,
  // probed before and after the calls: the higher is the reference, and a
  // move of more than 10% between the two (a shared or throttled host) is
  // reported.
  const int probe_threads = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
  auto peak_before = kernels::MeasureBestPeak(probe_threads);
  std::vector<double> times;
  std::vector<mesh::OpRecord> ops;  // of the last call
  for (int r = 0; r <= runs; ++r) {  // call 0: first touches of the scratch
    ops.clear();
    ctx.ops = r == runs ? &ops : nullptr;
    t0 = std::chrono::steady_clock::now();
    auto y = call(ctx.WithPacks(params->packs()));
    if (!y.ok()) return Fail(y.status());
    times.push_back(Seconds(t0));
  }
  std::vector<double> steady(times.begin() + 1, times.end());
  std::sort(steady.begin(), steady.end());
  const double median = steady.empty() ? times[0] : steady[steady.size() / 2];
  const double rate = f.total() / median;
  auto peak = kernels::MeasureBestPeak(probe_threads);
  kernels::PeakProbes probes;
  if (peak.ok() && peak_before.ok()) {
    probes = {*peak_before, *peak};
    *peak = probes.higher();
  }

  std::printf("%s %s: batch %lld, %s, precision %s, threads %d (0: all)\n", component.c_str(), path.c_str(),
              static_cast<long long>(batch), inputs.c_str(), argc > 6 ? argv[6] : "default", threads);
  if (pack_s >= 0) {
    std::printf("load %.2f s; packing every weight once %.2f s (%.2f GB packed); first call after it %.3f s\n",
                load_s, pack_s, params->packs()->bytes() / 1e9, times[0]);
  } else {
    std::printf("load %.2f s; first call, packing the weights it uses (%.2f GB packed), %.3f s\n", load_s,
                params->packs()->bytes() / 1e9, times[0]);
  }
  std::printf("steady calls:");
  for (size_t i = 1; i < times.size(); ++i) std::printf(" %.3f", times[i]);
  std::printf(" s; median %.3f s\n", median);
  std::printf("matmul flops %.1f GFLOP (conv %.1f, linear %.1f, attention %.1f): %.1f GFLOP/s",
              f.total() / 1e9, f.conv / 1e9, f.linear / 1e9, f.attention / 1e9, rate / 1e9);
  if (peak.ok())
    std::printf(" = %.1f%% of the host's best peak, %.0f GFLOP/s (%s, measured before and after)",
                100 * rate / peak->flops, peak->flops / 1e9, std::string(kernels::CpuPathName(peak->path)).c_str());
  std::printf("\n");
  if (probes.apart()) std::printf("%s\n", probes.Warning().c_str());
  // Where the last call's time went (Ctx::ops' host times), grouped by a key.
  struct Sum {
    int count = 0;
    double seconds = 0, mxu_flops = 0;
    double gflops() const { return mxu_flops > 0 ? mxu_flops / seconds / 1e9 : 0.0; }
  };
  auto group = [&](const std::function<std::string(const mesh::OpRecord&)>& key) {
    std::map<std::string, Sum> sums;
    for (const mesh::OpRecord& op : ops) {
      Sum& s = sums[key(op)];
      ++s.count;
      s.seconds += op.host_seconds;
      for (const mesh::MxuMatmul& m : op.mxu) s.mxu_flops += 2.0 * m.m * m.n * m.k * m.count;
    }
    return sums;
  };
  const std::map<std::string, Sum> by_type = group([](const mesh::OpRecord& op) { return op.type; });
  std::printf("last call by op type: %-12s %6s %9s %9s\n", "type", "ops", "seconds", "GFLOP/s");
  for (const auto& [type, s] : by_type)
    std::printf("                      %-12s %6d %9.3f %9.1f\n", type.c_str(), s.count, s.seconds, s.gflops());
  if (by_shape) {  // by layer and shape, the costliest first
    const std::map<std::string, Sum> groups = group([](const mesh::OpRecord& op) { return op.name + " " + op.shape; });
    std::vector<std::pair<std::string, Sum>> sorted(groups.begin(), groups.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    std::printf("last call by layer and shape: %6s %9s %9s  %s\n", "ops", "seconds", "GFLOP/s", "layer shape");
    for (const auto& [what, s] : sorted)
      std::printf("                              %6d %9.3f %9.1f  %s\n", s.count, s.seconds, s.gflops(), what.c_str());
  }
  return 0;
}
