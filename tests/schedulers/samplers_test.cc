// Karras/exponential sigma schedules and the samplers heun, dpmpp_2m_sde and
// dpmpp_2s_a against diffusers 0.42.1 (tests/data/scheduler_ref_samplers.h5,
// scripts/refdata/make_sampler_ref.py): every timestep and sigma, and every
// step's output given the reference's sample, within 1e-6 relative; the
// stochastic samplers get diffusers' recorded draws through their NoiseFn.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hdf5.h"
#include "io/h5io.h"
#include "schedulers/schedulers.h"
#include "schedulers/schedulers_internal.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kRef = std::string(TPUMESH_TEST_DATA_DIR) + "/scheduler_ref_samplers.h5";
constexpr double kTol = 1e-6;

template <typename T>
std::vector<T> Read(const std::string& name) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  std::vector<T> out;
  hid_t f = H5Fopen(kRef.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return out;
  hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  if (ds >= 0) {
    hid_t space = H5Dget_space(ds);
    out.resize(H5Sget_simple_extent_npoints(space));
    hid_t mtype = std::is_same_v<T, float>    ? H5T_NATIVE_FLOAT
                  : std::is_same_v<T, double> ? H5T_NATIVE_DOUBLE
                                              : H5T_NATIVE_INT32;
    if (H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0) out.clear();
    H5Sclose(space);
    H5Dclose(ds);
  }
  H5Fclose(f);
  return out;
}

std::string ReadString(const std::string& name) {
  auto s = H5ReadStrings(kRef, name);
  return s.ok() && !s->empty() ? (*s)[0] : "";
}

// max |got - want| / max(|want|) over the arrays (sizes must match).
template <typename A, typename B>
double RelErr(const A* got, const B* want, size_t n) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    ref = std::max(ref, std::fabs(static_cast<double>(want[i])));
  }
  return ref > 0 ? err / ref : err;
}
// Element by element: |got - want| / max(1e-3, |want|), the worst.
template <typename A, typename B>
double ElementErr(const std::vector<A>& got, const B* want, size_t n) {
  if (got.size() != n) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double w = static_cast<double>(want[i]);
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - w) / std::max(1e-3, std::fabs(w)));
  }
  return worst;
}

std::map<std::string, double>& Worst() {
  static auto* m = new std::map<std::string, double>();
  return *m;
}
void Note(const std::string& key, double err) { Worst()[key] = std::max(Worst()[key], err); }
class PrintWorst : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [k, v] : Worst()) std::printf("[ figures  ] %-34s max relative error %.3g\n", k.c_str(), v);
  }
};
const auto* const kPrintWorst = ::testing::AddGlobalTestEnvironment(new PrintWorst);

StatusOr<std::unique_ptr<Scheduler>> MakeFrom(const std::string& name, const std::string& json) {
  TPUMESH_ASSIGN_OR_RETURN(SchedulerConfig c, SchedulerConfig::FromJson(json, "cfg.json"));
  return MakeScheduler(name, c);
}

// The reference's betas (torch 2.15's linspace; make_sampler_ref.py says why)
// for a config's linear/scaled_linear schedule, "" key when there are none.
std::string BetasKey(const std::string& name, const SchedulerConfig& c) {
  if (c.beta_schedule != "linear" && c.beta_schedule != "scaled_linear") return "";
  const bool heun = name == "heun";
  char key[96];
  std::snprintf(key, sizeof key, "betas/%s_%g_%g", c.beta_schedule.c_str(),
                c.beta_start.value_or(heun ? 0.00085 : 0.0001), c.beta_end.value_or(heun ? 0.012 : 0.02));
  return key;
}

// A scheduler of the reference's config, from the reference's betas.
StatusOr<std::unique_ptr<Scheduler>> MakeRef(const std::string& name, const std::string& json) {
  TPUMESH_ASSIGN_OR_RETURN(SchedulerConfig c, SchedulerConfig::FromJson(json, "cfg.json"));
  const std::string key = BetasKey(name, c);
  if (!key.empty()) {
    const std::vector<float> betas = Read<float>(key);
    if (betas.empty()) return NotFoundError(kRef + ": no " + key);
    c.trained_betas = std::vector<double>(betas.begin(), betas.end());
  }
  return MakeScheduler(name, c);
}

