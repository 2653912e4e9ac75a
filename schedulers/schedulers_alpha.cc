// The alphas_cumprod-indexed schedulers: PNDM (PLMS steps) and DDIM (eta 0),
// as diffusers 0.30.0's scheduling_pndm.py and scheduling_ddim.py. Integer
// timesteps index alphas_cumprod as Python does (a negative index counts from
// the end, which trailing spacing can produce).
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

// Spacing grids of PNDM and DDIM (int64 in diffusers), in ascending order.
std::vector<int64_t> LinspaceInts(int n_train, int n) {
  std::vector<int64_t> t;
  for (double x : NumpyLinspace(0, n_train - 1, n)) t.push_back(static_cast<int64_t>(NumpyRound(x)));
  return t;
}

// Shared by PNDM and DDIM: alphas_cumprod[t] with Python's indexing, the
// final alpha, and the range check that diffusers leaves to torch's indexing.
class AlphaScheduler : public Scheduler {
 protected:
  using Scheduler::Scheduler;

  Status InitAlpha(bool set_alpha_to_one_default) {
    TPUMESH_RETURN_IF_ERROR(InitSchedule());
    final_alpha_cumprod_ = config_.set_alpha_to_one.value_or(set_alpha_to_one_default) ? 1.0f : alphas_cumprod_[0];
    return OkStatus();
  }
  Status CheckIndex(int64_t t) const {
    const int64_t n = static_cast<int64_t>(alphas_cumprod_.size());
    if (t < -n || t >= n) {
      return InvalidArgumentError(name_ + ": timestep " + std::to_string(t) + " is outside alphas_cumprod (" +
                                  std::to_string(n) + " entries; steps_offset " +
                                  std::to_string(config_.steps_offset) + ", timestep_spacing " +
                                  Spacing("leading") + ")");
    }
    return OkStatus();
  }
  float AlphaAt(int64_t t) const {
    return alphas_cumprod_[t < 0 ? t + static_cast<int64_t>(alphas_cumprod_.size()) : t];
  }
  float AlphaPrev(int64_t prev) const { return prev >= 0 ? AlphaAt(prev) : final_alpha_cumprod_; }

  float final_alpha_cumprod_ = 1.0f;
};

// ---------------------------------------------------------------------------
// PNDMScheduler with skip_prk_steps: step_plms.

class PndmScheduler final : public AlphaScheduler {
 public:
  explicit PndmScheduler(const SchedulerConfig& c) : AlphaScheduler("pndm", c) {}
  Status Init() { return InitAlpha(/*set_alpha_to_one_default=*/false); }

 private:
  Status DoSetTimesteps(int n) override {
    const int n_train = config_.num_train_timesteps;
    const std::string spacing = Spacing("leading");
    std::vector<int64_t> ts;  // self._timesteps, ascending
    if (spacing == "linspace") {
      ts = LinspaceInts(n_train, n);
    } else if (spacing == "leading") {
      const int64_t ratio = n_train / n;
      for (int64_t i = 0; i < n; ++i) ts.push_back(i * ratio + config_.steps_offset);
    } else {
      const std::vector<double> a = NumpyArange(n_train, 0, -(static_cast<double>(n_train) / n));
      for (auto it = a.rbegin(); it != a.rend(); ++it) ts.push_back(static_cast<int64_t>(NumpyRound(*it)) - 1);
    }
    // plms_timesteps = concat([ts[:-1], ts[-2:-1], ts[-1:]])[::-1]
    std::vector<int64_t> plms(ts.begin(), ts.end() - 1);
    if (ts.size() >= 2) plms.push_back(ts[ts.size() - 2]);
    plms.push_back(ts.back());
    timesteps_int_.assign(plms.rbegin(), plms.rend());
    step_ratio_ = n_train / n;
    for (size_t i = 0; i < timesteps_int_.size(); ++i) {
      const int64_t t = timesteps_int_[i];
      TPUMESH_RETURN_IF_ERROR(CheckIndex(i == 1 ? t + step_ratio_ : t));
      const int64_t prev = i == 1 ? t : t - step_ratio_;
      if (prev >= 0) TPUMESH_RETURN_IF_ERROR(CheckIndex(prev));
    }
    timesteps_.assign(timesteps_int_.begin(), timesteps_int_.end());
    ets_.clear();
    cur_sample_.clear();
    counter_ = 0;
    return OkStatus();
  }

