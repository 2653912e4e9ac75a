// The k-diffusion-style schedulers that step in sigma: LMSDiscrete (order 4),
// EulerDiscrete, EulerAncestralDiscrete and HeunDiscrete, as diffusers'
// scheduling_lms_discrete.py, scheduling_euler_discrete.py,
// scheduling_euler_ancestral_discrete.py (0.30.0 = 0.42.1 there) and
// scheduling_heun_discrete.py (0.42.1). Timesteps are float32 numpy values;
// sigmas are np.interp (float64) of the f32 training sigmas, or Karras /
// exponential sigmas (float64) with _sigma_to_t timesteps, stored as f32.
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

class SigmaScheduler : public Scheduler {
 public:
  void ScaleModelInput(float* sample, size_t n, int step_index) const override {
    const float sigma = sigmas_[step_index];
    const float denom = std::sqrt(sigma * sigma + 1.0f);
    for (size_t i = 0; i < n; ++i) sample[i] = sample[i] / denom;
  }

 protected:
  using Scheduler::Scheduler;

  Status Init() {
    TPUMESH_ASSIGN_OR_RETURN(schedule_, ReadSigmaSchedule(name_, config_));
    TPUMESH_RETURN_IF_ERROR(InitSchedule());
    train_sigmas_ = TrainSigmas(alphas_cumprod_);
    // Until SetTimesteps: the training sigmas, descending, and 0 (Euler's
    // __init__; informational only).
    std::vector<float> s(train_sigmas_.rbegin(), train_sigmas_.rend());
    s.push_back(0.0f);
    sigmas_ = s;
    SetInitNoiseSigma();
    return OkStatus();
  }

  // The timestep grid (f32) and sigmas of LMS, Euler, Euler-a and Heun (before
  // its interleaving); the last sigma is `sigma_last`. With Karras,
  // exponential or beta sigmas, n of them span the grid's interpolated sigmas (or
  // the config's sigma_min/sigma_max when `config_bounds`, Euler's rule),
  // each timestep _sigma_to_t of its sigma.
  void SetSigmaTimesteps(int n, float sigma_last, bool config_bounds = false) {
    const int n_train = config_.num_train_timesteps;
    const std::string spacing = Spacing("linspace");
    std::vector<float> ts;
    if (spacing == "linspace") {
      const std::vector<double> y = NumpyLinspace(0, n_train - 1, n);
      for (auto it = y.rbegin(); it != y.rend(); ++it) ts.push_back(static_cast<float>(*it));
    } else if (spacing == "leading") {
      const int64_t ratio = n_train / n;
      for (int64_t i = n - 1; i >= 0; --i) {
        ts.push_back(static_cast<float>(i * ratio) + static_cast<float>(config_.steps_offset));
      }
    } else {
      for (double x : NumpyArange(n_train, 0, -(static_cast<double>(n_train) / n))) {
        ts.push_back(static_cast<float>(NumpyRound(x)) - 1.0f);
      }
    }
    std::vector<double> sig;
    for (float t : ts) sig.push_back(InterpUnitGrid(t, train_sigmas_));
    if (schedule_ != SigmaSchedule::kDefault) {
      // in_sigmas[-1].item(), in_sigmas[0].item() unless the config sets them.
      const double lo = config_bounds && config_.sigma_min ? *config_.sigma_min : sig.back();
      const double hi = config_bounds && config_.sigma_max ? *config_.sigma_max : sig.front();
      sig = ConvertSigmas(schedule_, lo, hi, n);
      const std::vector<float> log_sigmas = LogSigmasF32(alphas_cumprod_);
      ts.clear();
      for (double x : sig) ts.push_back(static_cast<float>(SigmaToT(x, log_sigmas)));
    }
    timesteps_.assign(ts.begin(), ts.end());
    sigmas_.clear();
    for (double x : sig) sigmas_.push_back(static_cast<float>(x));
    sigmas_.push_back(sigma_last);
    SetInitNoiseSigma();
  }

  void SetInitNoiseSigma() {
    const float max_sigma = *std::max_element(sigmas_.begin(), sigmas_.end());
    const std::string spacing = Spacing("linspace");
    init_noise_sigma_ = spacing == "linspace" || spacing == "trailing" ? max_sigma
                                                                       : std::sqrt(max_sigma * max_sigma + 1.0f);
  }

