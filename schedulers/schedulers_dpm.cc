// DPMSolverMultistepScheduler as diffusers' scheduling_dpmsolver_multistep.py
// (0.30.0; 0.42.1 for what follows): dpmsolver++, dpmsolver and
// sde-dpmsolver++ (noise from the NoiseFn), solver_order 1-3, midpoint and
// heun, lower_order_final, euler_at_final, final_sigmas_type zero|sigma_min,
// lambda_min_clipped, Karras and exponential sigmas. And
// DPMSolverSinglestepScheduler (scheduling_dpmsolver_singlestep.py, 0.42.1)
// with solver_order 2 and sde-dpmsolver++: tpumesh's dpmpp_2s_a.
// The per-step scalars (alpha_t, sigma_t, lambda, h, exp(-h)) are f32 as
// torch's 0-dim tensors; torch takes log/exp from SLEEF (<= 1 ulp), here they
// are glibc's, so a coefficient may differ from diffusers' by an ulp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "schedulers/schedulers.h"
#include "schedulers/schedulers_internal.h"

namespace tpumesh::pipeline::internal {
namespace {

struct AlphaSigma {
  float alpha, sigma, lambda;
};

// _sigma_to_alpha_sigma_t and lambda = log(alpha_t) - log(sigma_t).
AlphaSigma FromSigma(float sigma) {
  AlphaSigma r;
  r.alpha = 1.0f / std::sqrt(sigma * sigma + 1.0f);
  r.sigma = sigma * r.alpha;
  r.lambda = std::log(r.alpha) - std::log(r.sigma);
  return r;
}

// Karras/exponential/beta sigmas from the flipped f32 training sigmas (their
// first and last: the DPM classes have no sigma_min/sigma_max keys), with
// _sigma_to_t timesteps; `round` (Karras, except multistep with
// squaredcos_cap_v2) rounds them half to even, then .astype(int64) truncates.
void DpmSigmaSchedule(SigmaSchedule schedule, bool round, int n, const std::vector<float>& alphas_cumprod,
                      const std::vector<double>& train_sigmas, std::vector<double>* sigmas,
                      std::vector<int64_t>* timesteps) {
  const double lo = train_sigmas.front(), hi = train_sigmas.back();
  *sigmas = ConvertSigmas(schedule, lo, hi, n);
  const std::vector<float> log_sigmas = LogSigmasF32(alphas_cumprod);
  timesteps->clear();
  for (double x : *sigmas) {
    double t = SigmaToT(x, log_sigmas);
    if (round) t = NumpyRound(t);
    timesteps->push_back(static_cast<int64_t>(t));
  }
}

// The SDE terms of sde-dpmsolver++: x_t = (sigma_t / sigma_s * exp(-h)) * x
// + ... + (sigma_t * sqrt(1 - exp(-2h))) * noise, each factor a torch f32 scalar.
struct SdeFactors {
  float a, b, c;  // sample, D0 and noise factors; b = alpha_t * (1 - exp(-2h))
};
SdeFactors Sde(const AlphaSigma& t, const AlphaSigma& s, float h) {
  SdeFactors f;
  f.a = t.sigma / s.sigma * std::exp(-h);
  const float e2 = std::exp(-2.0f * h);
  f.b = t.alpha * (1.0f - e2);
  f.c = t.sigma * std::sqrt(1.0f - e2);
  return f;
}

// convert_model_output of the dpmsolver++ family: the x0 prediction.
void ToX0(Prediction pt, const AlphaSigma& s0, const float* mo, const float* sample, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const float x = sample[i], m = mo[i];
    out[i] = pt == Prediction::kEpsilon ? (x - s0.sigma * m) / s0.alpha
             : pt == Prediction::kSample ? m
                                         : s0.alpha * x - s0.sigma * m;
  }
}

// Both DPM-Solvers' add_noise: alpha_t * original + sigma_t * noise at the
// step's sigma.
void AddNoiseAt(float sigma, const float* original, const float* noise, float* out, size_t n) {
  const AlphaSigma t = FromSigma(sigma);
  for (size_t i = 0; i < n; ++i) {
    const float x = t.alpha * original[i];
    const float e = t.sigma * noise[i];
    out[i] = x + e;
  }
}

// What both DPM-Solvers share: the training schedule's sigmas and
// half-log-SNRs, lambda_min_clipped, the sigmas of a run's timesteps (the
// training sigmas interpolated, or Karras/exponential/beta ones), the final
// sigma, and add_noise.
class DpmScheduler : public Scheduler {
 public:
  Status Init() {
    TPUMESH_RETURN_IF_ERROR(InitSchedule());
    train_sigmas_ = TrainSigmas(alphas_cumprod_);
    lambda_t_.resize(alphas_cumprod_.size());
    for (size_t i = 0; i < alphas_cumprod_.size(); ++i) {
      const float a = alphas_cumprod_[i];
      lambda_t_[i] = std::log(std::sqrt(a)) - std::log(std::sqrt(1.0f - a));
    }
    init_noise_sigma_ = 1.0f;
    return OkStatus();
  }