  Status DoStep(const float* mo, int step_index, float* sample, size_t n, const NoiseFn&) override {
    int64_t timestep = timesteps_int_[step_index];
    int64_t prev_timestep = timestep - step_ratio_;
    if (counter_ != 1) {
      if (ets_.size() > 3) ets_.erase(ets_.begin(), ets_.end() - 3);
      ets_.emplace_back(mo, mo + n);
    } else {
      prev_timestep = timestep;
      timestep = timestep + step_ratio_;
    }
    std::vector<float> eps(n);
    const float* x = sample;  // the sample the step starts from
    const size_t k = ets_.size();
    if (k == 1 && counter_ == 0) {
      eps.assign(mo, mo + n);
      cur_sample_.assign(sample, sample + n);
    } else if (k == 1 && counter_ == 1) {
      const float* e1 = ets_[0].data();
      for (size_t i = 0; i < n; ++i) eps[i] = (mo[i] + e1[i]) / 2.0f;
      x = cur_sample_.data();
    } else if (k == 2) {
      const float *e1 = ets_[1].data(), *e2 = ets_[0].data();
      for (size_t i = 0; i < n; ++i) eps[i] = (3.0f * e1[i] - e2[i]) / 2.0f;
    } else if (k == 3) {
      const float *e1 = ets_[2].data(), *e2 = ets_[1].data(), *e3 = ets_[0].data();
      for (size_t i = 0; i < n; ++i) eps[i] = (23.0f * e1[i] - 16.0f * e2[i] + 5.0f * e3[i]) / 12.0f;
    } else {
      const float *e1 = ets_[3].data(), *e2 = ets_[2].data(), *e3 = ets_[1].data(), *e4 = ets_[0].data();
      const float c = static_cast<float>(1.0 / 24.0);
      for (size_t i = 0; i < n; ++i) {
        eps[i] = c * (55.0f * e1[i] - 59.0f * e2[i] + 37.0f * e3[i] - 9.0f * e4[i]);
      }
    }
    PrevSample(x, timestep, prev_timestep, eps.data(), sample, n);
    if (k == 1 && counter_ == 1) cur_sample_.clear();
    ++counter_;
    return OkStatus();
  }

  // _get_prev_sample; `x` may alias `out`.
  void PrevSample(const float* x, int64_t timestep, int64_t prev_timestep, float* eps, float* out,
                  size_t n) const {
    const float a_t = AlphaAt(timestep), a_prev = AlphaPrev(prev_timestep);
    const float b_t = 1.0f - a_t, b_prev = 1.0f - a_prev;
    if (ToPrediction(config_.prediction_type) == Prediction::kVPrediction) {
      const float sa = std::sqrt(a_t), sb = std::sqrt(b_t);
      for (size_t i = 0; i < n; ++i) eps[i] = sa * eps[i] + sb * x[i];
    }
    const float sample_coeff = std::sqrt(a_prev / a_t);
    const float denom = a_t * std::sqrt(b_prev) + std::sqrt(a_t * b_t * a_prev);
    const float diff = a_prev - a_t;
    for (size_t i = 0; i < n; ++i) out[i] = sample_coeff * x[i] - diff * eps[i] / denom;
  }

  std::vector<int64_t> timesteps_int_;
  int64_t step_ratio_ = 1;
  std::vector<std::vector<float>> ets_;  // oldest first, at most 4
  std::vector<float> cur_sample_;
  int counter_ = 0;
};

// ---------------------------------------------------------------------------
// DDIMScheduler, eta = 0.

class DdimScheduler final : public AlphaScheduler {
 public:
  explicit DdimScheduler(const SchedulerConfig& c) : AlphaScheduler("ddim", c) {}
  Status Init() { return InitAlpha(/*set_alpha_to_one_default=*/true); }