// Our betas (torch 1.13's linspace) are torch 2.15's within 1e-6.
TEST(SamplerRefTest, BetasAreTorch2sWithinAnUlpOrSo) {
  for (const auto& [schedule, json] : std::vector<std::pair<std::string, std::string>>{
           {"scaled_linear", R"({"beta_schedule":"scaled_linear","beta_start":0.00085,"beta_end":0.012})"},
           {"linear", R"({"beta_schedule":"linear"})"},
           {"heun linear", "{}"}}) {
    const std::string name = schedule == "heun linear" ? "heun" : "euler";
    auto ours = MakeFrom(name, json);
    auto c = SchedulerConfig::FromJson(json, "cfg.json");
    ASSERT_TRUE(ours.ok() && c.ok());
    const std::vector<float> want = Read<float>(BetasKey(name, *c));
    ASSERT_EQ(want.size(), 1000u) << BetasKey(name, *c);
    const double e = ElementErr((*ours)->betas(), want.data(), want.size());
    EXPECT_LE(e, kTol) << schedule;
    Note("betas vs torch 2.15: " + schedule, e);
  }
}

std::string Kind(const std::string& name, const std::string& config) {
  const bool karras = config.find("\"use_karras_sigmas\": true") != std::string::npos;
  const bool expo = config.find("\"use_exponential_sigmas\": true") != std::string::npos;
  const bool beta = config.find("\"use_beta_sigmas\": true") != std::string::npos;
  return name + (karras ? " karras" : expo ? " exponential" : beta ? " beta" : "");
}

TEST(SamplerRefTest, SchedulesMatchDiffusers) {
  const auto names = H5ReadStrings(kRef, "schedules/scheduler");
  const auto configs = H5ReadStrings(kRef, "schedules/config");
  ASSERT_TRUE(names.ok() && configs.ok()) << kRef;
  const auto steps = Read<int>("schedules/steps");
  const auto off = Read<int>("schedules/offsets"), sig_off = Read<int>("schedules/sigma_offsets");
  const auto ts = Read<double>("schedules/timesteps");
  const auto sigmas = Read<float>("schedules/sigmas");
  const auto init = Read<float>("schedules/init_noise_sigma");
  ASSERT_GE(names->size(), 400u);
  size_t exact_t = 0, exact_s = 0, total_t = 0, total_s = 0;
  for (size_t r = 0; r < names->size(); ++r) {
    const std::string& name = (*names)[r];
    SCOPED_TRACE(name + " " + std::to_string(steps[r]) + " steps, " + (*configs)[r]);
    auto s = MakeRef(name, (*configs)[r]);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE((*s)->SetTimesteps(steps[r]).ok());
    const std::vector<double>& got_t = (*s)->timesteps();
    const std::vector<float>& got_s = (*s)->sigmas();
    const size_t nt = off[r + 1] - off[r], ns = sig_off[r + 1] - sig_off[r];
    ASSERT_EQ(got_t.size(), nt);
    ASSERT_EQ(got_s.size(), ns);
    const double et = ElementErr(got_t, ts.data() + off[r], nt), es = ElementErr(got_s, sigmas.data() + sig_off[r], ns);
    EXPECT_LE(et, kTol) << "timesteps";
    EXPECT_LE(es, kTol) << "sigmas";
    EXPECT_LE(std::fabs((*s)->init_noise_sigma() - init[r]), kTol * std::fabs(init[r]));
    for (size_t i = 0; i < nt; ++i) exact_t += got_t[i] == ts[off[r] + i];
    for (size_t i = 0; i < ns; ++i) exact_s += got_s[i] == sigmas[sig_off[r] + i];
    total_t += nt;
    total_s += ns;
    const std::string kind = Kind(name, (*configs)[r]);
    Note("schedule timesteps: " + kind, et);
    Note("schedule sigmas: " + kind, es);
  }
  std::printf("[ figures  ] schedules: %zu/%zu timesteps and %zu/%zu sigmas bit-equal\n", exact_t, total_t, exact_s,
              total_s);
}

struct RunErrors {
  double forced = 0;  // worst step error from the reference's own sample
  double free = 0;    // worst error of our own trajectory
};

