// Internals of schedulers/schedulers.*: the numpy and torch routines diffusers'
// schedulers call, reproduced operation by operation, and each scheduler
// family's factory. Not part of the schedulers' API; tests may use it.
//
// Contract: every function returns what the named numpy 1.24 / torch 1.13
// (CPU, AVX2) routine returns, bit for bit, for the arguments diffusers
// passes; the comments say which routine and where the reproduction stops
// being exact.
#ifndef TPUMESH_SCHEDULERS_SCHEDULERS_INTERNAL_H_
#define TPUMESH_SCHEDULERS_SCHEDULERS_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "schedulers/schedulers.h"

namespace tpumesh::pipeline::internal {

// torch.linspace(start, end, steps, dtype=torch.float32) on the CPU. Its AVX2
// kernel writes 8-lane vectors base + j*step whose base, start + step*idx, GCC
// contracted into an FMA (as is the scalar tail); this reproduces that.
std::vector<float> TorchLinspaceF32(double start, double end, int64_t steps);
// np.linspace(start, stop, num) in float64 (endpoint=True).
std::vector<double> NumpyLinspace(double start, double stop, int64_t num);
// np.arange(start, stop, step) for a float step: the length is
// ceil((stop - start) / step) and element i is start + i * delta with
// delta = (start + step) - start, as numpy's fill does.
std::vector<double> NumpyArange(double start, double stop, double step);
// np.round / ndarray.round(): half to even.
double NumpyRound(double x);
// np.interp(x, np.arange(len(fp)), fp) for one x (float64).
double InterpUnitGrid(double x, const std::vector<double>& fp);
// torch.cumprod(x, 0) for f32 on the CPU: the product accumulates in double.
std::vector<float> TorchCumprodF32(const std::vector<float>& x);

// ((1 - alphas_cumprod) / alphas_cumprod) ** 0.5 in f32 torch, as float64
// (what np.array() of it gives to np.interp).
std::vector<double> TrainSigmas(const std::vector<float>& alphas_cumprod);

// Karras et al.'s schedule as diffusers' _convert_to_karras: n sigmas from
// sigma_max down to sigma_min, (max^(1/7) + ramp * (min^(1/7) - max^(1/7)))^7
// with ramp = np.linspace(0, 1, n), all float64.
std::vector<double> KarrasSigmas(double sigma_min, double sigma_max, int n);
// _convert_to_exponential: np.exp(np.linspace(log(sigma_max), log(sigma_min), n)).
std::vector<double> ExponentialSigmas(double sigma_min, double sigma_max, int n);
// _convert_to_beta (alpha = beta = 0.6): sigma_min + ppf * (sigma_max -
// sigma_min) for ppf = scipy.stats.beta.ppf(1 - np.linspace(0, 1, n), 0.6,
// 0.6), the inverse regularized incomplete beta found by bisection to a
// double's precision (scipy's boost ibeta_inv agrees to ~1e-15).
std::vector<double> BetaSigmas(double sigma_min, double sigma_max, int n);
// The regularized incomplete beta function I_x(a, b) (continued fraction).
double RegularizedIncompleteBeta(double x, double a, double b);
// np.log of the f32 training sigmas (numpy's f32 log; here glibc's logf).
std::vector<float> LogSigmasF32(const std::vector<float>& alphas_cumprod);
// diffusers' _sigma_to_t(sigma, log_sigmas): the fractional training timestep
// whose log sigma interpolates linearly to log(max(sigma, 1e-10)), in float64
// (numpy 2 promotion: the f32 log sigmas meet the f64 log sigma in f64, their
// own difference is f32).
double SigmaToT(double sigma, const std::vector<float>& log_sigmas);
// Which of use_karras_sigmas / use_exponential_sigmas / use_beta_sigmas is
// set: InvalidArgument for more than one (diffusers' ValueError). `name`
// prefixes the error.
enum class SigmaSchedule { kDefault, kKarras, kExponential, kBeta };
// KarrasSigmas, ExponentialSigmas or BetaSigmas by `schedule` (not kDefault).
std::vector<double> ConvertSigmas(SigmaSchedule schedule, double sigma_min, double sigma_max, int n);
StatusOr<SigmaSchedule> ReadSigmaSchedule(std::string_view name, const SchedulerConfig& c);

// The integral scipy.integrate.quad(f, a, b, epsrel=1e-4) returns for LMS's
// Lagrange basis polynomial f, evaluated as diffusers does: f32 torch scalars
// (tau rounded to f32, then (tau - s_k) / (s_c - s_k) multiplied up). QUADPACK
// (dqagse) accepts its first 21-point Gauss-Kronrod pass for these
// polynomials, or rarely its first bisection, both reproduced; were it to go
// further, the exact integral (within f32 noise of the adaptive answer) is
// returned instead.
double LmsCoefficient(const std::vector<float>& sigmas, int order, int t, int current_order);

// prediction_type, resolved once per scheduler ("original_sample" is
// Euler's alias of "sample").
enum class Prediction { kEpsilon, kVPrediction, kSample };
inline Prediction ToPrediction(const std::string& prediction_type) {
  return prediction_type == "epsilon"        ? Prediction::kEpsilon
         : prediction_type == "v_prediction" ? Prediction::kVPrediction
                                             : Prediction::kSample;
}

// One error line for a key/value the picked scheduler cannot run.
Status Unsupported(std::string_view scheduler, std::string_view key, std::string_view value,
                   std::string_view why);

StatusOr<std::unique_ptr<Scheduler>> MakePndm(const SchedulerConfig& c);
StatusOr<std::unique_ptr<Scheduler>> MakeDdim(const SchedulerConfig& c);
StatusOr<std::unique_ptr<Scheduler>> MakeLms(const SchedulerConfig& c);
StatusOr<std::unique_ptr<Scheduler>> MakeEuler(const SchedulerConfig& c);
StatusOr<std::unique_ptr<Scheduler>> MakeEulerAncestral(const SchedulerConfig& c);
StatusOr<std::unique_ptr<Scheduler>> MakeDpmSolverMultistep(const SchedulerConfig& c);
StatusOr<std::unique_ptr<Scheduler>> MakeHeun(const SchedulerConfig& c);
// dpmpp_2m with algorithm_type "sde-dpmsolver++".
StatusOr<std::unique_ptr<Scheduler>> MakeDpmSolverMultistepSde(const SchedulerConfig& c);
// DPMSolverSinglestepScheduler, solver_order 2, "sde-dpmsolver++".
StatusOr<std::unique_ptr<Scheduler>> MakeDpmSolverSinglestepSde(const SchedulerConfig& c);
// FlowMatchEulerDiscreteScheduler as FluxPipeline drives it.
StatusOr<std::unique_ptr<Scheduler>> MakeFlowMatchEuler(const SchedulerConfig& c);
// diffusers' calculate_shift (Python floats): mu of an image of
// image_seq_len tokens, linear from base_shift at base_image_seq_len to
// max_shift at max_image_seq_len.
double FlowMatchMu(const SchedulerConfig& c, int64_t image_seq_len);

}  // namespace tpumesh::pipeline::internal

#endif  // TPUMESH_SCHEDULERS_SCHEDULERS_INTERNAL_H_
