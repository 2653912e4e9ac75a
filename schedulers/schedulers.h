// Diffusion schedulers that compute what diffusers computes: the same
// timesteps, the same step arithmetic, in float32 where diffusers uses float32
// torch tensors and in float64 where it uses numpy, intermediate by
// intermediate (betas, alphas_cumprod, sigmas and the step math are f32; the
// timestep grids, sigma interpolation and Karras/exponential/beta sigmas are f64
// numpy). The first six were written against diffusers 0.30.0; the sigma
// schedules and the samplers heun, dpmpp_2m_sde and dpmpp_2s_a against 0.42.1.
//
// The registry (one row per --scheduler name; SchedulerNames()):
//   name          diffusers class                  what is implemented
//   pndm          PNDMScheduler                    skip_prk_steps=true (PLMS with
//                                                  the ets history, SD 1.x's default)
//   ddim          DDIMScheduler                    eta = 0, clip_sample
//   lms           LMSDiscreteScheduler             order 4
//   euler         EulerDiscreteScheduler           s_churn = 0 (the pipeline's call)
//   euler_a       EulerAncestralDiscreteScheduler  noise from a NoiseFn
//   dpmpp_2m      DPMSolverMultistepScheduler      solver_order 1-3, dpmsolver++,
//                                                  dpmsolver, sde-dpmsolver++ and
//                                                  sde-dpmsolver (orders 1-2; the
//                                                  SDE ones draw from a NoiseFn),
//                                                  midpoint and heun,
//                                                  final_sigmas_type zero|sigma_min
//   heun          HeunDiscreteScheduler            2N-1 model calls for N steps
//                                                  (diffusers' interleaved timesteps),
//                                                  clip_sample
//   dpmpp_2m_sde  DPMSolverMultistepScheduler      dpmpp_2m with algorithm_type
//                                                  "sde-dpmsolver++" (A1111's DPM++
//                                                  2M SDE), noise from a NoiseFn
//   dpmpp_2s_a    DPMSolverSinglestepScheduler     solver_order 2, algorithm_type
//                                                  "sde-dpmsolver++" (both forced),
//                                                  midpoint and heun, noise from a
//                                                  NoiseFn
//   flow_euler    FlowMatchEulerDiscreteScheduler  Flux's: the sigmas FluxPipeline
//                                                  passes (np.linspace(1, 1/N, N)),
//                                                  shifted by `shift` or, with
//                                                  use_dynamic_shifting, by mu from
//                                                  image_seq_len (exponential);
//                                                  x += (sigma_next - sigma) v
// Sigma schedules: use_karras_sigmas (Karras et al., rho 7),
// use_exponential_sigmas and use_beta_sigmas (Beta(0.6, 0.6) quantiles) for
// lms, euler, euler_a, dpmpp_2m, dpmpp_2m_sde, heun and dpmpp_2s_a, computed
// as each class's set_timesteps does (euler also reads sigma_min/sigma_max).
// diffusers has no such option on EulerAncestralDiscreteScheduler: euler_a's
// Karras/exponential/beta schedule is
// the one EulerDiscreteScheduler computes from the same config, stepped by
// EulerAncestral's step (A1111's "Euler a" with schedule type Karras).
// dpmpp_2s_a: diffusers has no class for A1111's "DPM++ 2S a"; its docs call
// DPMSolverSinglestepScheduler "very similar". That class with solver_order 2
// and sde-dpmsolver++ is what runs: N model calls for N steps, each pair of
// timesteps one second-order singlestep update with fresh noise (k-diffusion's
// sample_dpmpp_2s_ancestral makes two calls per step at a lambda midpoint, so
// its images differ). Its timesteps ignore timestep_spacing, as diffusers'.
//
// Contract:
// - A SchedulerConfig comes from diffusers' scheduler_config.json. As
//   diffusers' from_config, the keys are reused by whichever scheduler you
//   pick: a key the picked scheduler does not have is ignored, a key it has
//   but the file lacks takes that scheduler's default (timestep_spacing:
//   "leading" for pndm/ddim, "linspace" for the others; set_alpha_to_one:
//   false for pndm, true for ddim; clip_sample: true for ddim, false for heun;
//   beta_start/beta_end: 0.00085/0.012 for heun, 0.0001/0.02 for the others;
//   lower_order_final: true for dpmpp_2m, false for dpmpp_2s_a).
// - Errors, each one line naming the key and the value: a wrongly typed
//   value, or a value diffusers itself rejects (beta_schedule "foo", two of
//   use_karras_sigmas/use_exponential_sigmas/use_beta_sigmas), is
//   InvalidArgument; a value diffusers accepts that tpumesh does not
//   implement (algorithm_type "sde-dpmsolver" with solver_order 3,
//   thresholding true, skip_prk_steps false or unset, rescale_betas_zero_snr
//   true, timestep_type "continuous" with v_prediction, interpolation_type
//   "log_linear", variance_type "learned"/"learned_range", use_lu_lambdas
//   true, euler_a with prediction_type "sample") is Unimplemented, reported
//   by MakeScheduler for the scheduler that reads the key. An unknown
//   _class_name is InvalidArgument.
// - Keys ignored because they do not change these computations:
//   _class_name (checked, then only informative), _diffusers_version,
//   _use_default_values, dynamic_thresholding_ratio and sample_max_value
//   (thresholding only), and any key no scheduler here reads (e.g.
//   variance_type when null, skip_prk_steps for schedulers other than pndm).
// - A Scheduler holds the history (PNDM's ets, LMS's derivatives, DPM's model
//   outputs, Heun's first-order half) of one batch of latents, which step
//   together: every Step of a run gets the same element count n (batch * C *
//   H * W). Steps run in order 0, 1, ..., timesteps().size() - 1, one model
//   call each; SetTimesteps starts a new run.
// - Numerics: each f32 operation of diffusers' torch code is one f32
//   operation here, in the same order (torch.linspace as torch 1.13's AVX2
//   CPU kernel computes it, cumprod accumulating in double as torch's CPU
//   cumprod does, np.linspace/arange/interp/round as numpy). Against
//   diffusers 0.30.0 on torch 1.13 (tests/schedulers/schedulers_test.cc) every
//   timestep, sigma, beta and alphas_cumprod is equal, and PNDM, DDIM, LMS,
//   Euler and Euler-a steps are bit-identical. DPM differs by <= 4e-7
//   relative: torch takes its scalar log/exp from SLEEF (1 ulp from glibc's).
//   Karras/exponential/beta sigmas and their timesteps (numpy's f32 log of the
//   training sigmas, f64 pow/exp, the _sigma_to_t interpolation) and the new
//   samplers are within 1e-6 relative of diffusers 0.42.1 on torch 2.15
//   given the same betas (tests/schedulers/samplers_test.cc,
//   tests/data/scheduler_ref_samplers.h5; measured worst: timesteps 6.3e-7,
//   sigmas 1.2e-7, one step 3.5e-7; numpy's SIMD log/exp/pow are not glibc's).
//   torch 2.15's linspace rounds start + step * i once per element, unlike
//   torch 1.13's AVX2 kernel reproduced here: its betas differ from ours by
//   <= 3.3e-7 relative.
//   LMS's coefficients are what scipy's quad returns (QUADPACK's 21-point
//   Gauss-Kronrod pass, and its first bisection where quad takes it, with
//   the Lagrange basis evaluated in f32 as diffusers' torch scalars do).
//   The schedulers_*.cc sources are built with -ffp-contract=off.
// - Parity of the drawn noise (euler_a, dpmpp_2m_sde, dpmpp_2s_a) with
//   torch's generator is not possible: the draws come from the caller's
//   NoiseFn (per-device JAX-style keys in the pipeline), one call per step,
//   so only the arithmetic around them matches diffusers.
#ifndef TPUMESH_SCHEDULERS_SCHEDULERS_H_
#define TPUMESH_SCHEDULERS_SCHEDULERS_H_