// Steps a reference trajectory over elements [begin, begin + count) of each
// latent: once fed the reference's sample before every step (each step's
// arithmetic), once on our own samples (the whole run).
RunErrors RunCase(const std::string& c, size_t begin, size_t count) {
  const std::string g = "trajectories/" + c + "/";
  const std::string name = ReadString(g + "scheduler");
  const std::string config = ReadString(g + "config");
  const int steps = Read<int>(g + "steps")[0];
  const std::vector<float> init = Read<float>(g + "latents_init"), input = Read<float>(g + "model_input"),
                           output = Read<float>(g + "model_output"), latents = Read<float>(g + "latents"),
                           draws = Read<float>(g + "noise");
  const size_t n = init.size();
  RunErrors run;
  for (bool forced : {true, false}) {
    auto made = MakeRef(name, config);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    if (!made.ok()) return run;
    Scheduler& s = **made;
    EXPECT_TRUE(s.SetTimesteps(steps).ok());
    EXPECT_EQ(s.timesteps().size(), latents.size() / n);
    EXPECT_LE(RelErr(s.timesteps().data(), Read<double>(g + "timesteps").data(), s.timesteps().size()), kTol);
    EXPECT_LE(std::fabs(s.init_noise_sigma() - Read<float>(g + "init_noise_sigma")[0]), kTol * s.init_noise_sigma());
    NoiseFn noise = [&](int step, float* out, size_t m) {
      ASSERT_EQ(m, count);
      ASSERT_GE(draws.size(), (step + 1) * n) << "a draw the reference did not make, step " << step;
      std::copy_n(draws.data() + step * n + begin, m, out);
    };
    std::vector<float> x(init.begin() + begin, init.begin() + begin + count), scaled;
    for (int k = 0; k < s.num_steps(); ++k) {
      if (forced && k > 0) std::copy_n(latents.data() + (k - 1) * n + begin, count, x.data());
      scaled = x;
      s.ScaleModelInput(scaled.data(), count, k);
      if (forced) {
        EXPECT_LE(RelErr(scaled.data(), input.data() + k * n + begin, count), kTol) << c << " model_input, step " << k;
      }
      const Status st = s.Step(output.data() + k * n + begin, k, x.data(), count, noise);
      EXPECT_TRUE(st.ok()) << st.ToString();
      const double e = RelErr(x.data(), latents.data() + k * n + begin, count);
      (forced ? run.forced : run.free) = std::max(forced ? run.forced : run.free, e);
    }
  }
  return run;
}

TEST(SamplerRefTest, StepsMatchDiffusers) {
  auto cases = H5ReadStrings(kRef, "trajectories/cases");
  ASSERT_TRUE(cases.ok()) << cases.status().ToString();
  ASSERT_GE(cases->size(), 25u);
  for (const std::string& c : *cases) {
    SCOPED_TRACE(c);
    const std::string g = "trajectories/" + c + "/";
    const std::string name = ReadString(g + "scheduler");
    const RunErrors run = RunCase(c, 0, Read<float>(g + "latents_init").size());
    EXPECT_LE(run.forced, kTol);
    EXPECT_LE(run.free, 1e-5);
    const std::string kind = Kind(name, ReadString(g + "config"));
    Note("step: " + kind, run.forced);
    Note("whole run: " + kind, run.free);
  }
}

// The history is per batch: two halves stepped apart equal the batch.
TEST(SamplerRefTest, BatchStepsLikeItsImages) {
  for (const std::string c : {"heun_sd_10", "dpmpp_2m_sde_karras_20", "dpmpp_2s_a_sd_10", "euler_a_karras_10"}) {
    SCOPED_TRACE(c);
    const size_t half = Read<float>("trajectories/" + c + "/latents_init").size() / 2;
    for (size_t begin : {size_t{0}, half}) {
      const RunErrors run = RunCase(c, begin, half);
      EXPECT_LE(run.forced, kTol);
      EXPECT_LE(run.free, 1e-5);
    }
  }
}