  // pred_original_sample for epsilon / v_prediction / sample at sigma.
  struct X0 {
    Prediction kind;
    float sigma, v_out, v_in;
    X0(Prediction k, float s) : kind(k), sigma(s) {
      v_out = -s / std::sqrt(s * s + 1.0f);
      v_in = s * s + 1.0f;
    }
    float operator()(float x, float m) const {
      switch (kind) {
        case Prediction::kEpsilon: return x - sigma * m;
        case Prediction::kVPrediction: return m * v_out + x / v_in;
        case Prediction::kSample: return m;
      }
      return m;
    }
  };
  Prediction prediction() const { return ToPrediction(config_.prediction_type); }

  std::vector<double> train_sigmas_;  // float64 of the f32 training sigmas
  SigmaSchedule schedule_ = SigmaSchedule::kDefault;
};

// ---------------------------------------------------------------------------

class LmsScheduler final : public SigmaScheduler {
 public:
  explicit LmsScheduler(const SchedulerConfig& c) : SigmaScheduler("lms", c) {}
  using SigmaScheduler::Init;

 private:
  static constexpr int kOrder = 4;

  Status DoSetTimesteps(int n) override {
    SetSigmaTimesteps(n, 0.0f);
    derivatives_.clear();
    return OkStatus();
  }

  Status DoStep(const float* mo, int step_index, float* sample, size_t n, const NoiseFn&) override {
    const X0 x0(prediction(), sigmas_[step_index]);
    const float sigma = sigmas_[step_index];
    std::vector<float> d(n);
    for (size_t i = 0; i < n; ++i) d[i] = (sample[i] - x0(sample[i], mo[i])) / sigma;
    derivatives_.push_back(std::move(d));
    if (static_cast<int>(derivatives_.size()) > kOrder) derivatives_.erase(derivatives_.begin());
    const int order = std::min(step_index + 1, kOrder);
    // coeff * derivative for coeff, derivative in zip(coeffs, reversed(derivatives)),
    // summed from Python's 0; each coefficient a Python float -> f32.
    std::vector<float> coeffs(order);
    for (int c = 0; c < order; ++c) coeffs[c] = static_cast<float>(LmsCoefficient(sigmas_, order, step_index, c));
    const int newest = static_cast<int>(derivatives_.size()) - 1;
    for (size_t i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int c = 0; c < order && newest - c >= 0; ++c) sum = sum + coeffs[c] * derivatives_[newest - c][i];
      sample[i] = sample[i] + sum;
    }
    return OkStatus();
  }

  std::vector<std::vector<float>> derivatives_;  // oldest first
};

// ---------------------------------------------------------------------------

class EulerScheduler final : public SigmaScheduler {
 public:
  explicit EulerScheduler(const SchedulerConfig& c) : SigmaScheduler("euler", c) {}
  using SigmaScheduler::Init;

 private:
  Status DoSetTimesteps(int n) override {
    float sigma_last = 0.0f;
    if (config_.final_sigmas_type == "sigma_min") {
      const float a0 = alphas_cumprod_[0];
      sigma_last = std::sqrt((1.0f - a0) / a0);
    }
    SetSigmaTimesteps(n, sigma_last, /*config_bounds=*/true);
    return OkStatus();
  }

