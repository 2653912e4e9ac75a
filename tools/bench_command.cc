// `tpumesh bench matmul|conv|attention|peak`: for users measuring their host.
// Each op runs on the kernels the models use, prints the host's GFLOP/s
// (median of --repeats), the host's peak (measured by a quick probe, or
// --peak), the fraction, and the modelled time of the same op on one device
// of the emulated chip (labelled modelled).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/conv2d.h"
#include "kernels/matmul.h"
#include "kernels/matmul_cost.h"
#include "kernels/peak.h"
#include "mesh/chip_spec.h"
#include "mesh/cost_model.h"
#include "pipeline/loader.h"
#include "tools/commands.h"

namespace tpumesh::tools {
namespace {

struct BenchOptions {
  std::string op;
  int64_t m = 2048, n = 2048, k = 2048;
  std::string shape;
  std::string dtype = "bf16";
  std::string precision = "default";
  std::string provider = "auto";
  int threads = 0;
  int repeats = 5;
  double peak_gflops = 0;  // 0: measure
  double probe_seconds = 1.0;  // bench peak: per path
  std::string chip = "v5e";
};

StatusOr<kernels::Precision> ParseKernelPrecision(const std::string& s) {
  if (s == "default") return kernels::Precision::kDefault;
  if (s == "high") return kernels::Precision::kHigh;
  if (s == "highest") return kernels::Precision::kHighest;
  return InvalidArgumentError("--precision must be default, high or highest, not '" + s + "'");
}

// "zen3 (avx2 kernels)": libblis's configuration and what its kernels are.
std::string BlisText() {
  const kernels::BlisConfig& blis = kernels::ProcessBlisConfig();
  return blis.name + " (" + blis.note + ")";
}

StatusOr<kernels::Provider> ParseProvider(const std::string& s) {
  for (auto p : {kernels::Provider::kAuto, kernels::Provider::kHighway, kernels::Provider::kBf16,
                 kernels::Provider::kBlis, kernels::Provider::kAmx})
    if (kernels::ProviderName(p) == s) return p;
  return InvalidArgumentError("--provider must be auto, highway, bf16, blis or amx, not '" + s + "'");
}

// "a,b,c" -> numbers; exactly `min`..`max` of them, each >= 1 (or >= 0 for
// the padding, the last of conv's).
StatusOr<std::vector<int64_t>> ParseShape(const std::string& text, size_t min, size_t max, const char* what) {
  std::vector<int64_t> v;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string part = text.substr(pos, comma - pos);
    char* end = nullptr;
    const long long x = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || x < 0)
      return InvalidArgumentError(std::string("--shape '") + text + "': expected " + what);
    v.push_back(x);
    pos = comma + 1;
  }
  if (v.size() < min || v.size() > max)
    return InvalidArgumentError(std::string("--shape '") + text + "': expected " + what);
  return v;
}

// Refuses a bench whose buffers would not fit this host's available memory,
// before allocating them: `bytes` is reckoned in doubles from the shape, so
// no product of its dimensions can wrap.
Status CheckBenchMemory(double bytes, const std::string& shape) {
  const int64_t have = pipeline::HostMemoryAvailable();
  if (have > 0 && bytes > static_cast<double>(have))
  {
    char text[160];
    std::snprintf(text, sizeof text, ": its buffers take about %.3g GiB, more than the %.1f GiB this host has available",
                  bytes / (1 << 30), static_cast<double>(have) / (1 << 30));
    return ResourceExhaustedError(shape + text);
  }
  return OkStatus();
}

// The peak a bench reports against: at precision highest (f32 operands
// and FMAs) the f32 FMA peak, else the host's best (bf16 dot products where
// the host has them).
bool F32Work(const BenchOptions& o) { return o.precision == "highest"; }
StatusOr<kernels::PathPeak> MeasureBenchPeak(const BenchOptions& o) {
  return F32Work(o) ? kernels::MeasureF32Peak(o.threads) : kernels::MeasureBestPeak(o.threads);
}

struct HostTime {
  double median = 0, best = 0;  // seconds
  kernels::PathPeak peak_before;  // flops 0 with --peak
};