// img2img as diffusers' pipeline drives a scheduler: SetBeginIndex(t_start *
// order()), AddNoise at the begin step, then the steps from there (Heun and
// the singlestep solver start with an empty history, an odd begin included).
TEST(SamplerRefTest, Img2ImgStartsMidRun) {
  auto cases = H5ReadStrings(kRef, "img2img/cases");
  ASSERT_TRUE(cases.ok()) << cases.status().ToString();
  ASSERT_GE(cases->size(), 7u);
  for (const std::string& c : *cases) {
    SCOPED_TRACE(c);
    const std::string g = "img2img/" + c + "/";
    const std::string name = ReadString(g + "scheduler");
    auto made = MakeRef(name, ReadString(g + "config"));
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    Scheduler& s = **made;
    ASSERT_TRUE(s.SetTimesteps(Read<int>(g + "steps")[0]).ok());
    const int begin = Read<int>(g + "begin")[0];
    const std::vector<float> original = Read<float>(g + "original"), an_noise = Read<float>(g + "add_noise_noise"),
                             init = Read<float>(g + "latents_init"), output = Read<float>(g + "model_output"),
                             latents = Read<float>(g + "latents"), draws = Read<float>(g + "noise");
    const size_t n = original.size();
    ASSERT_EQ(latents.size(), (s.num_steps() - begin) * n);
    ASSERT_TRUE(s.SetBeginIndex(begin).ok());
    std::vector<float> x(n);
    ASSERT_TRUE(s.AddNoise(original.data(), an_noise.data(), begin, x.data(), n).ok());
    const double e0 = RelErr(x.data(), init.data(), n);
    EXPECT_LE(e0, kTol) << "add_noise";
    double worst = 0;
    for (int k = begin; k < s.num_steps(); ++k) {
      const int r = k - begin;  // the reference's row
      if (r > 0) std::copy_n(latents.data() + (r - 1) * n, n, x.data());
      NoiseFn noise = [&](int step, float* out, size_t m) {
        ASSERT_EQ(step, k);
        ASSERT_GE(draws.size(), (r + 1) * n);
        std::copy_n(draws.data() + r * n, m, out);
      };
      const Status st = s.Step(output.data() + r * n, k, x.data(), n, noise);
      ASSERT_TRUE(st.ok()) << st.ToString();
      worst = std::max(worst, RelErr(x.data(), latents.data() + r * n, n));
    }
    EXPECT_LE(worst, kTol);
    Note("img2img step: " + name, std::max(e0, worst));
  }
}

// Heun's 2N-1 calls alternate first and second order; its sigmas repeat.
TEST(SamplerTest, HeunInterleavesItsTimesteps) {
  auto s = MakeFrom("heun", R"({"beta_schedule":"scaled_linear","timestep_spacing":"linspace"})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE((*s)->SetTimesteps(4).ok());
  const auto& t = (*s)->timesteps();
  const auto& sg = (*s)->sigmas();
  ASSERT_EQ(t.size(), 7u);
  ASSERT_EQ(sg.size(), 8u);
  for (int i = 1; i < 7; i += 2) EXPECT_EQ(t[i], t[i + 1]);
  for (int i = 1; i < 7; i += 2) EXPECT_EQ(sg[i], sg[i + 1]);
  EXPECT_EQ(sg.back(), 0.0f);
  // diffusers' scheduler.order: 2 for Heun only.
  EXPECT_EQ((*s)->order(), 2);
  for (const std::string& name : SchedulerNames()) {
    auto other = MakeFrom(name, R"({"skip_prk_steps":true})");
    ASSERT_TRUE(other.ok()) << name;
    EXPECT_EQ((*other)->order(), name == "heun" ? 2 : 1) << name;
  }
}

TEST(SamplerConfigTest, KeysAndDefaults) {
  // Heun's own beta defaults: 0.00085..0.012 (linear) unless the file says.
  auto heun = MakeFrom("heun", "{}");
  auto euler = MakeFrom("euler", "{}");
  ASSERT_TRUE(heun.ok() && euler.ok());
  EXPECT_FLOAT_EQ((*heun)->betas().front(), 0.00085f);
  EXPECT_FLOAT_EQ((*euler)->betas().front(), 0.0001f);
  EXPECT_EQ(*SchedulerNameOfClass("HeunDiscreteScheduler"), "heun");
  EXPECT_EQ(*SchedulerNameOfClass("DPMSolverMultistepScheduler"), "dpmpp_2m");
  EXPECT_EQ(SchedulerNameOfClass("DPMSolverSinglestepScheduler").status().code(), StatusCode::kInvalidArgument);

  SchedulerConfig c;
  EXPECT_TRUE(c.Set("use_karras_sigmas", "true").ok());
  EXPECT_TRUE(c.use_karras_sigmas);
  EXPECT_TRUE(c.Set("use_exponential_sigmas", "false").ok());
  EXPECT_TRUE(c.Set("sigma_min", "0.05").ok());
  EXPECT_EQ(*c.sigma_min, 0.05);
  EXPECT_TRUE(c.Set("sigma_max", "null").ok());
  EXPECT_FALSE(c.sigma_max.has_value());
  for (const char* bad : {"0", "-1", "nan", "\"x\""}) {
    const Status st = c.Set("sigma_min", bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(st.message(), HasSubstr("sigma_min"));
    EXPECT_THAT(st.message(), Not(HasSubstr("\n")));
  }
  EXPECT_EQ(c.Set("use_karras_sigmas", "yes").code(), StatusCode::kInvalidArgument);

  // Names that force diffusers keys: the model's algorithm_type/solver_order
  // do not change them.
  for (const char* name : {"dpmpp_2m_sde", "dpmpp_2s_a"}) {
    auto s = MakeFrom(name, R"({"algorithm_type":"dpmsolver++","solver_order":3})");
    ASSERT_TRUE(s.ok()) << name << ": " << s.status().ToString();
    EXPECT_EQ((*s)->config().algorithm_type, "sde-dpmsolver++");
  }
  EXPECT_EQ((*MakeFrom("dpmpp_2s_a", R"({"solver_order":3})"))->config().solver_order, 2);
}

TEST(SamplerConfigTest, WhatStaysUnimplementedIsOneLine) {
  struct Case {
    std::string name, json;
    StatusCode code;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"heun", R"({"use_beta_sigmas":true,"use_karras_sigmas":true})", StatusCode::kInvalidArgument,
            "heun: only one of"},
           {"lms", R"({"use_karras_sigmas":true,"use_exponential_sigmas":true})", StatusCode::kInvalidArgument,
            "only one of use_karras_sigmas"},
           {"dpmpp_2m", R"({"algorithm_type":"sde-dpmsolver","solver_order":3,"final_sigmas_type":"sigma_min"})",
            StatusCode::kUnimplemented, "dpmpp_2m: solver_order 3 is not implemented"},
           {"dpmpp_2m", R"({"algorithm_type":"sde-dpmsolver"})", StatusCode::kInvalidArgument,
            "final_sigmas_type \"zero\""},
           {"dpmpp_2m_sde", R"({"thresholding":true})", StatusCode::kUnimplemented, "dpmpp_2m_sde: thresholding"},
           {"dpmpp_2s_a", R"({"thresholding":true})", StatusCode::kUnimplemented, "dpmpp_2s_a: thresholding"},
           {"dpmpp_2m", R"({"use_lu_lambdas":true})", StatusCode::kUnimplemented, "use_lu_lambdas"},
           {"euler", R"({"interpolation_type":"log_linear"})", StatusCode::kUnimplemented, "interpolation_type"},
           {"heun", R"({"prediction_type":"original_sample"})", StatusCode::kInvalidArgument, "prediction_type"},
       }) {
    const Status st = MakeFrom(c.name, c.json).status();
    EXPECT_EQ(st.code(), c.code) << c.name << " " << c.json << ": " << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr(c.message));
    EXPECT_THAT(st.message(), Not(HasSubstr("\n")));
  }
}

