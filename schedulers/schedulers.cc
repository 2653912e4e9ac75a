// SchedulerConfig parsing, the Scheduler base class, the factory, and the
// numpy/torch routines the schedulers share (schedulers_internal.h).
#include "schedulers/schedulers.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "nlohmann/json.hpp"
#include "schedulers/schedulers_internal.h"

namespace tpumesh::pipeline {
namespace {

using Json = nlohmann::json;

// The scheduler registry (the table in schedulers.h): --scheduler name, the
// diffusers class, whether a config's _class_name maps to this name, and the
// factory.
struct Registered {
  const char* name;
  const char* class_name;
  bool of_class;
  StatusOr<std::unique_ptr<Scheduler>> (*make)(const SchedulerConfig&);
};
constexpr std::array<Registered, 10> kRegistry = {{
    {"pndm", "PNDMScheduler", true, internal::MakePndm},
    {"ddim", "DDIMScheduler", true, internal::MakeDdim},
    {"lms", "LMSDiscreteScheduler", true, internal::MakeLms},
    {"euler", "EulerDiscreteScheduler", true, internal::MakeEuler},
    {"euler_a", "EulerAncestralDiscreteScheduler", true, internal::MakeEulerAncestral},
    {"dpmpp_2m", "DPMSolverMultistepScheduler", true, internal::MakeDpmSolverMultistep},
    {"heun", "HeunDiscreteScheduler", true, internal::MakeHeun},
    {"dpmpp_2m_sde", "DPMSolverMultistepScheduler", false, internal::MakeDpmSolverMultistepSde},
    {"dpmpp_2s_a", "DPMSolverSinglestepScheduler", false, internal::MakeDpmSolverSinglestepSde},
    {"flow_euler", "FlowMatchEulerDiscreteScheduler", true, internal::MakeFlowMatchEuler},
}};

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Python's json module writes inf/nan as the bare tokens -Infinity, Infinity
// and NaN, which are not JSON: turn them into strings outside string literals.
std::string QuoteNonFiniteTokens(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    if (ch == '"') {
      in_string = true;
      out += ch;
      continue;
    }
    bool replaced = false;
    for (std::string_view token : {"-Infinity", "Infinity", "NaN"}) {
      if (text.substr(i, token.size()) == token) {
        out += Quote(token);
        i += token.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += ch;
  }
  return out;
}

std::string Shown(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// Reads one typed value; errors name the key and the value.
class KeyReader {
 public:
  KeyReader(std::string_view where, std::string_view key, const Json& v)
      : where_(where), key_(key), v_(v) {}

  Status Error(std::string_view what) const {
    return InvalidArgumentError(std::string(where_) + ": " + std::string(key_) + " " + Shown(v_) + " " +
                                std::string(what));
  }
  Status Int(int* out) const {
    if (v_.is_number_integer()) {
      const int64_t x = v_.get<int64_t>();
      if (x < INT32_MIN || x > INT32_MAX) return Error("is out of range");
      *out = static_cast<int>(x);
      return OkStatus();
    }
    if (v_.is_number_float()) {
      const double x = v_.get<double>();
      if (x == std::floor(x) && std::fabs(x) < 2e9) {
        *out = static_cast<int>(x);
        return OkStatus();
      }
    }
    return Error("must be an integer");
  }
  Status Double(double* out) const {
    if (v_.is_number()) {
      *out = v_.get<double>();
      return OkStatus();
    }
    if (v_.is_string()) {
      const std::string s = v_.get<std::string>();
      if (s == "-Infinity") *out = -std::numeric_limits<double>::infinity();
      else if (s == "Infinity") *out = std::numeric_limits<double>::infinity();
      else if (s == "NaN") *out = std::numeric_limits<double>::quiet_NaN();
      else return Error("must be a number");
      return OkStatus();
    }
    return Error("must be a number");
  }
  // A number from lo to hi (docs/cli.md); NaN is outside every range.
  Status DoubleWithin(double* out, double lo, double hi, std::string_view range) const {
    double x = 0;
    TPUMESH_RETURN_IF_ERROR(Double(&x));
    if (!(x >= lo && x <= hi)) return Error("must be " + std::string(range));
    *out = x;
    return OkStatus();
  }
  // A number, or null for the scheduler's default.
  Status OptionalDouble(std::optional<double>* out) const {
    if (v_.is_null()) {
      out->reset();
      return OkStatus();
    }
    double x = 0;
    TPUMESH_RETURN_IF_ERROR(Double(&x));
    *out = x;
    return OkStatus();
  }
  Status Bool(bool* out) const {
    if (!v_.is_boolean()) return Error("must be true or false");
    *out = v_.get<bool>();
    return OkStatus();
  }
  // Optional[bool] = False in diffusers: null reads as false.
  Status OptionalFalse(bool* out) const {
    if (v_.is_null()) {
      *out = false;
      return OkStatus();
    }
    return Bool(out);
  }
  Status OptionalBool(std::optional<bool>* out) const {
    if (v_.is_null()) {
      out->reset();
      return OkStatus();
    }
    bool b = false;
    TPUMESH_RETURN_IF_ERROR(Bool(&b));
    *out = b;
    return OkStatus();
  }
  // A string that must be one of `allowed` (what diffusers accepts).
  Status OneOf(std::initializer_list<std::string_view> allowed, std::string* out) const {
    std::string list;
    for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    if (!v_.is_string()) return Error("must be a string, one of: " + list);
    const std::string s = v_.get<std::string>();
    for (std::string_view a : allowed) {
      if (s == a) {
        *out = s;
        return OkStatus();
      }
    }
    return Error("is not supported (diffusers accepts: " + list + ")");
  }
  Status OptionalString(std::optional<std::string>* out) const {
    if (v_.is_null()) {
      out->reset();
      return OkStatus();
    }
    if (!v_.is_string()) return Error("must be a string or null");
    *out = v_.get<std::string>();
    return OkStatus();
  }
  Status DoubleList(std::optional<std::vector<double>>* out) const {
    if (v_.is_null()) {
      out->reset();
      return OkStatus();
    }
    if (!v_.is_array()) return Error("must be a list of numbers or null");
    std::vector<double> xs;
    for (const Json& x : v_) {
      if (!x.is_number()) return Error("must be a list of numbers or null");
      xs.push_back(x.get<double>());
    }
    *out = std::move(xs);
    return OkStatus();
  }

 private:
  std::string_view where_, key_;
  const Json& v_;
};

// Sets `key` of `c` from `v`. *known is false for a key tpumesh does not read.
Status ApplyKey(SchedulerConfig& c, const std::string& key, const Json& v, std::string_view where,
                bool* known) {
  *known = true;
  const KeyReader r(where, key, v);
  if (key == "num_train_timesteps") {
    TPUMESH_RETURN_IF_ERROR(r.Int(&c.num_train_timesteps));
    if (c.num_train_timesteps < 1 || c.num_train_timesteps > 100000) return r.Error("must be from 1 to 100000");
    return OkStatus();
  }
  // beta_start and beta_end: checked through the schedule they make (every
  // beta in [0, 1), InitSchedule), as trained_betas are.
  if (key == "beta_start") return r.OptionalDouble(&c.beta_start);
  if (key == "beta_end") return r.OptionalDouble(&c.beta_end);
  if (key == "beta_schedule") return r.OneOf({"linear", "scaled_linear", "squaredcos_cap_v2"}, &c.beta_schedule);
  if (key == "trained_betas") return r.DoubleList(&c.trained_betas);
  if (key == "prediction_type") {
    return r.OneOf({"epsilon", "v_prediction", "sample", "original_sample"}, &c.prediction_type);
  }
  if (key == "timestep_spacing") {
    if (v.is_null()) {
      c.timestep_spacing.reset();
      return OkStatus();
    }
    std::string s;
    TPUMESH_RETURN_IF_ERROR(r.OneOf({"leading", "trailing", "linspace"}, &s));
    c.timestep_spacing = s;
    return OkStatus();
  }
  if (key == "steps_offset") {
    // Below num_train_timesteps too, checked when the schedule is made
    // (either key may come first).
    TPUMESH_RETURN_IF_ERROR(r.Int(&c.steps_offset));
    if (c.steps_offset < 0 || c.steps_offset > 99999) return r.Error("must be from 0 to 99999");
    return OkStatus();
  }
  if (key == "set_alpha_to_one") return r.OptionalBool(&c.set_alpha_to_one);
  if (key == "skip_prk_steps") return r.OptionalBool(&c.skip_prk_steps);
  if (key == "clip_sample") return r.OptionalBool(&c.clip_sample);
  if (key == "clip_sample_range")
    return r.DoubleWithin(&c.clip_sample_range, std::numeric_limits<double>::min(), 1e6,
                          "above 0, at most 1e6");
  if (key == "thresholding") return r.Bool(&c.thresholding);
  if (key == "rescale_betas_zero_snr") return r.Bool(&c.rescale_betas_zero_snr);
  if (key == "use_karras_sigmas") return r.OptionalFalse(&c.use_karras_sigmas);
  if (key == "use_exponential_sigmas") return r.OptionalFalse(&c.use_exponential_sigmas);
  if (key == "use_beta_sigmas") return r.OptionalFalse(&c.use_beta_sigmas);
  if (key == "sigma_min" || key == "sigma_max") {
    // Euler's Karras/exponential/beta bounds: null (the schedule's own) or a
    // positive finite number.
    std::optional<double>& out = key == "sigma_min" ? c.sigma_min : c.sigma_max;
    if (v.is_null()) {
      out.reset();
      return OkStatus();
    }
    double x = 0;
    TPUMESH_RETURN_IF_ERROR(
        r.DoubleWithin(&x, std::numeric_limits<double>::min(), 1e6, "null or above 0, at most 1e6"));
    out = x;
    return OkStatus();
  }
  if (key == "interpolation_type") return r.OneOf({"linear", "log_linear"}, &c.interpolation_type);
  if (key == "timestep_type") return r.OneOf({"discrete", "continuous"}, &c.timestep_type);
  if (key == "final_sigmas_type") return r.OneOf({"zero", "sigma_min"}, &c.final_sigmas_type);
  if (key == "solver_order") {
    TPUMESH_RETURN_IF_ERROR(r.Int(&c.solver_order));
    if (c.solver_order < 1 || c.solver_order > 3) return r.Error("is not supported (diffusers: 1, 2 or 3)");
    return OkStatus();
  }
  if (key == "algorithm_type") {
    return r.OneOf({"dpmsolver++", "dpmsolver", "sde-dpmsolver++", "sde-dpmsolver", "deis"}, &c.algorithm_type);
  }
  if (key == "solver_type") return r.OneOf({"midpoint", "heun", "logrho", "bh1", "bh2"}, &c.solver_type);
  if (key == "lower_order_final") return r.OptionalBool(&c.lower_order_final);
  if (key == "euler_at_final") return r.Bool(&c.euler_at_final);
  if (key == "use_lu_lambdas") return r.OptionalFalse(&c.use_lu_lambdas);
  if (key == "lambda_min_clipped")
    return r.DoubleWithin(&c.lambda_min_clipped, -std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::max(), "-Infinity or a finite number");
  if (key == "variance_type") return r.OptionalString(&c.variance_type);
  // FlowMatchEulerDiscreteScheduler.
  if (key == "shift") return r.DoubleWithin(&c.shift, std::numeric_limits<double>::min(), 1e6, "above 0, at most 1e6");
  if (key == "use_dynamic_shifting") return r.Bool(&c.use_dynamic_shifting);
  if (key == "base_shift") return r.DoubleWithin(&c.base_shift, -1e6, 1e6, "from -1e6 to 1e6");
  if (key == "max_shift") return r.DoubleWithin(&c.max_shift, -1e6, 1e6, "from -1e6 to 1e6");
  if (key == "base_image_seq_len") return r.DoubleWithin(&c.base_image_seq_len, 1, 1e9, "from 1 to 1e9");
  if (key == "max_image_seq_len") return r.DoubleWithin(&c.max_image_seq_len, 1, 1e9, "from 1 to 1e9");
  if (key == "time_shift_type") {
    std::string t;
    return r.OneOf({"exponential"}, &t);
  }
  for (const char* off : {"invert_sigmas", "stochastic_sampling"})
    if (key == off) {
      bool b = false;
      TPUMESH_RETURN_IF_ERROR(r.Bool(&b));
      return b ? r.Error("is not supported (only false)") : OkStatus();
    }
  *known = false;
  return OkStatus();
}

}  // namespace

StatusOr<SchedulerConfig> SchedulerConfig::FromJson(std::string_view json, std::string_view origin) {
  const std::string where = "scheduler config " + std::string(origin);
  Json j = Json::parse(QuoteNonFiniteTokens(json), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError(where + ": not valid JSON");
  if (!j.is_object()) return InvalidArgumentError(where + ": not a JSON object");
  SchedulerConfig c;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (key == "_class_name") {
      if (!it->is_string()) return InvalidArgumentError(where + ": _class_name must be a string");
      c.class_name = it->get<std::string>();
      TPUMESH_RETURN_IF_ERROR(SchedulerNameOfClass(c.class_name).status().WithContext(where));
      continue;
    }
    bool known = false;
    TPUMESH_RETURN_IF_ERROR(ApplyKey(c, key, *it, where, &known));
  }
  return c;
}

Status SchedulerConfig::Set(std::string_view key, std::string_view value) {
  Json v = Json::parse(QuoteNonFiniteTokens(value), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) v = std::string(value);  // a bare string: v_prediction
  bool known = false;
  TPUMESH_RETURN_IF_ERROR(ApplyKey(*this, std::string(key), v, "scheduler option", &known));
  if (!known) return InvalidArgumentError("scheduler option: unknown key " + Quote(key));
  return OkStatus();
}

// --- Scheduler ------------------------------------------------------------

Scheduler::Scheduler(std::string name, const SchedulerConfig& config)
    : name_(std::move(name)), config_(config) {}

std::string Scheduler::Spacing(std::string_view default_spacing) const {
  return config_.timestep_spacing.value_or(std::string(default_spacing));
}

Status Scheduler::InitSchedule() {
  const int n = config_.num_train_timesteps;
  // Timesteps run from steps_offset up to n - 1 + steps_offset at most: past
  // n they index nothing (alpha schedulers) or feed the UNet a time it was
  // never trained on (sigma schedulers).
  if (config_.steps_offset < 0 || config_.steps_offset >= n)
    return InvalidArgumentError(name_ + ": steps_offset " + std::to_string(config_.steps_offset) +
                                " must be from 0 to " + std::to_string(n - 1) + " (below num_train_timesteps " +
                                std::to_string(n) + ")");
  const double beta_start = config_.beta_start.value_or(default_beta_start_);
  const double beta_end = config_.beta_end.value_or(default_beta_end_);
  if (config_.trained_betas) {
    // torch.tensor(trained_betas, dtype=torch.float32)
    if (static_cast<int>(config_.trained_betas->size()) != n) {
      return InvalidArgumentError(name_ + ": trained_betas has " + std::to_string(config_.trained_betas->size()) +
                                  " values, num_train_timesteps is " + std::to_string(n));
    }
    betas_.assign(config_.trained_betas->begin(), config_.trained_betas->end());
  } else if (config_.beta_schedule == "linear") {
    betas_ = internal::TorchLinspaceF32(beta_start, beta_end, n);
  } else if (config_.beta_schedule == "scaled_linear") {
    // torch.linspace(beta_start**0.5, beta_end**0.5, n, dtype=float32) ** 2
    betas_ = internal::TorchLinspaceF32(std::pow(beta_start, 0.5), std::pow(beta_end, 0.5), n);
    for (float& b : betas_) b = b * b;
  } else if (config_.beta_schedule == "squaredcos_cap_v2") {
    // betas_for_alpha_bar: Python floats, then torch.tensor(..., float32).
    constexpr double kPi = 3.141592653589793;
    auto alpha_bar = [&](double t) { return std::pow(std::cos((t + 0.008) / 1.008 * kPi / 2), 2.0); };
    betas_.resize(n);
    for (int i = 0; i < n; ++i) {
      const double t1 = static_cast<double>(i) / n, t2 = static_cast<double>(i + 1) / n;
      betas_[i] = static_cast<float>(std::min(1 - alpha_bar(t2) / alpha_bar(t1), 0.999));
    }
  } else {
    return InvalidArgumentError(name_ + ": beta_schedule " + Quote(config_.beta_schedule) + " is not supported");
  }
  // A noise schedule is betas in [0, 1): anything else (negative beta_start,
  // beta_end >= 1, NaN) would make every image noise or black without a word.
  for (size_t i = 0; i < betas_.size(); ++i)
    if (!(betas_[i] >= 0.0f && betas_[i] < 1.0f))
      return InvalidArgumentError(name_ + ": the noise schedule has beta[" + std::to_string(i) + "] = " +
                                  std::to_string(betas_[i]) + ", outside [0, 1) (beta_start " +
                                  std::to_string(beta_start) + ", beta_end " +
                                  std::to_string(beta_end) + ", beta_schedule " + config_.beta_schedule +
                                  (config_.trained_betas ? ", trained_betas" : "") + ")");
  std::vector<float> alphas(betas_.size());
  for (size_t i = 0; i < betas_.size(); ++i) alphas[i] = 1.0f - betas_[i];
  alphas_cumprod_ = internal::TorchCumprodF32(alphas);
  return OkStatus();
}

Status Scheduler::SetTimesteps(int num_inference_steps) {
  if (num_inference_steps < 1) {
    return InvalidArgumentError(name_ + ": num_inference_steps must be >= 1, got " +
                                std::to_string(num_inference_steps));
  }
  if (num_inference_steps > config_.num_train_timesteps) {
    return InvalidArgumentError(name_ + ": num_inference_steps " + std::to_string(num_inference_steps) +
                                " cannot be larger than num_train_timesteps " +
                                std::to_string(config_.num_train_timesteps));
  }
  timesteps_set_ = false;
  TPUMESH_RETURN_IF_ERROR(DoSetTimesteps(num_inference_steps));
  timesteps_set_ = true;
  next_step_ = 0;
  run_size_ = 0;
  return OkStatus();
}

Status Scheduler::SetBeginIndex(int begin) {
  if (!timesteps_set_) return FailedPreconditionError(name_ + ": SetBeginIndex before SetTimesteps");
  if (run_size_ != 0) return FailedPreconditionError(name_ + ": SetBeginIndex after the run's first step");
  if (begin < 0 || begin >= num_steps()) {
    return InvalidArgumentError(name_ + ": begin index " + std::to_string(begin) + " outside the run's " +
                                std::to_string(num_steps()) + " steps");
  }
  next_step_ = begin;
  return OkStatus();
}

Status Scheduler::AddNoise(const float* original, const float* noise, int step_index, float* out,
                           size_t n) const {
  if (!timesteps_set_) return FailedPreconditionError(name_ + ": AddNoise before SetTimesteps");
  if (step_index < 0 || step_index >= num_steps()) {
    return InvalidArgumentError(name_ + ": AddNoise at step " + std::to_string(step_index) + " outside the run's " +
                                std::to_string(num_steps()) + " steps");
  }
  DoAddNoise(original, noise, step_index, out, n);
  return OkStatus();
}

void Scheduler::DoAddNoise(const float* original, const float* noise, int step_index, float* out,
                           size_t n) const {
  if (!sigmas_.empty()) {
    // original_samples + noise * sigma (sigmas[step_indices]).
    const float sigma = sigmas_[step_index];
    for (size_t i = 0; i < n; ++i) out[i] = original[i] + noise[i] * sigma;
    return;
  }
  // alphas_cumprod[timesteps] ** 0.5 (torch's pow by 0.5 is a sqrt) and
  // (1 - alphas_cumprod[timesteps]) ** 0.5, then a * x + b * noise.
  const float a = alphas_cumprod_[static_cast<size_t>(timesteps_[step_index])];
  const float sqrt_alpha = std::sqrt(a), sqrt_one_minus = std::sqrt(1.0f - a);
  for (size_t i = 0; i < n; ++i) {
    const float x = sqrt_alpha * original[i];
    const float e = sqrt_one_minus * noise[i];
    out[i] = x + e;
  }
}

Status Scheduler::Step(const float* model_output, int step_index, float* sample, size_t n,
                       const NoiseFn& noise) {
  if (!timesteps_set_) return FailedPreconditionError(name_ + ": Step before SetTimesteps");
  if (next_step_ >= num_steps()) {
    return FailedPreconditionError(name_ + ": the run's " + std::to_string(num_steps()) +
                                   " steps are done; SetTimesteps starts a new run");
  }
  if (step_index != next_step_) {
    return FailedPreconditionError(name_ + ": step " + std::to_string(step_index) + " out of order, step " +
                                   std::to_string(next_step_) + " is next (steps run in order)");
  }
  if (n == 0) return InvalidArgumentError(name_ + ": Step on an empty sample");
  if (run_size_ != 0 && n != run_size_) {
    return InvalidArgumentError(name_ + ": step " + std::to_string(step_index) + " has " + std::to_string(n) +
                                " elements, the run's history has " + std::to_string(run_size_));
  }
  if (needs_noise() && !noise) {
    return InvalidArgumentError(name_ + ": Step needs a NoiseFn (it draws noise every step)");
  }
  TPUMESH_RETURN_IF_ERROR(DoStep(model_output, step_index, sample, n, noise));
  run_size_ = n;
  ++next_step_;
  return OkStatus();
}

// --- Factory --------------------------------------------------------------

std::vector<std::string> SchedulerNames() {
  std::vector<std::string> names;
  for (const Registered& r : kRegistry) names.emplace_back(r.name);
  return names;
}

StatusOr<std::string> SchedulerNameOfClass(std::string_view class_name) {
  std::string known;
  for (const Registered& r : kRegistry) {
    if (!r.of_class) continue;
    if (class_name == r.class_name) return std::string(r.name);
    known += (known.empty() ? "" : ", ") + std::string(r.class_name);
  }
  return InvalidArgumentError("_class_name " + Quote(class_name) + " is not a scheduler tpumesh implements (" +
                              known + ")");
}

StatusOr<std::unique_ptr<Scheduler>> MakeScheduler(std::string_view name, const SchedulerConfig& config) {
  for (const Registered& r : kRegistry)
    if (name == r.name) return r.make(config);
  std::string names;
  for (const std::string& n : SchedulerNames()) names += (names.empty() ? "" : ", ") + n;
  return InvalidArgumentError("unknown scheduler " + Quote(name) + " (one of: " + names + ")");
}

// --- numpy / torch routines ----------------------------------------------

namespace internal {

Status Unsupported(std::string_view scheduler, std::string_view key, std::string_view value,
                   std::string_view why) {
  return UnimplementedError(std::string(scheduler) + ": " + std::string(key) + " " + std::string(value) +
                            " is not implemented" + (why.empty() ? "" : " (" + std::string(why) + ")"));
}

std::vector<float> TorchLinspaceF32(double start_d, double end_d, int64_t steps) {
  std::vector<float> out(std::max<int64_t>(steps, 0));
  if (steps <= 0) return out;
  const float start = static_cast<float>(start_d), end = static_cast<float>(end_d);
  if (steps == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  // start + step * idx and end - step * k, contracted into one rounding.
  auto base = [&](int64_t idx) {
    return idx < halfway ? std::fma(step, static_cast<float>(idx), start)
                         : std::fma(-step, static_cast<float>(steps - idx - 1), end);
  };
  constexpr int64_t kLanes = 8;  // Vectorized<float>::size() under AVX2
  int64_t i = 0;
  for (; i + 2 * kLanes <= steps; i += 2 * kLanes) {
    for (int64_t v = i; v < i + 2 * kLanes; v += kLanes) {
      const float b = base(v);
      for (int64_t j = 0; j < kLanes; ++j) out[v + j] = b + static_cast<float>(j) * step;
    }
  }
  for (; i < steps; ++i) out[i] = base(i);
  return out;
}

std::vector<double> NumpyLinspace(double start, double stop, int64_t num) {
  std::vector<double> y(std::max<int64_t>(num, 0));
  if (num <= 0) return y;
  const double delta = stop - start;
  if (num == 1) {
    y[0] = 0.0 * delta + start;
    return y;
  }
  const double div = static_cast<double>(num - 1);
  const double step = delta / div;
  for (int64_t i = 0; i < num; ++i) {
    const double fi = static_cast<double>(i);
    y[i] = (step == 0 ? fi / div * delta : fi * step) + start;
  }
  y[num - 1] = stop;
  return y;
}

std::vector<double> NumpyArange(double start, double stop, double step) {
  const double len = std::ceil((stop - start) / step);
  if (!(len > 0)) return {};
  const int64_t n = static_cast<int64_t>(len);
  std::vector<double> y(n);
  y[0] = start;
  if (n == 1) return y;
  y[1] = start + step;
  const double delta = y[1] - y[0];
  for (int64_t i = 2; i < n; ++i) y[i] = start + static_cast<double>(i) * delta;
  return y;
}

double NumpyRound(double x) { return std::nearbyint(x); }  // default mode: half to even

double InterpUnitGrid(double x, const std::vector<double>& fp) {
  const int64_t len = static_cast<int64_t>(fp.size());
  if (std::isnan(x)) return x;
  if (x < 0) return fp[0];
  if (x >= static_cast<double>(len - 1)) return fp[len - 1];
  const int64_t j = static_cast<int64_t>(std::floor(x));
  const double xj = static_cast<double>(j);
  if (xj == x) return fp[j];
  const double slope = (fp[j + 1] - fp[j]) / ((xj + 1) - xj);
  double r = slope * (x - xj) + fp[j];
  if (std::isnan(r)) {
    r = slope * (x - (xj + 1)) + fp[j + 1];
    if (std::isnan(r) && fp[j] == fp[j + 1]) r = fp[j];
  }
  return r;
}

std::vector<float> TorchCumprodF32(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  double acc = 1.0;
  for (size_t i = 0; i < x.size(); ++i) {
    acc *= static_cast<double>(x[i]);
    out[i] = static_cast<float>(acc);
  }
  return out;
}

std::vector<double> TrainSigmas(const std::vector<float>& alphas_cumprod) {
  std::vector<double> s(alphas_cumprod.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const float a = alphas_cumprod[i];
    s[i] = static_cast<double>(std::sqrt((1.0f - a) / a));
  }
  return s;
}

std::vector<double> KarrasSigmas(double sigma_min, double sigma_max, int n) {
  constexpr double kRho = 7.0;
  const std::vector<double> ramp = NumpyLinspace(0, 1, n);
  const double min_inv_rho = std::pow(sigma_min, 1 / kRho), max_inv_rho = std::pow(sigma_max, 1 / kRho);
  std::vector<double> out(ramp.size());
  for (size_t i = 0; i < ramp.size(); ++i) out[i] = std::pow(max_inv_rho + ramp[i] * (min_inv_rho - max_inv_rho), kRho);
  return out;
}

std::vector<double> ExponentialSigmas(double sigma_min, double sigma_max, int n) {
  std::vector<double> out = NumpyLinspace(std::log(sigma_max), std::log(sigma_min), n);
  for (double& x : out) x = std::exp(x);
  return out;
}

double RegularizedIncompleteBeta(double x, double a, double b) {
  if (!(x > 0)) return 0.0;
  if (!(x < 1)) return 1.0;
  // The continued fraction converges fast for x < (a + 1) / (a + b + 2);
  // above, I_x(a, b) = 1 - I_{1-x}(b, a).
  if (x > (a + 1) / (a + b + 2)) return 1.0 - RegularizedIncompleteBeta(1.0 - x, b, a);
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) +
                                 b * std::log1p(-x));
  // Lentz's method on 1 / (1 + d1 / (1 + d2 / (1 + ...))).
  constexpr double kTiny = 1e-300;
  double f = 1.0, c = 1.0, d = 0.0;
  for (int i = 0; i <= 400; ++i) {
    const int m = i / 2;
    double num;
    if (i == 0) {
      num = 1.0;
    } else if (i % 2 == 0) {
      num = (m * (b - m) * x) / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
    } else {
      num = -((a + m) * (a + b + m) * x) / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
    }
    d = 1.0 + num * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    d = 1.0 / d;
    c = 1.0 + num / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    const double cd = c * d;
    f *= cd;
    if (std::fabs(1.0 - cd) < 1e-16) break;
  }
  return front * (f - 1.0) / a;
}

std::vector<double> BetaSigmas(double sigma_min, double sigma_max, int n) {
  constexpr double kAlpha = 0.6, kBeta = 0.6;
  std::vector<double> out;
  for (double r : NumpyLinspace(0, 1, n)) {
    const double p = 1 - r;
    double ppf = p <= 0 ? 0.0 : 1.0;
    if (p > 0 && p < 1) {
      double lo = 0, hi = 1;  // I(lo) < p <= I(hi)
      for (int i = 0; i < 200; ++i) {
        const double mid = 0.5 * (lo + hi);
        if (mid <= lo || mid >= hi) break;
        (RegularizedIncompleteBeta(mid, kAlpha, kBeta) < p ? lo : hi) = mid;
      }
      ppf = 0.5 * (lo + hi);
    }
    out.push_back(sigma_min + (ppf * (sigma_max - sigma_min)));
  }
  return out;
}

std::vector<double> ConvertSigmas(SigmaSchedule schedule, double sigma_min, double sigma_max, int n) {
  switch (schedule) {
    case SigmaSchedule::kKarras: return KarrasSigmas(sigma_min, sigma_max, n);
    case SigmaSchedule::kExponential: return ExponentialSigmas(sigma_min, sigma_max, n);
    case SigmaSchedule::kBeta: return BetaSigmas(sigma_min, sigma_max, n);
    case SigmaSchedule::kDefault: break;
  }
  return {};
}

std::vector<float> LogSigmasF32(const std::vector<float>& alphas_cumprod) {
  std::vector<float> out(alphas_cumprod.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const float a = alphas_cumprod[i];
    out[i] = std::log(std::sqrt((1.0f - a) / a));
  }
  return out;
}

double SigmaToT(double sigma, const std::vector<float>& log_sigmas) {
  const int64_t len = static_cast<int64_t>(log_sigmas.size());
  const double log_sigma = std::log(std::max(sigma, 1e-10));
  // np.cumsum(dists >= 0).argmax(): the last index whose dist is >= 0 (the
  // first index reaching the maximal count), 0 when there is none.
  int64_t low = 0;
  for (int64_t i = 0; i < len; ++i)
    if (log_sigma - static_cast<double>(log_sigmas[i]) >= 0) low = i;
  low = std::min(low, len - 2);
  const float lo = log_sigmas[low], hi = log_sigmas[low + 1];
  const float span = lo - hi;  // f32 - f32
  double w = (static_cast<double>(lo) - log_sigma) / static_cast<double>(span);
  w = std::min(std::max(w, 0.0), 1.0);
  return (1 - w) * static_cast<double>(low) + w * static_cast<double>(low + 1);
}

StatusOr<SigmaSchedule> ReadSigmaSchedule(std::string_view name, const SchedulerConfig& c) {
  if (static_cast<int>(c.use_karras_sigmas) + c.use_exponential_sigmas + c.use_beta_sigmas > 1)
    return InvalidArgumentError(std::string(name) +
                                ": only one of use_karras_sigmas, use_exponential_sigmas and use_beta_sigmas can be "
                                "true (as diffusers)");
  if (c.use_beta_sigmas) return SigmaSchedule::kBeta;
  if (c.use_karras_sigmas) return SigmaSchedule::kKarras;
  if (c.use_exponential_sigmas) return SigmaSchedule::kExponential;
  return SigmaSchedule::kDefault;
}

namespace {

// QUADPACK dqk21: 21-point Kronrod nodes/weights and the 10-point Gauss weights.
constexpr double kXgk[11] = {
    0.995657163025808080735527280689003, 0.973906528517171720077964012084452,
    0.930157491355708226001207180059508, 0.865063366688984510732096688423493,
    0.780817726586416897063717578345042, 0.679409568299024406234327365114874,
    0.562757134668604683339000099272694, 0.433395394129247190799265943165784,
    0.294392862701460198131126603103866, 0.148874338981631210884826001129720,
    0.000000000000000000000000000000000};
constexpr double kWgk[11] = {
    0.011694638867371874278064396062192, 0.032558162307964727478818972459390,
    0.054755896574351996031381300244580, 0.075039674810919952767043140916190,
    0.093125454583697605535065465083366, 0.109387158802297641899210590325805,
    0.123491976262065851077208980610826, 0.134709217311473325928054001771707,
    0.142775938577060080797094273138717, 0.147739104901338491374841515972068,
    0.149445554002916905664936468389821};
constexpr double kWg[5] = {0.066671344308688137593568809893332, 0.149451349150580593145776339657697,
                           0.219086362515982043995534934228163, 0.269266719309996355091226921569469,
                           0.295524224714752870173892994651338};

struct Qk21Result {
  double result, abserr, resabs, resasc;
};

// dqk21 line by line (the Fortran arrays are 1-based: fv1(j) is fv1[j - 1]).
template <typename F>
Qk21Result Qk21(const F& f, double a, double b) {
  constexpr double kEpmach = 2.220446049250313e-16, kUflow = 2.2250738585072014e-308;
  const double centr = 0.5 * (a + b), hlgth = 0.5 * (b - a), dhlgth = std::fabs(hlgth);
  double fv1[10], fv2[10];
  double resg = 0.0;
  const double fc = f(centr);
  double resk = kWgk[10] * fc;
  double resabs = std::fabs(resk);
  for (int j = 1; j <= 5; ++j) {
    const int jtw = 2 * j;
    const double absc = hlgth * kXgk[jtw - 1];
    const double fval1 = f(centr - absc), fval2 = f(centr + absc);
    fv1[jtw - 1] = fval1;
    fv2[jtw - 1] = fval2;
    const double fsum = fval1 + fval2;
    resg = resg + kWg[j - 1] * fsum;
    resk = resk + kWgk[jtw - 1] * fsum;
    resabs = resabs + kWgk[jtw - 1] * (std::fabs(fval1) + std::fabs(fval2));
  }
  for (int j = 1; j <= 5; ++j) {
    const int jtwm1 = 2 * j - 1;
    const double absc = hlgth * kXgk[jtwm1 - 1];
    const double fval1 = f(centr - absc), fval2 = f(centr + absc);
    fv1[jtwm1 - 1] = fval1;
    fv2[jtwm1 - 1] = fval2;
    const double fsum = fval1 + fval2;
    resk = resk + kWgk[jtwm1 - 1] * fsum;
    resabs = resabs + kWgk[jtwm1 - 1] * (std::fabs(fval1) + std::fabs(fval2));
  }
  const double reskh = resk * 0.5;
  double resasc = kWgk[10] * std::fabs(fc - reskh);
  for (int j = 0; j < 10; ++j) resasc = resasc + kWgk[j] * (std::fabs(fv1[j] - reskh) + std::fabs(fv2[j] - reskh));
  Qk21Result r;
  r.result = resk * hlgth;
  r.resabs = resabs * dhlgth;
  r.resasc = resasc * dhlgth;
  r.abserr = std::fabs((resk - resg) * hlgth);
  if (r.resasc != 0.0 && r.abserr != 0.0) r.abserr = r.resasc * std::min(1.0, std::pow(200.0 * r.abserr / r.resasc, 1.5));
  if (r.resabs > kUflow / (50.0 * kEpmach)) r.abserr = std::max((kEpmach * 50.0) * r.resabs, r.abserr);
  return r;
}

}  // namespace

double LmsCoefficient(const std::vector<float>& sigmas, int order, int t, int current_order) {
  // lms_derivative(tau): prod *= (tau - sigmas[t - k]) / (sigmas[t - current_order] - sigmas[t - k]),
  // every operand an f32 torch scalar (tau, a Python float, is rounded to f32).
  auto f32_integrand = [&](double tau) {
    float prod = 1.0f;
    for (int k = 0; k < order; ++k) {
      if (k == current_order) continue;
      const float num = static_cast<float>(tau) - sigmas[t - k];
      const float den = sigmas[t - current_order] - sigmas[t - k];
      prod = prod * (num / den);
    }
    return static_cast<double>(prod);
  };
  const double a = sigmas[t], b = sigmas[t + 1];
  const Qk21Result r = Qk21(f32_integrand, a, b);
  // dqagse's test after the first dqk21 call (epsabs 1.49e-8, epsrel 1e-4).
  constexpr double kEpmach = 2.220446049250313e-16;
  const double errbnd = std::max(1.49e-8, 1e-4 * std::fabs(r.result));
  const bool roundoff = r.abserr <= 100.0 * kEpmach * r.resabs && r.abserr > errbnd;
  if (roundoff || (r.abserr <= errbnd && r.abserr != r.resasc) || r.abserr == 0.0) return r.result;
  // dqagse's first bisection (seen on a last step to sigma 0): accepted when
  // the summed error estimate passes; the result is rlist(1) + rlist(2).
  const double mid = 0.5 * (a + b);
  const Qk21Result r1 = Qk21(f32_integrand, a, mid), r2 = Qk21(f32_integrand, mid, b);
  const double errsum = r.abserr + (r1.abserr + r2.abserr) - r.abserr;
  const double area = r.result + (r1.result + r2.result) - r.result;
  if (errsum <= std::max(1.49e-8, 1e-4 * std::fabs(area))) return 0.0 + r1.result + r2.result;
  // QUADPACK would bisect on; its answer is the polynomial's integral up to
  // the f32 noise of the integrand, which the rule below gives exactly.
  auto f64_integrand = [&](double tau) {
    double prod = 1.0;
    for (int k = 0; k < order; ++k) {
      if (k == current_order) continue;
      prod *= (tau - sigmas[t - k]) / (static_cast<double>(sigmas[t - current_order]) - sigmas[t - k]);
    }
    return prod;
  };
  return Qk21(f64_integrand, a, b).result;
}

}  // namespace internal
}  // namespace tpumesh::pipeline