// Median and best seconds of o.repeats runs of fn (after one warm-up run),
// and the host's peak probed just before them (unless --peak).
StatusOr<HostTime> Time(const BenchOptions& o, const std::function<Status()>& fn) {
  HostTime h;
  if (o.peak_gflops <= 0) {
    TPUMESH_ASSIGN_OR_RETURN(h.peak_before, MeasureBenchPeak(o));
  }
  TPUMESH_RETURN_IF_ERROR(fn());
  std::vector<double> t;
  for (int r = 0; r < o.repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    TPUMESH_RETURN_IF_ERROR(fn());
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  h.median = t[t.size() / 2];
  h.best = t.front();
  return h;
}

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

struct Modelled {
  double seconds = 0, mxu_seconds = 0, hbm_seconds = 0, utilisation = 0;
};

// Roofline of a sum of matmuls on one device: max(MXU time, HBM time).
Modelled ModelMatmuls(const mesh::ChipSpec& chip, const std::vector<kernels::MatmulCostFigures>& parts,
                      double bytes) {
  Modelled m;
  double macs = 0, capacity = 0;
  const kernels::SystolicArray a = mesh::DeviceArray(chip);
  for (const auto& p : parts) {
    m.mxu_seconds += p.seconds;
    macs += p.useful_macs;
    capacity += p.cycles * a.rows * a.cols * a.count;
  }
  m.hbm_seconds = bytes / chip.hbm_bandwidth_per_device();
  m.seconds = std::max(m.mxu_seconds, m.hbm_seconds);
  m.utilisation = capacity > 0 ? macs / capacity : 0;
  return m;
}

// The peak is probed before and after the timed runs; the fraction is
// against the higher. A host whose speed moves (a shared VM, a throttled
// CPU) gets a warning line when the two probes differ by more than 10%.
Status Report(const BenchOptions& o, const mesh::ChipSpec& chip, const std::string& what, double flops,
              const HostTime& host, const Modelled& model) {
  std::string peak_how = "assumed (--peak)";
  kernels::PathPeak peak{F32Work(o) ? std::min(kernels::ActiveCpuPath(), kernels::CpuPath::kAvx512)
                                     : kernels::ActiveCpuPath(),
                         o.peak_gflops * 1e9};
  kernels::PeakProbes probes;
  if (o.peak_gflops <= 0) {
    probes.before = host.peak_before;
    TPUMESH_ASSIGN_OR_RETURN(probes.after, MeasureBenchPeak(o));
    peak = probes.higher();
    peak_how = "measured";
  }
  const double rate = flops / host.median;
  std::printf("%s, %d thread(s)\n", what.c_str(), o.threads);
  std::printf("  host:     %.3f ms median of %d (best %.3f ms), %.1f GFLOP/s = %.0f%% of the host's %s peak, "
              "%.1f GFLOP/s (%s, %s)\n",
              host.median * 1e3, o.repeats, host.best * 1e3, rate / 1e9, 100 * rate / peak.flops,
              F32Work(o) ? "f32 FMA" : "best", peak.flops / 1e9,
              std::string(kernels::CpuPathName(peak.path)).c_str(), peak_how.c_str());
  if (probes.apart()) std::printf("  %s\n", probes.Warning().c_str());
  std::printf("  modelled on one %s device (%d MXU %dx%d at %.2f GHz, HBM %.0f GB/s): %.2f us "
              "(MXU %.2f us, HBM %.2f us), MXU utilisation %.0f%%, %.3f GFLOP\n",
              chip.name.c_str(), mesh::DeviceArray(chip).count, chip.mxu_rows, chip.mxu_cols, chip.clock_hz / 1e9,
              chip.hbm_bandwidth_per_device() / 1e9, model.seconds * 1e6, model.mxu_seconds * 1e6,
              model.hbm_seconds * 1e6, 100 * model.utilisation, flops / 1e9);
  return OkStatus();
}

// A matmul side, as --m, --n, --k or --shape give it (what the host can
// hold is checked when the operands are allocated).
constexpr int64_t kMaxBenchDim = 1 << 20;

Status BenchMatmul(BenchOptions o, const mesh::ChipSpec& chip) {
  if (!o.shape.empty()) {  // --shape M,N,K instead of --m --n --k
    TPUMESH_ASSIGN_OR_RETURN(std::vector<int64_t> v, ParseShape(o.shape, 3, 3, "M,N,K"));
    o.m = v[0];
    o.n = v[1];
    o.k = v[2];
  }
  if (o.m < 1 || o.n < 1 || o.k < 1 || o.m > kMaxBenchDim || o.n > kMaxBenchDim || o.k > kMaxBenchDim)
    return InvalidArgumentError("--m, --n and --k must be >= 1 and at most " + std::to_string(kMaxBenchDim) +
                                ", got " + std::to_string(o.m) + "," + std::to_string(o.n) + "," +
                                std::to_string(o.k));
  {
    const double m = static_cast<double>(o.m), n = static_cast<double>(o.n), k = static_cast<double>(o.k);
    // A and B in f32 and bf16, B packed, C in f32.
    TPUMESH_RETURN_IF_ERROR(CheckBenchMemory(6 * (m * k + k * n) + 4 * k * n + 4 * m * n,
                                             "matmul " + std::to_string(o.m) + "x" + std::to_string(o.n) + "x" +
                                                 std::to_string(o.k)));
  }
  TPUMESH_ASSIGN_OR_RETURN(kernels::Precision precision, ParseKernelPrecision(o.precision));
  TPUMESH_ASSIGN_OR_RETURN(kernels::Provider provider, ParseProvider(o.provider));
  if (o.dtype != "bf16" && o.dtype != "f32") return InvalidArgumentError("--dtype must be bf16 or f32");
  kernels::MatmulOptions opt{precision, provider};
  TPUMESH_ASSIGN_OR_RETURN(kernels::Provider resolved, kernels::ResolveProvider(provider, precision));
  const std::vector<float> a32 = Random(static_cast<size_t>(o.m * o.k), 1), b32 = Random(static_cast<size_t>(o.k * o.n), 2);
  std::vector<kernels::bf16> a16(a32.size()), b16(b32.size());
  for (size_t i = 0; i < a32.size(); ++i) a16[i] = kernels::F32ToBf16(a32[i]);
  for (size_t i = 0; i < b32.size(); ++i) b16[i] = kernels::F32ToBf16(b32[i]);
  std::vector<float> c(static_cast<size_t>(o.m * o.n));
  const bool bf = o.dtype == "bf16";
  const auto p0 = std::chrono::steady_clock::now();
  auto packed = bf ? kernels::PackedMatrix::Pack(o.k, o.n, b16.data(), o.n, opt)
                   : kernels::PackedMatrix::Pack(o.k, o.n, b32.data(), o.n, opt);
  if (!packed.ok()) return packed.status();
  const double pack_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
  TPUMESH_ASSIGN_OR_RETURN(auto host, Time(o, [&] {
    return bf ? kernels::Matmul(o.m, a16.data(), o.k, *packed, c.data(), o.n, o.threads)
              : kernels::Matmul(o.m, a32.data(), o.k, *packed, c.data(), o.n, o.threads);
  }));
  const auto cost = kernels::MatmulCost(o.m, o.n, o.k, precision, mesh::DeviceArray(chip));
  char what[320];
  const std::string engine = resolved == kernels::Provider::kBlis ? "BLIS configuration " + BlisText()
                                                                 : "Highway target " + std::string(kernels::HighwayTargetName());
  std::snprintf(what, sizeof what, "matmul %lldx%lldx%lld (MxNxK), %s operands, precision %s, provider %s (%s)",
                static_cast<long long>(o.m), static_cast<long long>(o.n), static_cast<long long>(o.k), o.dtype.c_str(),
                o.precision.c_str(), std::string(kernels::ProviderName(resolved)).c_str(), engine.c_str());
  TPUMESH_RETURN_IF_ERROR(Report(o, chip, what, 2.0 * o.m * o.n * o.k, host,
                                 ModelMatmuls(chip, {cost}, cost.bytes_read + cost.bytes_written)));
  std::printf("  packing B once (plan time): %.3f ms\n", pack_s * 1e3);
  return OkStatus();
}

Status BenchConv(const BenchOptions& o, const mesh::ChipSpec& chip) {
  TPUMESH_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                           ParseShape(o.shape.empty() ? "1,320,64,64,320,3,1,1" : o.shape, 6, 8,
                                      "N,C_in,H,W,C_out,kernel[,stride[,pad]]"));
  {
    // x, the weight and y in f32 (y at most the input's size per output
    // channel), each twice for packed copies and the im2col tiles.
    const double n = static_cast<double>(v[0]), hw = static_cast<double>(v[2]) * static_cast<double>(v[3]);
    const double cin = static_cast<double>(v[1]), cout = static_cast<double>(v[4]), kk = static_cast<double>(v[5]) * v[5];
    TPUMESH_RETURN_IF_ERROR(CheckBenchMemory(8 * (n * cin * hw + cout * cin * kk + n * cout * hw), "conv --shape " + o.shape));
  }
  TPUMESH_ASSIGN_OR_RETURN(kernels::Precision precision, ParseKernelPrecision(o.precision));
  const kernels::Conv2dShape s = kernels::MakeConv2dShape(v[0], v[1], v[2], v[3], v[4], v[5], v.size() > 6 ? v[6] : 1,
                                                          v.size() > 7 ? v[7] : v[5] / 2);
  TPUMESH_RETURN_IF_ERROR(kernels::CheckConv2d(s));
  // As the models run it (models::Conv2d calls the same kernel on its cached
  // weight): the weight packed once (plan time, timed apart), then
  // kernels::Conv2dPacked.
  TPUMESH_ASSIGN_OR_RETURN(kernels::Provider provider, ParseProvider(o.provider));
  TPUMESH_ASSIGN_OR_RETURN(kernels::Provider resolved, kernels::ResolveProvider(provider, precision));
  const std::vector<float> x = Random(static_cast<size_t>(s.batch * s.in_channels * s.height * s.width), 1);
  const std::vector<float> w = Random(static_cast<size_t>(s.out_channels * s.gemm_k()), 2);
  const std::vector<float> bias = Random(static_cast<size_t>(s.out_channels), 3);
  std::vector<float> y(static_cast<size_t>(s.batch * s.out_channels * s.out_height() * s.out_width()));
  const auto p0 = std::chrono::steady_clock::now();
  TPUMESH_ASSIGN_OR_RETURN(kernels::PackedConv2dWeight packed,
                           kernels::PackedConv2dWeight::Pack(s.out_channels, s.in_channels, s.kernel_h, s.kernel_w,
                                                             w.data(), {precision, provider}));
  const double pack_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
  TPUMESH_ASSIGN_OR_RETURN(auto host, Time(o, [&]() -> Status {
    return kernels::Conv2dPacked(s, x.data(), packed, bias.data(), y.data(), o.threads);
  }));
  // On the chip: one matmul [N*Ho*Wo, K] x [K, C_out].
  const int64_t pixels = s.batch * s.out_height() * s.out_width();
  const auto cost = kernels::MatmulCost(pixels, s.out_channels, s.gemm_k(), precision, mesh::DeviceArray(chip));
  const kernels::OpCost c = kernels::Conv2dCost(s);
  char what[320];
  std::snprintf(what, sizeof what, "conv2d N=%lld C_in=%lld %lldx%lld -> C_out=%lld, %lldx%lld kernel, stride %lld, pad %lld, precision %s, provider %s",
                static_cast<long long>(s.batch), static_cast<long long>(s.in_channels), static_cast<long long>(s.height),
                static_cast<long long>(s.width), static_cast<long long>(s.out_channels), static_cast<long long>(s.kernel_h),
                static_cast<long long>(s.kernel_w), static_cast<long long>(s.stride), static_cast<long long>(s.pad_top),
                o.precision.c_str(),
                std::string(kernels::ProviderName(resolved)).c_str());
  const double bytes_chip = precision == kernels::Precision::kDefault ? c.bytes() / 2 : c.bytes();  // bf16 on chip
  TPUMESH_RETURN_IF_ERROR(Report(o, chip, what, 2.0 * pixels * s.out_channels * s.gemm_k(), host,
                                 ModelMatmuls(chip, {cost}, bytes_chip)));
  std::printf("  packing the weight once (plan time): %.3f ms\n", pack_s * 1e3);
  return OkStatus();
}