#include <cstddef>
#include <cstdint>
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
  std::optional<double> beta_start;  // unset: 0.0001 (0.00085 heun)
  std::optional<double> beta_end;    // unset: 0.02 (0.012 heun)
  std::string beta_schedule = "linear";  // linear | scaled_linear | squaredcos_cap_v2
  std::optional<std::vector<double>> trained_betas;  // replaces the schedule
  std::string prediction_type = "epsilon";  // epsilon | v_prediction | sample
  std::optional<std::string> timestep_spacing;  // leading | trailing | linspace
  int steps_offset = 0;
  // PNDM and DDIM.
  std::optional<bool> set_alpha_to_one;
  std::optional<bool> skip_prk_steps;  // PNDM; diffusers' default false (PRK) is unimplemented
  std::optional<bool> clip_sample;     // DDIM, Heun
  double clip_sample_range = 1.0;
  bool thresholding = false;
  bool rescale_betas_zero_snr = false;
  // Euler, LMS, Heun, DPM: the sigma schedule (at most one of the three).
  bool use_karras_sigmas = false;
  bool use_exponential_sigmas = false;
  bool use_beta_sigmas = false;
  std::optional<double> sigma_min, sigma_max;  // Euler's schedule bounds
  std::string interpolation_type = "linear";
  std::string timestep_type = "discrete";
  std::string final_sigmas_type = "zero";  // Euler, DPM: zero | sigma_min
  // DPM-Solver multistep.
  int solver_order = 2;
  std::string algorithm_type = "dpmsolver++";
  std::string solver_type = "midpoint";
  std::optional<bool> lower_order_final;  // unset: true (dpmpp_2m), false (dpmpp_2s_a)
  bool euler_at_final = false;
  bool use_lu_lambdas = false;
  double lambda_min_clipped = -std::numeric_limits<double>::infinity();
  std::optional<std::string> variance_type;
  // FlowMatchEulerDiscreteScheduler (flow_euler).
  double shift = 1.0;
  bool use_dynamic_shifting = false;
  double base_shift = 0.5, max_shift = 1.15;
  double base_image_seq_len = 256, max_image_seq_len = 4096;
  // Not a config key: the packed latent tokens of the run, which the Flux
  // pipeline sets before making the scheduler (diffusers' calculate_shift
  // turns it into set_timesteps' mu when use_dynamic_shifting is on).
  std::optional<int64_t> image_seq_len;

  // Parses scheduler_config.json text; `origin` (a path) prefixes errors.
  // Accepts the bare -Infinity/Infinity/NaN tokens Python's json writes
  // (DPMSolverMultistep's lambda_min_clipped is saved as -Infinity).
  static StatusOr<SchedulerConfig> FromJson(std::string_view json, std::string_view origin);
  // An override, e.g. from --scheduler-opt prediction_type=v_prediction:
  // `value` is JSON (1000, 0.5, true, null, "text") or a bare string.
  // An unknown key is InvalidArgument (unlike in a config file).
  Status Set(std::string_view key, std::string_view value);
};

