// Diffusion schedulers that compute what diffusers 0.30.0 computes: the same
// timesteps, the same step arithmetic, in float32 where diffusers uses float32
// torch tensors and in float64 where it uses numpy, intermediate by
// intermediate (betas, alphas_cumprod, sigmas and the step math are f32; the
// timestep grids and sigma interpolation are f64 numpy).
//
//   name      diffusers class                  what is implemented
//   pndm      PNDMScheduler                    skip_prk_steps=true (PLMS with
//                                              the ets history, SD 1.x's default)
//   ddim      DDIMScheduler                    eta = 0, clip_sample
//   lms       LMSDiscreteScheduler             order 4
//   euler     EulerDiscreteScheduler           s_churn = 0 (the pipeline's call)
//   euler_a   EulerAncestralDiscreteScheduler  noise from a NoiseFn
//   dpmpp_2m  DPMSolverMultistepScheduler      solver_order 1-3, dpmsolver++ and
//                                              dpmsolver, midpoint and heun,
//                                              final_sigmas_type zero|sigma_min
//
// Contract:
// - A SchedulerConfig comes from diffusers' scheduler_config.json. As
//   diffusers' from_config, the keys are reused by whichever scheduler you
//   pick: a key the picked scheduler does not have is ignored, a key it has
//   but the file lacks takes that scheduler's default (timestep_spacing:
//   "leading" for pndm/ddim, "linspace" for the others; set_alpha_to_one:
//   false for pndm, true for ddim; clip_sample: true for ddim).
// - Errors, each one line naming the key and the value: a wrongly typed
//   value, or a value diffusers itself rejects (beta_schedule "foo"), is
//   InvalidArgument; a value diffusers accepts that tpumesh does not
//   implement (algorithm_type "sde-dpmsolver", use_karras_sigmas true,
//   thresholding true, skip_prk_steps false or unset, rescale_betas_zero_snr
//   true, timestep_type "continuous" with v_prediction, interpolation_type
//   "log_linear", variance_type "learned"/"learned_range", use_lu_lambdas
//   true, euler_a with prediction_type "sample") is Unimplemented, reported
//   by MakeScheduler for the scheduler that reads the key. An unknown
//   _class_name is InvalidArgument.
// - Keys ignored because they do not change these computations:
//   _class_name (checked, then only informative), _diffusers_version,
//   _use_default_values, dynamic_thresholding_ratio and sample_max_value
//   (thresholding only), sigma_min and sigma_max (Karras sigmas only), and any
//   key no scheduler here reads (e.g. variance_type when null, skip_prk_steps
//   for schedulers other than pndm).
// - A Scheduler holds the history (PNDM's ets, LMS's derivatives, DPM's model
//   outputs) of one batch of latents, which step together: every Step of a
//   run gets the same element count n (batch * C * H * W). Steps run in order
//   0, 1, ..., timesteps().size() - 1; SetTimesteps starts a new run.
// - Numerics: each f32 operation of diffusers' torch code is one f32
//   operation here, in the same order (torch.linspace as torch 1.13's AVX2
//   CPU kernel computes it, cumprod accumulating in double as torch's CPU
//   cumprod does, np.linspace/arange/interp/round as numpy 1.24). Against
//   diffusers 0.30.0 on torch 1.13 (tests/schedulers/schedulers_test.cc) every
//   timestep, sigma, beta and alphas_cumprod is equal, and PNDM, DDIM, LMS,
//   Euler and Euler-a steps are bit-identical. DPM differs by <= 4e-7
//   relative: torch takes its scalar log/exp from SLEEF (1 ulp from glibc's).
//   LMS's coefficients are what scipy's quad returns (QUADPACK's 21-point
//   Gauss-Kronrod pass, and its first bisection where quad takes it, with
//   the Lagrange basis evaluated in f32 as diffusers' torch scalars do).
//   The schedulers_*.cc sources are built with -ffp-contract=off.
// - Parity of EulerAncestral's noise with torch's generator is not possible:
//   the draws come from the caller's NoiseFn (per-device JAX-style keys in
//   the pipeline), so only the arithmetic around them matches diffusers.
#ifndef TPUMESH_SCHEDULERS_SCHEDULERS_H_
#define TPUMESH_SCHEDULERS_SCHEDULERS_H_

#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tpumesh::pipeline {