// The schedule helpers against values worked by hand.
TEST(SamplerNumericsTest, KarrasAndSigmaToT) {
  const std::vector<double> k = internal::KarrasSigmas(0.1, 10.0, 3);
  ASSERT_EQ(k.size(), 3u);
  EXPECT_DOUBLE_EQ(k[0], 10.0);
  EXPECT_NEAR(k[1], std::pow(0.5 * (std::pow(0.1, 1 / 7.0) + std::pow(10.0, 1 / 7.0)), 7.0), 1e-12);
  EXPECT_NEAR(k[2], 0.1, 1e-12);
  const std::vector<double> e = internal::ExponentialSigmas(0.1, 10.0, 3);
  EXPECT_NEAR(e[1], 1.0, 1e-12);
  // Beta(0.6, 0.6) is symmetric: its median is 1/2, I_x + I_{1-x} = 1; and
  // I_x(1, 1) = x, I_x(2, 1) = x^2.
  const std::vector<double> b = internal::BetaSigmas(0.1, 10.0, 3);
  EXPECT_DOUBLE_EQ(b[0], 10.0);
  EXPECT_NEAR(b[1], 5.05, 1e-12);
  EXPECT_DOUBLE_EQ(b[2], 0.1);
  EXPECT_NEAR(internal::RegularizedIncompleteBeta(0.3, 0.6, 0.6) + internal::RegularizedIncompleteBeta(0.7, 0.6, 0.6),
              1.0, 1e-14);
  EXPECT_NEAR(internal::RegularizedIncompleteBeta(0.3, 1, 1), 0.3, 1e-14);
  EXPECT_NEAR(internal::RegularizedIncompleteBeta(0.3, 2, 1), 0.09, 1e-14);
  // log sigmas 0, 1, 2: sigma e^1.5 sits halfway between t = 1 and t = 2;
  // below the first, t = 0; above the last, t = 2.
  const std::vector<float> ls{0.0f, 1.0f, 2.0f};
  EXPECT_NEAR(internal::SigmaToT(std::exp(1.5), ls), 1.5, 1e-12);
  EXPECT_EQ(internal::SigmaToT(0.5, ls), 0.0);
  EXPECT_EQ(internal::SigmaToT(100.0, ls), 2.0);
}

}  // namespace
}  // namespace tpumesh::pipeline
