// FlowMatchEulerDiscreteScheduler (diffusers 0.30+), as FluxPipeline drives
// it: set_timesteps(sigmas=np.linspace(1.0, 1 / N, N), mu=calculate_shift(
// image_seq_len, ...)).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "schedulers/schedulers.h"
#include "schedulers/schedulers_internal.h"

namespace tpumesh::pipeline::internal {
namespace {

class FlowMatchEulerScheduler final : public Scheduler {
 public:
  explicit FlowMatchEulerScheduler(const SchedulerConfig& c) : Scheduler("flow_euler", c) {}

 private:
  // The sigmas in float64 numpy: shifted by time_shift(mu, 1.0, s) =
  // e^mu / (e^mu + (1 / s - 1)) with dynamic shifting, else shift s / (1 +
  // (shift - 1) s); then float32 (torch.from_numpy(...).to(float32)),
  // timesteps = sigmas * num_train_timesteps in f32, and a final sigma 0.
  Status DoSetTimesteps(int n) override {
    const std::vector<double> base = NumpyLinspace(1.0, 1.0 / n, n);
    double mu = 0;
    if (config_.use_dynamic_shifting) {
      if (!config_.image_seq_len)
        return InvalidArgumentError(
            "flow_euler: use_dynamic_shifting needs the image's token count (the Flux pipeline sets it)");
      mu = FlowMatchMu(config_, *config_.image_seq_len);
    }
    sigmas_.clear();
    timesteps_.clear();
    for (double s : base) {
      const double shifted = config_.use_dynamic_shifting
                                 ? std::exp(mu) / (std::exp(mu) + std::pow(1.0 / s - 1.0, 1.0))
                                 : config_.shift * s / (1.0 + (config_.shift - 1.0) * s);
      const float f = static_cast<float>(shifted);
      sigmas_.push_back(f);
      timesteps_.push_back(static_cast<double>(f * static_cast<float>(config_.num_train_timesteps)));
    }
    sigmas_.push_back(0.0f);
    return OkStatus();
  }

  // prev_sample = sample + (sigma_next - sigma) * model_output, in f32.
  Status DoStep(const float* mo, int step_index, float* sample, size_t n, const NoiseFn&) override {
    const float dt = sigmas_[step_index + 1] - sigmas_[step_index];
    for (size_t i = 0; i < n; ++i) sample[i] = sample[i] + dt * mo[i];
    return OkStatus();
  }

  // scale_noise: sigma * noise + (1 - sigma) * sample.
  void DoAddNoise(const float* original, const float* noise, int step_index, float* out, size_t n) const override {
    const float sigma = sigmas_[step_index];
    for (size_t i = 0; i < n; ++i) {
      const float a = sigma * noise[i];
      const float b = (1.0f - sigma) * original[i];
      out[i] = a + b;
    }
  }
};

}  // namespace

double FlowMatchMu(const SchedulerConfig& c, int64_t image_seq_len) {
  const double m = (c.max_shift - c.base_shift) / (c.max_image_seq_len - c.base_image_seq_len);
  const double b = c.base_shift - m * c.base_image_seq_len;
  return static_cast<double>(image_seq_len) * m + b;
}

StatusOr<std::unique_ptr<Scheduler>> MakeFlowMatchEuler(const SchedulerConfig& c) {
  if (c.use_dynamic_shifting && c.max_image_seq_len == c.base_image_seq_len)
    return InvalidArgumentError("flow_euler: max_image_seq_len must differ from base_image_seq_len");
  return std::unique_ptr<Scheduler>(std::make_unique<FlowMatchEulerScheduler>(c));
}

}  // namespace tpumesh::pipeline::internal