 protected:
  DpmScheduler(std::string name, const SchedulerConfig& c, SigmaSchedule schedule)
      : Scheduler(std::move(name), c), schedule_(schedule) {}

  // torch.searchsorted(torch.flip(lambda_t, [0]), lambda_min_clipped): the
  // first index whose value is >= the bound.
  int64_t ClippedIndex() const {
    int64_t clipped_idx = 0;
    const int64_t len = static_cast<int64_t>(lambda_t_.size());
    while (clipped_idx < len &&
           static_cast<double>(lambda_t_[len - 1 - clipped_idx]) < config_.lambda_min_clipped) {
      ++clipped_idx;
    }
    return clipped_idx;
  }

  // timesteps_ and sigmas_ (with the final sigma) for the run's timesteps
  // `ts`, which a sigma schedule may replace. karras_from_sigmas: the Karras
  // timesteps come from the schedule's sigmas (DpmSigmaSchedule).
  void SetSigmas(int n, std::vector<int64_t> ts, bool karras_from_sigmas) {
    sigmas_.clear();
    if (schedule_ == SigmaSchedule::kDefault) {
      for (int64_t t : ts) sigmas_.push_back(static_cast<float>(InterpUnitGrid(static_cast<double>(t), train_sigmas_)));
    } else {
      std::vector<double> sig;
      DpmSigmaSchedule(schedule_, karras_from_sigmas, n, alphas_cumprod_, train_sigmas_, &sig, &ts);
      for (double x : sig) sigmas_.push_back(static_cast<float>(x));
    }
    timesteps_.assign(ts.begin(), ts.end());
    float sigma_last = 0.0f;
    if (config_.final_sigmas_type == "sigma_min") {
      const float a0 = alphas_cumprod_[0];
      sigma_last = std::sqrt((1.0f - a0) / a0);
    }
    sigmas_.push_back(sigma_last);
  }

  void DoAddNoise(const float* original, const float* noise, int step_index, float* out, size_t n) const override {
    AddNoiseAt(sigmas_[step_index], original, noise, out, n);
  }

  SigmaSchedule schedule_;
  std::vector<double> train_sigmas_;
  std::vector<float> lambda_t_;
};

class DpmSolverMultistepScheduler final : public DpmScheduler {
 public:
  DpmSolverMultistepScheduler(std::string name, const SchedulerConfig& c, bool plus_plus, bool heun, bool sde,
                              SigmaSchedule schedule)
      : DpmScheduler(std::move(name), c, schedule), plus_plus_(plus_plus), heun_(heun), sde_(sde) {}

 private:
  Status DoSetTimesteps(int n) override {
    const int n_train = config_.num_train_timesteps;
    const int64_t last_timestep = n_train - ClippedIndex();
    const std::string spacing = Spacing("linspace");
    std::vector<int64_t> ts;
    if (spacing == "linspace") {
      const std::vector<double> y = NumpyLinspace(0, static_cast<double>(last_timestep - 1), n + 1);
      for (int64_t i = n; i >= 1; --i) ts.push_back(static_cast<int64_t>(NumpyRound(y[i])));
    } else if (spacing == "leading") {
      const int64_t ratio = last_timestep / (n + 1);
      for (int64_t i = n; i >= 1; --i) ts.push_back(i * ratio + config_.steps_offset);
    } else {
      for (double x : NumpyArange(static_cast<double>(last_timestep), 0,
                                  -(static_cast<double>(n_train) / n))) {
        ts.push_back(static_cast<int64_t>(NumpyRound(x)) - 1);
      }
    }
    SetSigmas(n, std::move(ts), schedule_ == SigmaSchedule::kKarras && config_.beta_schedule != "squaredcos_cap_v2");
    model_outputs_.assign(config_.solver_order, {});
    lower_order_nums_ = 0;
    return OkStatus();
  }

  bool needs_noise() const override { return sde_; }