Status BenchAttention(const BenchOptions& o, const mesh::ChipSpec& chip) {
  TPUMESH_ASSIGN_OR_RETURN(std::vector<int64_t> v, ParseShape(o.shape.empty() ? "2,4096,4096,8,40" : o.shape, 5, 5,
                                                              "B,Lq,Lk,heads,head_dim"));
  {
    // Q, K, V and the output in f32, twice for their bf16 and packed copies.
    const double rows = static_cast<double>(v[0]) * (2.0 * v[1] + 2.0 * v[2]);
    TPUMESH_RETURN_IF_ERROR(
        CheckBenchMemory(8 * rows * static_cast<double>(v[3]) * static_cast<double>(v[4]), "attention --shape " + o.shape));
  }
  kernels::AttentionShape s{v[0], v[1], v[2], v[3], v[4]};
  TPUMESH_RETURN_IF_ERROR(kernels::CheckAttention(s));
  const std::vector<float> q = Random(static_cast<size_t>(s.batch * s.q_len * s.hidden()), 1);
  const std::vector<float> k = Random(static_cast<size_t>(s.batch * s.kv_len * s.hidden()), 2);
  const std::vector<float> val = Random(static_cast<size_t>(s.batch * s.kv_len * s.hidden()), 3);
  std::vector<float> out(q.size());
  TPUMESH_ASSIGN_OR_RETURN(kernels::Precision precision, ParseKernelPrecision(o.precision));
  TPUMESH_ASSIGN_OR_RETURN(kernels::Provider provider, ParseProvider(o.provider));
  TPUMESH_ASSIGN_OR_RETURN(kernels::Provider resolved, kernels::ResolveProvider(provider, precision));
  kernels::AttentionOptions opt;
  opt.num_threads = o.threads;
  opt.precision = precision;
  opt.provider = provider;
  TPUMESH_ASSIGN_OR_RETURN(auto host, Time(o, [&] {
    return kernels::AttentionF32(s, q.data(), k.data(), val.data(), out.data(), opt);
  }));
  const kernels::SystolicArray a = mesh::DeviceArray(chip);
  const double bh = static_cast<double>(s.batch * s.heads);
  auto qk = kernels::MatmulCost(s.q_len, s.kv_len, s.head_dim, precision, a);
  auto pv = kernels::MatmulCost(s.q_len, s.head_dim, s.kv_len, precision, a);
  for (auto* p : {&qk, &pv}) {
    p->seconds *= bh;
    p->useful_macs *= bh;
    p->cycles *= bh;
  }
  const kernels::OpCost c = kernels::AttentionCost(s);
  char what[320];
  std::snprintf(what, sizeof what, "attention B=%lld Lq=%lld Lk=%lld heads=%lld head_dim=%lld, precision %s, %s",
                static_cast<long long>(s.batch), static_cast<long long>(s.q_len), static_cast<long long>(s.kv_len),
                static_cast<long long>(s.heads), static_cast<long long>(s.head_dim), o.precision.c_str(),
                precision == kernels::Precision::kHighest
                    ? "flash kernel in f32"
                    : ("matmul provider " + std::string(kernels::ProviderName(resolved))).c_str());
  const double bytes_chip = precision == kernels::Precision::kDefault ? c.bytes() / 2 : c.bytes();  // bf16 on chip
  return Report(o, chip, what, 4.0 * bh * s.q_len * s.kv_len * s.head_dim, host,
                ModelMatmuls(chip, {qk, pv}, bytes_chip));
}