 private:
  Status DoSetTimesteps(int n) override {
    const int n_train = config_.num_train_timesteps;
    const std::string spacing = Spacing("leading");
    std::vector<int64_t> ts;  // descending
    if (spacing == "linspace") {
      ts = LinspaceInts(n_train, n);
      std::reverse(ts.begin(), ts.end());
    } else if (spacing == "leading") {
      const int64_t ratio = n_train / n;
      for (int64_t i = n - 1; i >= 0; --i) ts.push_back(i * ratio + config_.steps_offset);
    } else {
      for (double x : NumpyArange(n_train, 0, -(static_cast<double>(n_train) / n))) {
        ts.push_back(static_cast<int64_t>(NumpyRound(x)) - 1);
      }
    }
    step_ratio_ = n_train / n;
    for (int64_t t : ts) {
      TPUMESH_RETURN_IF_ERROR(CheckIndex(t));
      if (t - step_ratio_ >= 0) TPUMESH_RETURN_IF_ERROR(CheckIndex(t - step_ratio_));
    }
    timesteps_int_ = ts;
    timesteps_.assign(ts.begin(), ts.end());
    return OkStatus();
  }

  Status DoStep(const float* mo, int step_index, float* sample, size_t n, const NoiseFn&) override {
    const int64_t timestep = timesteps_int_[step_index];
    const int64_t prev_timestep = timestep - step_ratio_;
    const float a_t = AlphaAt(timestep), a_prev = AlphaPrev(prev_timestep);
    const float b_t = 1.0f - a_t, b_prev = 1.0f - a_prev;
    const float sa = std::sqrt(a_t), sb = std::sqrt(b_t);
    // _get_variance, and std_dev_t = eta * variance ** 0.5 with eta = 0.0.
    const float variance = (b_prev / b_t) * (1.0f - a_t / a_prev);
    const float std_dev_t = 0.0f * std::sqrt(variance);
    const float dir_coeff = std::sqrt(1.0f - a_prev - std_dev_t * std_dev_t);
    const float sa_prev = std::sqrt(a_prev);
    const bool clip = config_.clip_sample.value_or(true);
    const float r = static_cast<float>(config_.clip_sample_range);
    const Prediction pt = ToPrediction(config_.prediction_type);
    for (size_t i = 0; i < n; ++i) {
      const float x = sample[i], m = mo[i];
      float x0, eps;
      if (pt == Prediction::kEpsilon) {
        x0 = (x - sb * m) / sa;
        eps = m;
      } else if (pt == Prediction::kSample) {
        x0 = m;
        eps = (x - sa * x0) / sb;
      } else {
        x0 = sa * x - sb * m;
        eps = sa * m + sb * x;
      }
      if (clip && !std::isnan(x0)) x0 = std::min(std::max(x0, -r), r);
      sample[i] = sa_prev * x0 + dir_coeff * eps;
    }
    return OkStatus();
  }

  std::vector<int64_t> timesteps_int_;
  int64_t step_ratio_ = 1;
};

}  // namespace

StatusOr<std::unique_ptr<Scheduler>> MakePndm(const SchedulerConfig& c) {
  if (!c.skip_prk_steps.value_or(false)) {
    return Unsupported("pndm", "skip_prk_steps", c.skip_prk_steps ? "false" : "unset (diffusers' default false)",
                       "the Runge-Kutta warm-up; SD 1.x configs set skip_prk_steps true");
  }
  if (c.prediction_type != "epsilon" && c.prediction_type != "v_prediction") {
    return InvalidArgumentError("pndm: prediction_type \"" + c.prediction_type +
                                "\" is not supported by PNDMScheduler (epsilon, v_prediction)");
  }
  auto s = std::make_unique<PndmScheduler>(c);
  TPUMESH_RETURN_IF_ERROR(s->Init());
  return std::unique_ptr<Scheduler>(std::move(s));
}

StatusOr<std::unique_ptr<Scheduler>> MakeDdim(const SchedulerConfig& c) {
  if (c.thresholding) return Unsupported("ddim", "thresholding", "true", "");
  if (c.rescale_betas_zero_snr) return Unsupported("ddim", "rescale_betas_zero_snr", "true", "");
  if (c.prediction_type == "original_sample") {
    return InvalidArgumentError("ddim: prediction_type \"original_sample\" is not supported by DDIMScheduler "
                                "(epsilon, sample, v_prediction)");
  }
  auto s = std::make_unique<DdimScheduler>(c);
  TPUMESH_RETURN_IF_ERROR(s->Init());
  return std::unique_ptr<Scheduler>(std::move(s));
}

}  // namespace tpumesh::pipeline::internal