  Status DoStep(const float* mo, int step_index, float* sample, size_t n, const NoiseFn& noise) override {
    const int len = num_steps();
    const int order = config_.solver_order;
    const bool lof = config_.lower_order_final.value_or(true);
    const bool lower_order_final =
        step_index == len - 1 &&
        (config_.euler_at_final || (lof && len < 15) || config_.final_sigmas_type == "zero");
    const bool lower_order_second = step_index == len - 2 && lof && len < 15;

    // convert_model_output: x0 (dpmsolver++) or epsilon (dpmsolver).
    std::vector<float> converted(n);
    const AlphaSigma s0 = FromSigma(sigmas_[step_index]);
    const Prediction pt = ToPrediction(config_.prediction_type);
    for (size_t i = 0; i < n; ++i) {
      const float x = sample[i], m = mo[i];
      if (plus_plus_) {
        converted[i] = pt == Prediction::kEpsilon ? (x - s0.sigma * m) / s0.alpha
                       : pt == Prediction::kSample ? m
                                                   : s0.alpha * x - s0.sigma * m;
      } else {
        converted[i] = pt == Prediction::kEpsilon ? m
                       : pt == Prediction::kSample ? (x - s0.alpha * m) / s0.sigma
                                                   : s0.alpha * m + s0.sigma * x;
      }
    }
    for (int i = 0; i + 1 < order; ++i) model_outputs_[i] = std::move(model_outputs_[i + 1]);
    model_outputs_[order - 1] = std::move(converted);
    if (sde_) {
      noise_.resize(n);
      noise(step_index, noise_.data(), n);
    }

    if (order == 1 || lower_order_nums_ < 1 || lower_order_final) {
      FirstOrder(step_index, sample, n);
    } else if (order == 2 || lower_order_nums_ < 2 || lower_order_second) {
      SecondOrder(step_index, sample, n);
    } else {
      ThirdOrder(step_index, sample, n);
    }
    if (lower_order_nums_ < order) ++lower_order_nums_;
    return OkStatus();
  }

  const float* M(int back) const { return model_outputs_[model_outputs_.size() - 1 - back].data(); }

  void FirstOrder(int i, float* x, size_t n) const {
    const AlphaSigma t = FromSigma(sigmas_[i + 1]), s = FromSigma(sigmas_[i]);
    const float h = t.lambda - s.lambda;
    const float* m = M(0);
    if (sde_ && !plus_plus_) {
      // sde-dpmsolver: (alpha_t / alpha_s) x - 2 (sigma_t (e^h - 1)) eps +
      // (sigma_t sqrt(e^2h - 1)) noise.
      const float a = t.alpha / s.alpha, b = 2.0f * (t.sigma * (std::exp(h) - 1.0f));
      const float c = t.sigma * std::sqrt(std::exp(2.0f * h) - 1.0f);
      for (size_t k = 0; k < n; ++k) x[k] = (a * x[k] - b * m[k]) + c * noise_[k];
      return;
    }
    if (sde_) {
      const SdeFactors f = Sde(t, s, h);
      for (size_t k = 0; k < n; ++k) x[k] = (f.a * x[k] + f.b * m[k]) + f.c * noise_[k];
      return;
    }
    float a, b;
    if (plus_plus_) {
      a = t.sigma / s.sigma;
      b = t.alpha * (std::exp(-h) - 1.0f);
    } else {
      a = t.alpha / s.alpha;
      b = t.sigma * (std::exp(h) - 1.0f);
    }
    for (size_t k = 0; k < n; ++k) x[k] = a * x[k] - b * m[k];
  }

