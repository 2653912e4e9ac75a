// Host speed of the Stable Diffusion ops (kernels/conv2d.h, norm.h,
// attention.h, activation.h) on SD1.5 shapes, with the cost model's figures
// for the same call printed beside the measurement.
//
//   ./build/release/bench/kernels_ops_bench --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true   (one command line)
//
// Shapes: the UNet's first down block at 512x512 (latent 64x64, 320
// channels): conv 3x3 320->320, group norm 32 groups (+ SiLU as ResnetBlock2D
// runs it), self-attention over 4096 tokens with 8 heads of 40, the GEGLU
// feed-forward's 4096 x 1280 GELU. Arg "threads" is the ops' num_threads.
// Counters:
//   FLOP/s       cost-model flops / host wall time (Conv2dCost etc.)
//   B/s          cost-model bytes read + written / host wall time
//   model_GFLOP  cost-model flops of one call
//   model_MB     cost-model bytes of one call
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/conv2d.h"
#include "kernels/cost.h"
#include "kernels/matmul.h"
#include "kernels/matmul_cost.h"
#include "kernels/norm.h"
#include "kernels/softmax.h"

namespace tpumesh::kernels {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

void Report(benchmark::State& state, const OpCost& c) {
  using benchmark::Counter;
  state.counters["FLOP/s"] =
      Counter(c.flops, Counter::kIsIterationInvariantRate);
  state.counters["B/s"] =
      Counter(c.bytes(), Counter::kIsIterationInvariantRate);
  state.counters["model_GFLOP"] = c.flops / 1e9;
  state.counters["model_MB"] = c.bytes() / 1e6;
}

template <class F>
void Loop(benchmark::State& state, F&& call) {
  for (auto _ : state) {
    const Status st = call();
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    benchmark::ClobberMemory();
  }
}

// Random x, w, bias and an output for a conv shape.
struct ConvBuffers {
  explicit ConvBuffers(const Conv2dShape& s)
      : x(Random(s.batch * s.in_channels * s.height * s.width, 1)),
        w(Random(s.out_channels * s.gemm_k(), 2)),
        b(Random(s.out_channels, 3)),
        y(s.batch * s.out_channels * s.out_height() * s.out_width()) {}
  std::vector<float> x, w, b, y;
};

void BM_Conv2d(benchmark::State& state) {
  const Conv2dShape s =
      MakeConv2dShape(1, state.range(0), state.range(1), state.range(1),
                      state.range(2), state.range(3), 1, state.range(3) / 2);
  const int threads = static_cast<int>(state.range(4));
  ConvBuffers d(s);
  Loop(state, [&] {
    return Conv2dF32(s, d.x.data(), d.w.data(), d.b.data(), d.y.data(), {},
                     threads);
  });
  Report(state, Conv2dCost(s));
}
BENCHMARK(BM_Conv2d)
    ->ArgNames({"C_in", "HW", "C_out", "k", "threads"})
    ->Args({320, 64, 320, 3, 1})
    ->Args({320, 64, 320, 3, 2})
    ->Args({320, 64, 320, 1, 1})
    ->Args({1280, 8, 1280, 3, 1})
    ->Args({1280, 8, 1280, 3, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Conv2dPacked: the weight packed once outside the loop (plan time), as the
// models run it. Arg "provider": 0 kAuto (at kDefault the AVX512-BF16
// implicit GEMM where vdpbf16ps outruns FMAs), 1 kHighway, 2 kBlis; "precision" 0 default,
// 2 highest. SD1.5 shapes: 64x64 3x3 320->320 (the oneDNN reference:
// 17.7 ms on 2 threads here), 64x64 1x1 320->320, 32x32 3x3 640->640, 16x16
// 3x3 1280->1280, 8x8 3x3 1280->1280, the 3x3 stride-2 downsample at 64x64.
// Counter v5e_us: the modelled time of the same conv on a v5e (one matmul
// [N Ho Wo, K] x [K, C_out] on 4 MXUs of 128x128 at 1.5 GHz).
void BM_Conv2dPacked(benchmark::State& state) {
  const int64_t stride = state.range(4);
  const Conv2dShape s =
      MakeConv2dShape(1, state.range(0), state.range(1), state.range(1),
                      state.range(2), state.range(3), stride,
                      state.range(3) / 2);
  const Provider provider = state.range(5) == 0   ? Provider::kAuto
                            : state.range(5) == 1 ? Provider::kHighway
                                                  : Provider::kBlis;
  const Precision precision =
      state.range(6) == 2 ? Precision::kHighest : Precision::kDefault;
  const int threads = static_cast<int>(state.range(7));
  ConvBuffers d(s);
  StatusOr<PackedConv2dWeight> packed = PackedConv2dWeight::Pack(
      s.out_channels, s.in_channels, s.kernel_h, s.kernel_w, d.w.data(),
      {precision, provider});
  if (!packed.ok()) {
    state.SkipWithError(packed.status().ToString().c_str());
    return;
  }
  Loop(state, [&] {
    return Conv2dPacked(s, d.x.data(), *packed, d.b.data(), d.y.data(),
                        threads);
  });
  Report(state, Conv2dCost(s));
  state.counters["v5e_us"] =
      MatmulCost(s.batch * s.out_height() * s.out_width(), s.out_channels,
                 s.gemm_k(), precision, SystolicArray(128, 128, 4, 1.5e9))
          .seconds *
      1e6;
  state.SetLabel(std::string(ProviderName(packed->provider())) + "/" +
                 std::string(PrecisionName(precision)));
}
BENCHMARK(BM_Conv2dPacked)
    ->ArgNames({"C_in", "HW", "C_out", "k", "stride", "provider", "precision",
                "threads"})
    ->Args({320, 64, 320, 3, 1, 0, 0, 2})
    ->Args({320, 64, 320, 3, 1, 0, 0, 1})
    ->Args({320, 64, 320, 1, 1, 0, 0, 2})
    ->Args({640, 32, 640, 3, 1, 0, 0, 2})
    ->Args({1280, 16, 1280, 3, 1, 0, 0, 2})
    ->Args({1280, 8, 1280, 3, 1, 0, 0, 2})
    ->Args({320, 64, 320, 3, 2, 0, 0, 2})
    ->Args({320, 64, 320, 3, 1, 1, 0, 2})
    ->Args({320, 64, 320, 3, 1, 0, 2, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_GroupNorm(benchmark::State& state) {
  const GroupNormShape s{1, 320, 64 * 64, 32};
  const bool silu = state.range(0) != 0;
  const int threads = static_cast<int>(state.range(1));
  const std::vector<float> x = Random(320 * 4096, 4), g = Random(320, 5),
                           b = Random(320, 6);
  std::vector<float> y(x.size());
  Loop(state, [&] {
    return GroupNormF32(s, 1e-5f, x.data(), g.data(), b.data(), y.data(), silu,
                        threads);
  });
  Report(state, GroupNormCost(s, true, silu));
}
BENCHMARK(BM_GroupNorm)
    ->ArgNames({"silu", "threads"})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({1, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_Attention(benchmark::State& state) {
  const AttentionShape s{1, state.range(0), state.range(1), 8, 40};
  AttentionOptions opt;
  opt.num_threads = static_cast<int>(state.range(2));
  const std::vector<float> q = Random(s.q_len * 320, 7),
                           k = Random(s.kv_len * 320, 8),
                           v = Random(s.kv_len * 320, 9);
  std::vector<float> out(q.size());
  Loop(state, [&] {
    return AttentionF32(s, q.data(), k.data(), v.data(), out.data(), opt);
  });
  Report(state, AttentionCost(s));
  state.counters["exp/s"] =
      benchmark::Counter(AttentionCost(s).transcendentals,
                         benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Attention)
    ->ArgNames({"Lq", "Lk", "threads"})
    ->Args({4096, 4096, 1})
    ->Args({4096, 4096, 2})
    ->Args({4096, 77, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_Activation(benchmark::State& state) {
  const auto act = static_cast<Activation>(state.range(0));
  const int64_t n = 4096 * 1280;
  const int threads = static_cast<int>(state.range(1));
  const std::vector<float> x = Random(n, 10);
  std::vector<float> y(n);
  Loop(state,
       [&] { return ActivationF32(act, n, x.data(), y.data(), threads); });
  Report(state, ActivationCost(act, n));
  state.SetLabel(std::string(ActivationName(act)));
}
BENCHMARK(BM_Activation)
    ->ArgNames({"act", "threads"})
    ->Args({static_cast<int>(Activation::kGeluErf), 1})
    ->Args({static_cast<int>(Activation::kGeluErf), 2})
    ->Args({static_cast<int>(Activation::kSilu), 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_Softmax(benchmark::State& state) {
  const int64_t rows = 8 * 77,
                dim = 77;  // CLIP's attention probabilities, one layer
  const std::vector<float> x = Random(rows * dim, 11);
  std::vector<float> y(x.size());
  Loop(state, [&] { return SoftmaxF32(rows, dim, x.data(), y.data()); });
  Report(state, SoftmaxCost(rows, dim));
}
BENCHMARK(BM_Softmax)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tpumesh::kernels

BENCHMARK_MAIN();