Status BenchPeak(const BenchOptions& o) {
  constexpr const char* kInstruction[] = {"SSE mulps/addps", "AVX2 FMA (ymm)", "AVX-512 FMA (zmm)",
                                          "AVX512-BF16 vdpbf16ps", "AMX tdpbf16ps (tiles)"};
  const char* cap = std::getenv(kernels::kCpuPathVariable);
  std::printf("host path %s, active path %s%s%s%s, %d thread(s)\n",
              std::string(kernels::CpuPathName(kernels::HostCpuPath())).c_str(),
              std::string(kernels::CpuPathName(kernels::ActiveCpuPath())).c_str(),
              cap != nullptr && *cap != '\0' ? " (TPUMESH_SIMD=" : "", cap != nullptr ? cap : "",
              cap != nullptr && *cap != '\0' ? ")" : "", o.threads);
  kernels::PathPeak best, f32;  // f32: the f32 FMA paths' best (kernels::MeasureF32Peak)
  for (kernels::CpuPath path : kernels::kCpuPaths) {
    const std::string name(kernels::CpuPathName(path));
    const char* instruction = kInstruction[static_cast<int>(path)];
    if (!kernels::CpuPathActive(path)) {
      // AMX's note says which of its conditions failed (CPU, OS, cap, kernel).
      std::printf("  %-11s %-22s %s\n", name.c_str(), instruction,
                  path == kernels::CpuPath::kAmx            ? kernels::ProcessAmxDecision().note.c_str()
                  : path <= kernels::HostCpuPath() ? "off (TPUMESH_SIMD)"
                                                   : "not on this CPU");
      continue;
    }
    TPUMESH_ASSIGN_OR_RETURN(const double flops, kernels::MeasurePeakFlops(path, o.threads, o.probe_seconds));
    std::printf("  %-11s %-22s %8.1f GFLOP/s (measured)\n", name.c_str(), instruction, flops / 1e9);
    if (flops > best.flops) best = {path, flops};
    if (path <= kernels::CpuPath::kAvx512 && flops > f32.flops) f32 = {path, flops};
  }
  std::printf("best peak: %.1f GFLOP/s (%s); the other benches report against it\n", best.flops / 1e9,
              std::string(kernels::CpuPathName(best.path)).c_str());
  std::printf("f32 FMA peak: %.1f GFLOP/s (%s); the benches at --precision highest report against it\n",
              f32.flops / 1e9, std::string(kernels::CpuPathName(f32.path)).c_str());
  // What kAuto picks at default/high (resolving it runs AMX's self-check
  // where AMX is active), and why.
  TPUMESH_ASSIGN_OR_RETURN(const kernels::Provider chosen,
                           kernels::ResolveProvider(kernels::Provider::kAuto, kernels::Precision::kDefault));
  std::string why;
  if (chosen == kernels::Provider::kAmx) {
    why = "AMX tiles, self-check passed";
  } else if (kernels::Avx512Bf16Active()) {
    char ratio[96];
    std::snprintf(ratio, sizeof ratio, "vdpbf16ps / FMA flops on one thread: %.2f", kernels::Bf16DotToFmaRatio());
    why = ratio;
  }
  if (kernels::CpuPathActive(kernels::CpuPath::kAmx) && chosen != kernels::Provider::kAmx)
    why += (why.empty() ? "" : "; ") + std::string("amx ") + kernels::AmxMatmulNote();
  std::printf("the matmul's auto provider at default/high: %s%s%s%s\n",
              std::string(kernels::ProviderName(chosen)).c_str(), why.empty() ? "" : " (", why.c_str(),
              why.empty() ? "" : ")");
  std::printf("the matmul's auto provider at highest: %s (Highway %s); BLIS, on request: %s\n",
              std::string(kernels::ProviderName(*kernels::ResolveProvider(kernels::Provider::kAuto,
                                                                          kernels::Precision::kHighest)))
                  .c_str(),
              std::string(kernels::HighwayTargetName()).c_str(), BlisText().c_str());
  return OkStatus();
}