  void SecondOrder(int i, float* x, size_t n) const {
    const AlphaSigma t = FromSigma(sigmas_[i + 1]), s0 = FromSigma(sigmas_[i]), s1 = FromSigma(sigmas_[i - 1]);
    const float h = t.lambda - s0.lambda, h_0 = s0.lambda - s1.lambda;
    const float r0 = h_0 / h;
    const float inv_r0 = 1.0f / r0;
    const float *m0 = M(0), *m1 = M(1);
    if (sde_ && !plus_plus_) {
      // sde-dpmsolver: D1's factor sigma_t (e^h - 1) (midpoint) or
      // 2 (sigma_t ((e^h - 1) / h - 1)) (heun).
      const float e = std::exp(h) - 1.0f;
      const float a = t.alpha / s0.alpha, b = 2.0f * (t.sigma * e);
      const float c = heun_ ? 2.0f * (t.sigma * (e / h - 1.0f)) : t.sigma * e;
      const float cn = t.sigma * std::sqrt(std::exp(2.0f * h) - 1.0f);
      for (size_t k = 0; k < n; ++k) {
        const float d1 = inv_r0 * (m0[k] - m1[k]);
        x[k] = ((a * x[k] - b * m0[k]) - c * d1) + cn * noise_[k];
      }
      return;
    }
    if (sde_) {
      const SdeFactors f = Sde(t, s0, h);
      // midpoint: 0.5 * (alpha_t * (1 - exp(-2h))); heun: alpha_t * ((1 -
      // exp(-2h)) / (-2h) + 1).
      const float e2 = std::exp(-2.0f * h);
      const float c = heun_ ? t.alpha * ((1.0f - e2) / (-2.0f * h) + 1.0f) : 0.5f * f.b;
      for (size_t k = 0; k < n; ++k) {
        const float d1 = inv_r0 * (m0[k] - m1[k]);
        x[k] = ((f.a * x[k] + f.b * m0[k]) + c * d1) + f.c * noise_[k];
      }
      return;
    }
    float a, b, c;
    bool minus_c;
    if (plus_plus_) {
      const float e = std::exp(-h) - 1.0f;
      a = t.sigma / s0.sigma;
      b = t.alpha * e;
      if (heun_) {
        c = t.alpha * (e / h + 1.0f);
        minus_c = false;
      } else {
        c = 0.5f * (t.alpha * e);
        minus_c = true;
      }
    } else {
      const float e = std::exp(h) - 1.0f;
      a = t.alpha / s0.alpha;
      b = t.sigma * e;
      c = heun_ ? t.sigma * (e / h - 1.0f) : 0.5f * (t.sigma * e);
      minus_c = true;
    }
    for (size_t k = 0; k < n; ++k) {
      const float d1 = inv_r0 * (m0[k] - m1[k]);
      const float y = a * x[k] - b * m0[k];
      x[k] = minus_c ? y - c * d1 : y + c * d1;
    }
  }

  void ThirdOrder(int i, float* x, size_t n) const {
    const AlphaSigma t = FromSigma(sigmas_[i + 1]), s0 = FromSigma(sigmas_[i]), s1 = FromSigma(sigmas_[i - 1]),
                     s2 = FromSigma(sigmas_[i - 2]);
    const float h = t.lambda - s0.lambda, h_0 = s0.lambda - s1.lambda, h_1 = s1.lambda - s2.lambda;
    const float r0 = h_0 / h, r1 = h_1 / h;
    const float inv_r0 = 1.0f / r0, inv_r1 = 1.0f / r1;
    const float w1 = r0 / (r0 + r1), w2 = 1.0f / (r0 + r1);
    const float *m0 = M(0), *m1 = M(1), *m2 = M(2);
    if (sde_) {
      const SdeFactors f = Sde(t, s0, h);
      const float e2 = std::exp(-2.0f * h);
      const float c = t.alpha * ((1.0f - e2) / (-2.0f * h) + 1.0f);
      const float two_h = 2.0f * h;
      const float d = t.alpha * ((1.0f - e2 - 2.0f * h) / (two_h * two_h) - 0.5f);
      for (size_t k = 0; k < n; ++k) {
        const float d1_0 = inv_r0 * (m0[k] - m1[k]), d1_1 = inv_r1 * (m1[k] - m2[k]);
        const float d1 = d1_0 + w1 * (d1_0 - d1_1);
        const float d2 = w2 * (d1_0 - d1_1);
        x[k] = (((f.a * x[k] + f.b * m0[k]) + c * d1) + d * d2) + f.c * noise_[k];
      }
      return;
    }
    float a, b, c, d;
    if (plus_plus_) {
      const float e = std::exp(-h) - 1.0f;
      a = t.sigma / s0.sigma;
      b = t.alpha * e;
      c = t.alpha * (e / h + 1.0f);
      d = t.alpha * ((e + h) / (h * h) - 0.5f);
    } else {
      const float e = std::exp(h) - 1.0f;
      a = t.alpha / s0.alpha;
      b = t.sigma * e;
      c = t.sigma * (e / h - 1.0f);
      d = t.sigma * ((e - h) / (h * h) - 0.5f);
    }
    for (size_t k = 0; k < n; ++k) {
      const float d1_0 = inv_r0 * (m0[k] - m1[k]), d1_1 = inv_r1 * (m1[k] - m2[k]);
      const float d1 = d1_0 + w1 * (d1_0 - d1_1);
      const float d2 = w2 * (d1_0 - d1_1);
      const float y = a * x[k] - b * m0[k];
      x[k] = plus_plus_ ? (y + c * d1) - d * d2 : (y - c * d1) - d * d2;
    }
  }