// The keys of diffusers' scheduler configs that tpumesh reads. Optional
// fields are those whose default differs between schedulers (unset: the
// picked scheduler's default).
struct SchedulerConfig {
  std::string class_name;  // _class_name; "" when absent
  int num_train_timesteps = 1000;
  double beta_start = 0.0001;
  double beta_end = 0.02;
  std::string beta_schedule = "linear";  // linear | scaled_linear | squaredcos_cap_v2
  std::optional<std::vector<double>> trained_betas;  // replaces the schedule
  std::string prediction_type = "epsilon";  // epsilon | v_prediction | sample
  std::optional<std::string> timestep_spacing;  // leading | trailing | linspace
  int steps_offset = 0;
  // PNDM and DDIM.
  std::optional<bool> set_alpha_to_one;
  std::optional<bool> skip_prk_steps;  // PNDM; diffusers' default false (PRK) is unimplemented
  std::optional<bool> clip_sample;     // DDIM
  double clip_sample_range = 1.0;
  bool thresholding = false;
  bool rescale_betas_zero_snr = false;
  // Euler, LMS, DPM.
  bool use_karras_sigmas = false;
  std::string interpolation_type = "linear";
  std::string timestep_type = "discrete";
  std::string final_sigmas_type = "zero";  // Euler, DPM: zero | sigma_min
  // DPM-Solver multistep.
  int solver_order = 2;
  std::string algorithm_type = "dpmsolver++";
  std::string solver_type = "midpoint";
  bool lower_order_final = true;
  bool euler_at_final = false;
  bool use_lu_lambdas = false;
  double lambda_min_clipped = -std::numeric_limits<double>::infinity();
  std::optional<std::string> variance_type;

  // Parses scheduler_config.json text; `origin` (a path) prefixes errors.
  // Accepts the bare -Infinity/Infinity/NaN tokens Python's json writes
  // (DPMSolverMultistep's lambda_min_clipped is saved as -Infinity).
  static StatusOr<SchedulerConfig> FromJson(std::string_view json, std::string_view origin);
  // An override, e.g. from --scheduler-opt prediction_type=v_prediction:
  // `value` is JSON (1000, 0.5, true, null, "text") or a bare string.
  // An unknown key is InvalidArgument (unlike in a config file).
  Status Set(std::string_view key, std::string_view value);
};

// Fills out[0..n) with N(0, 1) noise for the step `step_index` (Euler-
// ancestral's per-step draw, latent layout [batch, C, H, W]).
using NoiseFn = std::function<void(int step_index, float* out, size_t n)>;

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  std::string_view name() const { return name_; }  // "pndm", "ddim", ...
  const SchedulerConfig& config() const { return config_; }

  // Builds the timesteps for a run and clears the history. InvalidArgument
  // for num_inference_steps < 1 or > num_train_timesteps, or when the grid
  // indexes alphas_cumprod out of range (leading spacing with steps_offset).
  Status SetTimesteps(int num_inference_steps);
  // The UNet timestep of each model evaluation, as diffusers' values (PNDM
  // repeats one; Euler/LMS ones may be fractional). Its size is the number of
  // steps of a run, which is not always num_inference_steps (PNDM has one
  // more; numpy's arange makes trailing spacing give one more for some counts).
  const std::vector<double>& timesteps() const { return timesteps_; }
  int num_steps() const { return static_cast<int>(timesteps_.size()); }
  // Multiply the initial N(0,1) latents by this (in f32), as the pipeline's
  // prepare_latents does.
  float init_noise_sigma() const { return init_noise_sigma_; }
  // Scales the UNet input of `step_index` in place (Euler, Euler-a, LMS:
  // sample / sqrt(sigma^2 + 1); the others leave it unchanged).
  virtual void ScaleModelInput(float* sample, size_t n, int step_index) const {}
  // One step: sample[0..n) <- the previous (less noisy) sample, given the
  // guided model output. FailedPrecondition before SetTimesteps or out of
  // order; InvalidArgument when n differs from the run's first step or a
  // scheduler that draws noise gets no NoiseFn.
  Status Step(const float* model_output, int step_index, float* sample, size_t n,
              const NoiseFn& noise = nullptr);

  const std::vector<float>& betas() const { return betas_; }
  const std::vector<float>& alphas_cumprod() const { return alphas_cumprod_; }
  // The run's sigmas (timesteps().size() + 1 entries) for the sigma-based
  // schedulers (lms, euler, euler_a, dpmpp_2m); empty for pndm and ddim.
  const std::vector<float>& sigmas() const { return sigmas_; }

 protected:
  Scheduler(std::string name, const SchedulerConfig& config);
  // Fills betas_ and alphas_cumprod_ from the config.
  Status InitSchedule();
  virtual Status DoSetTimesteps(int num_inference_steps) = 0;
  virtual Status DoStep(const float* model_output, int step_index, float* sample, size_t n,
                        const NoiseFn& noise) = 0;
  virtual bool needs_noise() const { return false; }
  // The spacing in force (the config's or this scheduler's default).
  std::string Spacing(std::string_view default_spacing) const;

  std::string name_;
  SchedulerConfig config_;
  std::vector<float> betas_, alphas_cumprod_, sigmas_;
  std::vector<double> timesteps_;
  float init_noise_sigma_ = 1.0f;

 private:
  bool timesteps_set_ = false;
  int next_step_ = 0;
  size_t run_size_ = 0;
};

// pndm ddim lms euler euler_a dpmpp_2m
std::vector<std::string> SchedulerNames();
// InvalidArgument for an unknown name; InvalidArgument/Unimplemented for a
// config value (see the contract above).
StatusOr<std::unique_ptr<Scheduler>> MakeScheduler(std::string_view name, const SchedulerConfig& config);
// The tpumesh name of a diffusers _class_name ("PNDMScheduler" -> "pndm").
StatusOr<std::string> SchedulerNameOfClass(std::string_view class_name);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_SCHEDULERS_SCHEDULERS_H_