// Fills out[0..n) with N(0, 1) noise for the step `step_index` (the per-step
// draw of euler_a, dpmpp_2m_sde and dpmpp_2s_a; latent layout [batch, C, H, W]).
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
  // repeats one; Euler/LMS/Heun ones may be fractional). Its size is the
  // number of steps (model calls) of a run, which is not always
  // num_inference_steps (PNDM has one more, Heun 2N-1; numpy's arange makes
  // trailing spacing give one more for some counts).
  const std::vector<double>& timesteps() const { return timesteps_; }
  int num_steps() const { return static_cast<int>(timesteps_.size()); }
  // Multiply the initial N(0,1) latents by this (in f32), as the pipeline's
  // prepare_latents does.
  float init_noise_sigma() const { return init_noise_sigma_; }
  // Scales the UNet input of `step_index` in place (Euler, Euler-a, LMS, Heun:
  // sample / sqrt(sigma^2 + 1); the others leave it unchanged).
  virtual void ScaleModelInput(float* sample, size_t n, int step_index) const {}
  // One step: sample[0..n) <- the previous (less noisy) sample, given the
  // guided model output. FailedPrecondition before SetTimesteps or out of
  // order; InvalidArgument when n differs from the run's first step or a
  // scheduler that draws noise gets no NoiseFn.
  Status Step(const float* model_output, int step_index, float* sample, size_t n,
              const NoiseFn& noise = nullptr);

  // diffusers' Scheduler.order: the model evaluations of one step (Heun's
  // 2). img2img starts the run at step t_start * order() (get_timesteps).
  virtual int order() const { return 1; }
  // img2img and inpainting (diffusers' set_begin_index): the run starts at
  // step `begin` of the timesteps, the first Step is step `begin` and the
  // history starts empty there. After SetTimesteps, before the first Step;
  // FailedPrecondition otherwise, InvalidArgument outside [0, num_steps()).
  Status SetBeginIndex(int begin);
  // diffusers' add_noise at the noise level of step `step_index` (any step
  // of the run, 0 <= step_index < num_steps(), else InvalidArgument):
  // out[i] <- original[i] noised with noise[i], each f32 operation as
  // diffusers' torch code. Sigma-based schedulers (lms, euler, euler_a and
  // those without an override): original + noise * sigma; alpha-based ones
  // (pndm, ddim): sqrt(alphas_cumprod[t]) * original + sqrt(1 -
  // alphas_cumprod[t]) * noise at the step's integer timestep t; DPM-Solver
  // overrides it with alpha_t * original + sigma_t * noise (alpha_t =
  // 1 / sqrt(sigma^2 + 1), sigma_t = sigma * alpha_t). `out` may be `original`.
  Status AddNoise(const float* original, const float* noise, int step_index, float* out, size_t n) const;

  const std::vector<float>& betas() const { return betas_; }
  const std::vector<float>& alphas_cumprod() const { return alphas_cumprod_; }
  // The run's sigmas (timesteps().size() + 1 entries; Heun's interleaved as
  // diffusers') for the sigma-based schedulers; empty for pndm and ddim.
  const std::vector<float>& sigmas() const { return sigmas_; }

 protected:
  Scheduler(std::string name, const SchedulerConfig& config);
  // Fills betas_ and alphas_cumprod_ from the config (beta_start/beta_end
  // unset: default_beta_start_/default_beta_end_).
  Status InitSchedule();
  virtual Status DoSetTimesteps(int num_inference_steps) = 0;
  virtual Status DoStep(const float* model_output, int step_index, float* sample, size_t n,
                        const NoiseFn& noise) = 0;
  virtual bool needs_noise() const { return false; }
  // AddNoise's arithmetic, step_index checked; the default is described there.
  virtual void DoAddNoise(const float* original, const float* noise, int step_index, float* out, size_t n) const;
  // The spacing in force (the config's or this scheduler's default).
  std::string Spacing(std::string_view default_spacing) const;

  std::string name_;
  SchedulerConfig config_;
  std::vector<float> betas_, alphas_cumprod_, sigmas_;
  std::vector<double> timesteps_;
  float init_noise_sigma_ = 1.0f;
  double default_beta_start_ = 0.0001, default_beta_end_ = 0.02;

 private:
  bool timesteps_set_ = false;
  int next_step_ = 0;
  size_t run_size_ = 0;
};

// The registry's names, in its order: pndm ddim lms euler euler_a dpmpp_2m
// heun dpmpp_2m_sde dpmpp_2s_a flow_euler.
std::vector<std::string> SchedulerNames();
// InvalidArgument for an unknown name; InvalidArgument/Unimplemented for a
// config value (see the contract above).
StatusOr<std::unique_ptr<Scheduler>> MakeScheduler(std::string_view name, const SchedulerConfig& config);
// The tpumesh name of a diffusers _class_name ("PNDMScheduler" -> "pndm",
// "DPMSolverMultistepScheduler" -> "dpmpp_2m", "HeunDiscreteScheduler" ->
// "heun"); DPMSolverSinglestepScheduler is not one (dpmpp_2s_a forces its
// algorithm), so such a config needs --scheduler.
StatusOr<std::string> SchedulerNameOfClass(std::string_view class_name);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_SCHEDULERS_SCHEDULERS_H_