  bool plus_plus_, heun_, sde_;
  std::vector<std::vector<float>> model_outputs_;  // oldest first, solver_order slots
  std::vector<float> noise_;                       // this step's draw (sde)
  int lower_order_nums_ = 0;
};

// ---------------------------------------------------------------------------

// DPMSolverSinglestepScheduler with solver_order 2 and sde-dpmsolver++: the
// order list [1, 2, 1, 2, ..., 1] pairs the steps; a first-order step keeps
// its starting sample, the second-order step after it restarts from that
// sample with both model outputs (diffusers' self.sample), fresh noise each.
class DpmSolverSinglestepScheduler final : public DpmScheduler {
 public:
  DpmSolverSinglestepScheduler(const SchedulerConfig& c, bool heun, SigmaSchedule schedule)
      : DpmScheduler("dpmpp_2s_a", c, schedule), heun_(heun) {}

 private:
  static constexpr int kOrder = 2;

  bool needs_noise() const override { return true; }

  Status DoSetTimesteps(int n) override {
    const int n_train = config_.num_train_timesteps;
    const int64_t clipped_idx = ClippedIndex();
    // np.linspace(0, n_train - 1 - clipped_idx, n + 1).round()[::-1][:-1]
    // whatever timestep_spacing says.
    std::vector<int64_t> ts;
    const std::vector<double> y = NumpyLinspace(0, static_cast<double>(n_train - 1 - clipped_idx), n + 1);
    for (int64_t i = n; i >= 1; --i) ts.push_back(static_cast<int64_t>(NumpyRound(y[i])));
    SetSigmas(n, std::move(ts), schedule_ == SigmaSchedule::kKarras);
    // diffusers turns lower_order_final on (in its config, for good) for an
    // odd step count or final_sigmas_type "zero".
    bool lof = config_.lower_order_final.value_or(false);
    if (!lof && (n % kOrder != 0 || config_.final_sigmas_type == "zero")) config_.lower_order_final = lof = true;
    // get_order_list(n) for order 2.
    orders_.clear();
    if (lof) {
      for (int i = 0; i < (n % 2 == 0 ? n / 2 - 1 : n / 2); ++i) orders_.insert(orders_.end(), {1, 2});
      orders_.push_back(1);
      if (n % 2 == 0) orders_.push_back(1);
    } else {
      for (int i = 0; i < n / 2; ++i) orders_.insert(orders_.end(), {1, 2});
    }
    if (config_.final_sigmas_type == "zero") orders_.back() = 1;
    m0_.clear();
    m1_.clear();
    start_.clear();
    return OkStatus();
  }

  Status DoStep(const float* mo, int step_index, float* sample, size_t n, const NoiseFn& noise) override {
    // model_outputs shift; the newest is this step's x0 prediction.
    m1_ = std::move(m0_);
    m0_.resize(n);
    ToX0(ToPrediction(config_.prediction_type), FromSigma(sigmas_[step_index]), mo, sample, n, m0_.data());
    std::vector<float> z(n);
    noise(step_index, z.data(), n);
    int order = orders_[step_index];
    if (order == 2 && m1_.empty()) order = 1;  // while model_outputs[-order] is None
    if (order == 1) start_.assign(sample, sample + n);
    const AlphaSigma t = FromSigma(sigmas_[step_index + 1]);
    if (order == 1) {
      const AlphaSigma s = FromSigma(sigmas_[step_index]);
      const SdeFactors f = Sde(t, s, t.lambda - s.lambda);
      for (size_t k = 0; k < n; ++k) sample[k] = (f.a * start_[k] + f.b * m0_[k]) + f.c * z[k];
      return OkStatus();
    }
    // singlestep_dpm_solver_second_order_update: from s1 (the pair's start)
    // over h = lambda_t - lambda_s1, D0 = m1, D1 = (1 / r0) (m0 - m1).
    const AlphaSigma s0 = FromSigma(sigmas_[step_index]), s1 = FromSigma(sigmas_[step_index - 1]);
    const float h = t.lambda - s1.lambda, h_0 = s0.lambda - s1.lambda;
    const float r0 = h_0 / h;
    const float inv_r0 = 1.0f / r0;
    const SdeFactors f = Sde(t, s1, h);
    const float e2 = std::exp(-2.0f * h);
    const float c = heun_ ? t.alpha * ((1.0f - e2) / (-2.0f * h) + 1.0f) : 0.5f * f.b;
    for (size_t k = 0; k < n; ++k) {
      const float d1 = inv_r0 * (m0_[k] - m1_[k]);
      sample[k] = ((f.a * start_[k] + f.b * m1_[k]) + c * d1) + f.c * z[k];
    }
    return OkStatus();
  }

