// DPMSolverMultistepScheduler as diffusers 0.30.0's
// scheduling_dpmsolver_multistep.py: the deterministic algorithms (dpmsolver++
// and dpmsolver), solver_order 1-3, midpoint and heun, lower_order_final,
// euler_at_final, final_sigmas_type zero|sigma_min, lambda_min_clipped.
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

class DpmSolverMultistepScheduler final : public Scheduler {
 public:
  DpmSolverMultistepScheduler(const SchedulerConfig& c, bool plus_plus, bool heun)
      : Scheduler("dpmpp_2m", c), plus_plus_(plus_plus), heun_(heun) {}

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

 private:
  Status DoSetTimesteps(int n) override {
    const int n_train = config_.num_train_timesteps;
    // torch.searchsorted(torch.flip(lambda_t, [0]), lambda_min_clipped): the
    // first index whose value is >= the bound.
    int64_t clipped_idx = 0;
    const int64_t len = static_cast<int64_t>(lambda_t_.size());
    while (clipped_idx < len &&
           static_cast<double>(lambda_t_[len - 1 - clipped_idx]) < config_.lambda_min_clipped) {
      ++clipped_idx;
    }
    const int64_t last_timestep = n_train - clipped_idx;
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
    timesteps_.assign(ts.begin(), ts.end());
    sigmas_.clear();
    for (int64_t t : ts) sigmas_.push_back(static_cast<float>(InterpUnitGrid(static_cast<double>(t), train_sigmas_)));
    float sigma_last = 0.0f;
    if (config_.final_sigmas_type == "sigma_min") {
      const float a0 = alphas_cumprod_[0];
      sigma_last = std::sqrt((1.0f - a0) / a0);
    }
    sigmas_.push_back(sigma_last);
    model_outputs_.assign(config_.solver_order, {});
    lower_order_nums_ = 0;
    return OkStatus();
  }

  Status DoStep(const float* mo, int step_index, float* sample, size_t n, const NoiseFn&) override {
    const int len = num_steps();
    const int order = config_.solver_order;
    const bool lower_order_final =
        step_index == len - 1 && (config_.euler_at_final || (config_.lower_order_final && len < 15) ||
                                  config_.final_sigmas_type == "zero");
    const bool lower_order_second = step_index == len - 2 && config_.lower_order_final && len < 15;

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

  bool plus_plus_, heun_;
  std::vector<double> train_sigmas_;
  std::vector<float> lambda_t_;
  std::vector<std::vector<float>> model_outputs_;  // oldest first, solver_order slots
  int lower_order_nums_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Scheduler>> MakeDpmSolverMultistep(const SchedulerConfig& c) {
  const std::string& alg = c.algorithm_type;
  if (alg == "sde-dpmsolver++" || alg == "sde-dpmsolver") {
    return Unsupported("dpmpp_2m", "algorithm_type", "\"" + alg + "\"", "the SDE variants; use dpmsolver++");
  }
  if (alg != "dpmsolver++" && alg != "sde-dpmsolver++" && c.final_sigmas_type == "zero") {
    return InvalidArgumentError("dpmpp_2m: final_sigmas_type \"zero\" is not supported with algorithm_type \"" + alg +
                                "\" (diffusers requires \"sigma_min\")");
  }
  if (c.thresholding) return Unsupported("dpmpp_2m", "thresholding", "true", "");
  if (c.use_karras_sigmas) return Unsupported("dpmpp_2m", "use_karras_sigmas", "true", "");
  if (c.use_lu_lambdas) return Unsupported("dpmpp_2m", "use_lu_lambdas", "true", "");
  if (c.rescale_betas_zero_snr) return Unsupported("dpmpp_2m", "rescale_betas_zero_snr", "true", "");
  if (c.variance_type && (*c.variance_type == "learned" || *c.variance_type == "learned_range")) {
    return Unsupported("dpmpp_2m", "variance_type", "\"" + *c.variance_type + "\"", "");
  }
  if (c.prediction_type == "original_sample") {
    return InvalidArgumentError("dpmpp_2m: prediction_type \"original_sample\" is not supported by "
                                "DPMSolverMultistepScheduler (epsilon, sample, v_prediction)");
  }
  // diffusers maps deis to dpmsolver++ and logrho/bh1/bh2 to midpoint.
  const bool plus_plus = alg == "dpmsolver++" || alg == "deis";
  const bool heun = c.solver_type == "heun";
  auto s = std::make_unique<DpmSolverMultistepScheduler>(c, plus_plus, heun);
  TPUMESH_RETURN_IF_ERROR(s->Init());
  return std::unique_ptr<Scheduler>(std::move(s));
}

}  // namespace tpumesh::pipeline::internal