Status RunBench(BenchOptions o) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.threads == 0) o.threads = cores;
  TPUMESH_ASSIGN_OR_RETURN(mesh::ChipSpec chip, mesh::LoadChipSpec(o.chip));
  if (o.op == "matmul") return BenchMatmul(o, chip);
  if (o.op == "conv") return BenchConv(o, chip);
  if (o.op == "attention") return BenchAttention(o, chip);
  return BenchPeak(o);
}

}  // namespace

void RegisterBench(CLI::App& app, RunFn* run) {
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure this host on the kernels the models use, beside the modelled time on the emulated chip.");
  cmd->require_subcommand(1);
  auto common = [&](CLI::App* sub) {
    sub->add_option("--threads", opt->threads, "Host threads, 0 to 1024 (0: every core)")
        ->check(CLI::Range(0, 1024))
        ->capture_default_str();
    sub->add_option("--repeats", opt->repeats, "Timed runs after one warm-up, 1 to 10000; the median is reported")
        ->check(CLI::Range(1, 10000))
        ->capture_default_str();
    sub->add_option("--peak", opt->peak_gflops, "Assume this host peak in GFLOP/s (at --precision highest its f32 FMA peak) instead of measuring it")
        ->check(CLI::Validator(
            [](const std::string& text) -> std::string {
              double value = 0;
              if (!CLI::detail::lexical_cast(text, value) || !(value > 0) || !std::isfinite(value)) {
                return "Value " + text + " is not a peak: give a positive number of GFLOP/s, or leave --peak out to measure";
              }
              return "";
            },
            "GFLOP/S>0"));
    sub->add_option("--chip", opt->chip, "Chip to model: " + mesh::ChipPresetList() + " or a chip JSON file")->capture_default_str();
    sub->add_option("--precision", opt->precision, "default (bf16 operands), high (bf16x3) or highest (f32)")
        ->capture_default_str();
    sub->callback([opt, run, sub] {
      opt->op = sub->get_name();
      *run = [opt] { return RunBench(*opt); };
    });
  };
  CLI::App* mm = cmd->add_subcommand("matmul", "C[M,N] = A[M,K] x B[K,N] with B packed once");
  CLI::Option* m_opt = mm->add_option("--m", opt->m, "Rows of A and C, 1 to 1048576")->capture_default_str();
  CLI::Option* n_opt = mm->add_option("--n", opt->n, "Columns of B and C, 1 to 1048576")->capture_default_str();
  CLI::Option* k_opt = mm->add_option("--k", opt->k, "Columns of A, rows of B, 1 to 1048576")->capture_default_str();
  mm->add_option("--shape", opt->shape, "M,N,K (instead of --m --n --k)")->excludes(m_opt, n_opt, k_opt);
  mm->add_option("--dtype", opt->dtype, "Operand storage: bf16 or f32")->capture_default_str();
  mm->add_option("--provider", opt->provider,
                 "auto (at highest: highway), highway, bf16 (AVX512-BF16), blis (on libblis's configuration, "
                 "which bench peak names) or amx (AMX tiles)")
      ->capture_default_str();
  common(mm);
  CLI::App* conv = cmd->add_subcommand(
      "conv", "2-D convolution as the models run it (kernels::Conv2dPacked, the weight packed once)");
  conv->add_option("--shape", opt->shape, "N,C_in,H,W,C_out,kernel[,stride[,pad]] (default 1,320,64,64,320,3,1,1)");
  conv->add_option("--provider", opt->provider, "auto, highway, bf16 (AVX512-BF16: an implicit GEMM), blis or amx (the implicit GEMM on AMX tiles)")
      ->capture_default_str();
  common(conv);
  CLI::App* att = cmd->add_subcommand(
      "attention", "Multi-head attention as the models run it (matmul kernels; f32 flash kernel at highest)");
  att->add_option("--shape", opt->shape, "B,Lq,Lk,heads,head_dim (default 2,4096,4096,8,40: SD1.5's first level)");
  att->add_option("--provider", opt->provider, "Matmul provider at default/high: auto, highway, bf16, blis or amx")
      ->capture_default_str();
  common(att);
  CLI::App* peak = cmd->add_subcommand(
      "peak", "Probe this host's bf16 and f32 multiply-add peak (vector units and, where present, AMX)");
  peak->add_option("--threads", opt->threads, "Host threads, 0 to 1024 (0: every core)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  peak->add_option("--seconds", opt->probe_seconds, "Seconds of probing per path (best of three runs), 0.001 to 60")
      ->check(CLI::Validator(
          [](const std::string& text) -> std::string {
            double value = 0;  // CLI::Range lets NaN through: it compares false both ways
            if (!CLI::detail::lexical_cast(text, value) || !(value >= 0.001 && value <= 60))
              return "Value " + text + " not in range 0.001 to 60";
            return "";
          },
          "FLOAT in [0.001 - 60]"))
      ->capture_default_str();
  peak->callback([opt, run] {
    opt->op = "peak";
    *run = [opt] { return RunBench(*opt); };
  });
}

}  // namespace tpumesh::tools