  bool heun_;
  std::vector<int> orders_;
  std::vector<float> m0_, m1_;  // the newest and the previous x0 prediction (empty: None)
  std::vector<float> start_;    // the sample the current pair started from
};

// The checks both DPM classes share; `name` prefixes the errors.
Status CheckDpm(std::string_view name, std::string_view cls, const SchedulerConfig& c) {
  if (c.thresholding) return Unsupported(name, "thresholding", "true", "");
  if (c.variance_type && (*c.variance_type == "learned" || *c.variance_type == "learned_range")) {
    return Unsupported(name, "variance_type", "\"" + *c.variance_type + "\"", "");
  }
  if (c.prediction_type == "original_sample") {
    return InvalidArgumentError(std::string(name) + ": prediction_type \"original_sample\" is not supported by " +
                                std::string(cls) + " (epsilon, sample, v_prediction)");
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<Scheduler>> MakeMultistep(std::string name, const SchedulerConfig& c) {
  const std::string& alg = c.algorithm_type;
  if (alg == "sde-dpmsolver" && c.solver_order == 3) {
    return Unsupported(name, "solver_order", "3", "with algorithm_type \"sde-dpmsolver\": diffusers has no "
                                                  "third-order update for it");
  }
  if (alg != "dpmsolver++" && alg != "sde-dpmsolver++" && c.final_sigmas_type == "zero") {
    return InvalidArgumentError(name + ": final_sigmas_type \"zero\" is not supported with algorithm_type \"" + alg +
                                "\" (diffusers requires \"sigma_min\")");
  }
  TPUMESH_RETURN_IF_ERROR(CheckDpm(name, "DPMSolverMultistepScheduler", c));
  TPUMESH_ASSIGN_OR_RETURN(const SigmaSchedule schedule, ReadSigmaSchedule(name, c));
  if (c.use_lu_lambdas) return Unsupported(name, "use_lu_lambdas", "true", "");
  if (c.rescale_betas_zero_snr) return Unsupported(name, "rescale_betas_zero_snr", "true", "");
  // diffusers maps deis to dpmsolver++ and logrho/bh1/bh2 to midpoint.
  const bool sde = alg == "sde-dpmsolver++" || alg == "sde-dpmsolver";
  const bool plus_plus = alg == "dpmsolver++" || alg == "deis" || alg == "sde-dpmsolver++";
  const bool heun = c.solver_type == "heun";
  auto s = std::make_unique<DpmSolverMultistepScheduler>(std::move(name), c, plus_plus, heun, sde, schedule);
  TPUMESH_RETURN_IF_ERROR(s->Init());
  return std::unique_ptr<Scheduler>(std::move(s));
}

}  // namespace

StatusOr<std::unique_ptr<Scheduler>> MakeDpmSolverMultistep(const SchedulerConfig& c) {
  return MakeMultistep("dpmpp_2m", c);
}

StatusOr<std::unique_ptr<Scheduler>> MakeDpmSolverMultistepSde(const SchedulerConfig& c) {
  SchedulerConfig sde = c;
  sde.algorithm_type = "sde-dpmsolver++";
  return MakeMultistep("dpmpp_2m_sde", sde);
}

StatusOr<std::unique_ptr<Scheduler>> MakeDpmSolverSinglestepSde(const SchedulerConfig& c) {
  TPUMESH_RETURN_IF_ERROR(CheckDpm("dpmpp_2s_a", "DPMSolverSinglestepScheduler", c));
  TPUMESH_ASSIGN_OR_RETURN(const SigmaSchedule schedule, ReadSigmaSchedule("dpmpp_2s_a", c));
  SchedulerConfig two = c;
  two.algorithm_type = "sde-dpmsolver++";
  two.solver_order = 2;
  auto s = std::make_unique<DpmSolverSinglestepScheduler>(two, c.solver_type == "heun", schedule);
  TPUMESH_RETURN_IF_ERROR(s->Init());
  return std::unique_ptr<Scheduler>(std::move(s));
}

}  // namespace tpumesh::pipeline::internal