  // step() as the pipeline calls it (s_churn = 0): gamma = 0, so sigma_hat =
  // sigma * (0 + 1) is sigma exactly and no noise is added (diffusers still
  // draws it from the generator; nothing here consumes a NoiseFn).
  Status DoStep(const float* mo, int step_index, float* sample, size_t n, const NoiseFn&) override {
    const float sigma_hat = sigmas_[step_index];
    const X0 x0(prediction(), sigma_hat);
    const float dt = sigmas_[step_index + 1] - sigma_hat;
    for (size_t i = 0; i < n; ++i) {
      const float x = sample[i];
      const float derivative = (x - x0(x, mo[i])) / sigma_hat;
      sample[i] = x + derivative * dt;
    }
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------

class EulerAncestralScheduler final : public SigmaScheduler {
 public:
  explicit EulerAncestralScheduler(const SchedulerConfig& c) : SigmaScheduler("euler_a", c) {}
  using SigmaScheduler::Init;

 private:
  bool needs_noise() const override { return true; }

  // With Karras/exponential/beta sigmas: EulerDiscreteScheduler's schedule
  // (final_sigmas_type "zero", sigma_min/sigma_max read), see schedulers.h.
  Status DoSetTimesteps(int n) override {
    SetSigmaTimesteps(n, 0.0f, /*config_bounds=*/true);
    return OkStatus();
  }

  Status DoStep(const float* mo, int step_index, float* sample, size_t n, const NoiseFn& noise) override {
    const float sigma = sigmas_[step_index];
    const X0 x0(prediction(), sigma);
    const float sf = sigmas_[step_index], st = sigmas_[step_index + 1];
    const float sigma_up = std::sqrt(st * st * (sf * sf - st * st) / (sf * sf));
    const float sigma_down = std::sqrt(st * st - sigma_up * sigma_up);
    const float dt = sigma_down - sigma;
    std::vector<float> z(n);
    noise(step_index, z.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const float x = sample[i];
      const float derivative = (x - x0(x, mo[i])) / sigma;
      const float prev = x + derivative * dt;
      sample[i] = prev + z[i] * sigma_up;
    }
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------

// HeunDiscreteScheduler: sigmas [s0, s1, s1, ..., s_{N-1}, s_{N-1}, 0] and
// timesteps [t0, t1, t1, ..., t_{N-1}, t_{N-1}]: even steps are Euler steps
// (first order) that keep their derivative, odd steps correct them (second
// order) from the kept sample.
class HeunScheduler final : public SigmaScheduler {
 public:
  explicit HeunScheduler(const SchedulerConfig& c) : SigmaScheduler("heun", c) {
    default_beta_start_ = 0.00085;
    default_beta_end_ = 0.012;
  }
  using SigmaScheduler::Init;
  int order() const override { return 2; }

 private:
  Status DoSetTimesteps(int n) override {
    SetSigmaTimesteps(n, 0.0f);
    // torch.cat([sigmas[:1], sigmas[1:-1].repeat_interleave(2), sigmas[-1:]])
    // and torch.cat([timesteps[:1], timesteps[1:].repeat_interleave(2)]).
    std::vector<float> s{sigmas_.front()};
    for (size_t i = 1; i + 1 < sigmas_.size(); ++i) s.insert(s.end(), 2, sigmas_[i]);
    s.push_back(sigmas_.back());
    std::vector<double> t{timesteps_.front()};
    for (size_t i = 1; i < timesteps_.size(); ++i) t.insert(t.end(), 2, timesteps_[i]);
    sigmas_ = std::move(s);
    timesteps_ = std::move(t);
    prev_derivative_.clear();
    first_sample_.clear();
    SetInitNoiseSigma();
    return OkStatus();
  }

  Status DoStep(const float* mo, int step_index, float* sample, size_t n, const NoiseFn&) override {
    // State from the history, not the index parity: a run may begin at any
    // step (img2img), diffusers' state_in_first_order is `dt is None`.
    const bool first_order = prev_derivative_.empty();
    const float sigma = first_order ? sigmas_[step_index] : sigmas_[step_index - 1];
    const float sigma_next = first_order ? sigmas_[step_index + 1] : sigmas_[step_index];
    const float sigma_hat = sigma;  // sigma * (gamma + 1), gamma = 0
    const X0 x0(prediction(), first_order ? sigma_hat : sigma_next);
    const bool clip = config_.clip_sample.value_or(false);
    const float range = static_cast<float>(config_.clip_sample_range);
    auto pred = [&](float x, float m) {
      const float p = x0(x, m);
      return clip ? std::min(std::max(p, -range), range) : p;
    };
    if (first_order) {
      const float dt = sigma_next - sigma_hat;
      prev_derivative_.resize(n);
      first_sample_.assign(sample, sample + n);
      for (size_t i = 0; i < n; ++i) {
        const float x = sample[i];
        const float derivative = (x - pred(x, mo[i])) / sigma_hat;
        prev_derivative_[i] = derivative;
        sample[i] = x + derivative * dt;
      }
      dt_ = dt;
    } else {
      for (size_t i = 0; i < n; ++i) {
        const float x = sample[i];
        const float d2 = (x - pred(x, mo[i])) / sigma_next;
        const float derivative = (prev_derivative_[i] + d2) / 2.0f;
        sample[i] = first_sample_[i] + derivative * dt_;
      }
      prev_derivative_.clear();
      first_sample_.clear();
    }
    return OkStatus();
  }

  std::vector<float> prev_derivative_, first_sample_;  // empty: first order next
  float dt_ = 0.0f;
};

Status CheckCommonSigma(std::string_view name, const SchedulerConfig& c) {
  return ReadSigmaSchedule(name, c).status();
}

Status PredictionNotIn(std::string_view name, std::string_view cls, const SchedulerConfig& c,
                       std::initializer_list<std::string_view> allowed) {
  std::string list;
  for (std::string_view a : allowed) {
    if (c.prediction_type == a) return OkStatus();
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  return InvalidArgumentError(std::string(name) + ": prediction_type \"" + c.prediction_type +
                              "\" is not supported by " + std::string(cls) + " (" + list + ")");
}

}  // namespace

StatusOr<std::unique_ptr<Scheduler>> MakeLms(const SchedulerConfig& c) {
  TPUMESH_RETURN_IF_ERROR(CheckCommonSigma("lms", c));
  TPUMESH_RETURN_IF_ERROR(PredictionNotIn("lms", "LMSDiscreteScheduler", c, {"epsilon", "v_prediction", "sample"}));
  auto s = std::make_unique<LmsScheduler>(c);
  TPUMESH_RETURN_IF_ERROR(s->Init());
  return std::unique_ptr<Scheduler>(std::move(s));
}

StatusOr<std::unique_ptr<Scheduler>> MakeEuler(const SchedulerConfig& c) {
  TPUMESH_RETURN_IF_ERROR(CheckCommonSigma("euler", c));
  if (c.rescale_betas_zero_snr) return Unsupported("euler", "rescale_betas_zero_snr", "true", "");
  if (c.interpolation_type != "linear") return Unsupported("euler", "interpolation_type", "\"" + c.interpolation_type + "\"", "");
  if (c.timestep_type == "continuous" && c.prediction_type == "v_prediction") {
    return Unsupported("euler", "timestep_type", "\"continuous\"", "with v_prediction");
  }
  auto s = std::make_unique<EulerScheduler>(c);
  TPUMESH_RETURN_IF_ERROR(s->Init());
  return std::unique_ptr<Scheduler>(std::move(s));
}

StatusOr<std::unique_ptr<Scheduler>> MakeHeun(const SchedulerConfig& c) {
  TPUMESH_RETURN_IF_ERROR(CheckCommonSigma("heun", c));
  TPUMESH_RETURN_IF_ERROR(
      PredictionNotIn("heun", "HeunDiscreteScheduler", c, {"epsilon", "v_prediction", "sample"}));
  auto s = std::make_unique<HeunScheduler>(c);
  TPUMESH_RETURN_IF_ERROR(s->Init());
  return std::unique_ptr<Scheduler>(std::move(s));
}

StatusOr<std::unique_ptr<Scheduler>> MakeEulerAncestral(const SchedulerConfig& c) {
  TPUMESH_RETURN_IF_ERROR(CheckCommonSigma("euler_a", c));
  if (c.rescale_betas_zero_snr) return Unsupported("euler_a", "rescale_betas_zero_snr", "true", "");
  if (c.prediction_type == "sample") {
    return Unsupported("euler_a", "prediction_type", "\"sample\"", "EulerAncestralDiscreteScheduler raises for it too");
  }
  TPUMESH_RETURN_IF_ERROR(
      PredictionNotIn("euler_a", "EulerAncestralDiscreteScheduler", c, {"epsilon", "v_prediction"}));
  auto s = std::make_unique<EulerAncestralScheduler>(c);
  TPUMESH_RETURN_IF_ERROR(s->Init());
  return std::unique_ptr<Scheduler>(std::move(s));
}

}  // namespace tpumesh::pipeline::internal
