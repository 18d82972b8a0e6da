// GradScaler: the per-iteration bookkeeping of torch.amp.GradScaler (unscale once, step once,
// then update) and its update rule, with hysteresis and scale bounds as options.
#include "mixprec/amp/grad_scaler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/autograd/record_tensor_ops.h"
#include "mixprec/backend/backend.h"
#include "mixprec/core/error.h"

namespace mixprec::amp {
namespace {

constexpr const char* kGradScaler = "GradScaler";

std::string scale_text(float s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(s));
  return buf;
}

Tensor scalar_tensor(int64_t v) {
  return Tensor::from_vector(std::vector<int64_t>{v});
}

const Tensor& entry(const TensorMap& dict, const std::string& key, DType dtype) {
  const auto it = dict.find(key);
  MIXPREC_CHECK(it != dict.end(), kGradScaler, "state has no entry '" + key + "'");
  MIXPREC_CHECK(it->second.defined() && it->second.numel() == 1 && it->second.dtype() == dtype,
                kGradScaler,
                "state entry '" + key + "' must be one " + dtype_name(dtype) + " value");
  return it->second;
}

}  // namespace

ScalerOptions ScalerOptions::none() {
  ScalerOptions o;
  o.enabled = false;
  return o;
}

ScalerOptions ScalerOptions::fixed(double scale) {
  MIXPREC_CHECK(scale > 0 && std::isfinite(static_cast<float>(scale)), kGradScaler,
                "a static scale must be positive and finite in f32, got " + std::to_string(scale));
  ScalerOptions o;
  o.dynamic = false;
  o.init_scale = scale;
  return o;
}

ScalerOptions ScalerOptions::dynamic_defaults() {
  return ScalerOptions{};
}

ScalerOptions ScalerOptions::pytorch() {
  ScalerOptions o;
  o.unscale_in_step = true;
  o.allow_fp16_grads = false;
  return o;
}

ScalerOptions ScalerOptions::for_policy(const MixedPrecisionPolicy& policy) {
  return policy.loss_scaling ? dynamic_defaults() : none();
}

namespace {

void check_options(const ScalerOptions& o) {
  MIXPREC_CHECK(
      o.init_scale > 0 && std::isfinite(static_cast<float>(o.init_scale)), kGradScaler,
      "init_scale must be positive and finite in f32, got " + std::to_string(o.init_scale));
  MIXPREC_CHECK(o.growth_factor > 1, kGradScaler,
                "growth_factor must be > 1, got " + std::to_string(o.growth_factor));
  MIXPREC_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1, kGradScaler,
                "backoff_factor must be in (0, 1), got " + std::to_string(o.backoff_factor));
  MIXPREC_CHECK(o.growth_interval >= 1, kGradScaler,
                "growth_interval must be >= 1, got " + std::to_string(o.growth_interval));
  MIXPREC_CHECK(o.hysteresis >= 1, kGradScaler,
                "hysteresis must be >= 1, got " + std::to_string(o.hysteresis));
  MIXPREC_CHECK(o.min_scale >= 0 && o.min_scale <= o.max_scale, kGradScaler,
                "need 0 <= min_scale <= max_scale, got " + std::to_string(o.min_scale) + " and " +
                    std::to_string(o.max_scale));
}

// One table of what a state dict carries besides the scale and the trackers: each option under
// its key (PyTorch's names for PyTorch's options), read by state_dict() and its loader alike;
// and the step counters a checkpoint adds.
// PyTorch's keys are required when loading; mixprec's own may be absent (a dict with only
// torch.amp.GradScaler.state_dict()'s five keys keeps those options as they are).
template <class Struct, class T>
struct Field {
  const char* key;
  T Struct::*member;
  bool pytorch = true;
};
constexpr Field<ScalerOptions, double> kRealOptions[] = {
    {"growth_factor", &ScalerOptions::growth_factor},
    {"backoff_factor", &ScalerOptions::backoff_factor},
    {"min_scale", &ScalerOptions::min_scale, false},
    {"max_scale", &ScalerOptions::max_scale, false}};
constexpr Field<ScalerOptions, int64_t> kIntegerOptions[] = {
    {"growth_interval", &ScalerOptions::growth_interval},
    {"hysteresis", &ScalerOptions::hysteresis, false}};
constexpr Field<ScalerState, int64_t> kStepCounters[] = {
    {"steps_skipped", &ScalerState::steps_skipped}, {"steps_taken", &ScalerState::steps_taken}};

}  // namespace

GradScaler::GradScaler(ScalerOptions options) : options_(options) {
  check_options(options_);
  MIXPREC_CHECK(
      options_.init_scale >= options_.min_scale && options_.init_scale <= options_.max_scale,
      kGradScaler,
      "init_scale " + std::to_string(options_.init_scale) + " is outside [min_scale, max_scale]");
  state_.scale = static_cast<float>(options_.init_scale);
  state_.hysteresis_left = options_.hysteresis;
}

float GradScaler::inv_scale() const {
  return static_cast<float>(1.0 / static_cast<double>(get_scale()));
}

Tensor GradScaler::scale(const Tensor& loss) const {
  MIXPREC_CHECK(loss.defined(), kGradScaler, "scale() got an undefined loss");
  return enabled() ? scaled(loss, static_cast<double>(state_.scale)) : loss;
}

namespace {

void require_gradients(bool any_grad) {
  MIXPREC_CHECK(any_grad, kGradScaler,
                "no parameter of this optimizer has a gradient (run backward() first)");
}

}  // namespace

GradScaler::PerOptimizer& GradScaler::check(GradientStep& opt, bool write) {
  PerOptimizer st;  // recorded only once the scan succeeds: a throw leaves no phantom step
  const std::vector<NamedGradient> named = opt.gradients();
  std::vector<Tensor> grads;
  grads.reserve(named.size());
  for (const NamedGradient& g : named) grads.push_back(g.grad.contiguous());
  const bool any_grad = !grads.empty();
  // One pass over every gradient (unscaled in place when `write`).
  const int64_t bad = write ? backend::current().unscale_and_check(grads, inv_scale())
                            : backend::current().first_nonfinite(grads, inv_scale());
  // A strided gradient was unscaled in a dense copy, which becomes the gradient.
  for (std::size_t i = 0; write && i < named.size(); ++i)
    if (!named[i].grad.is_contiguous()) opt.replace_gradient(named[i].name, grads[i]);
  if (bad >= 0) {
    st.found_inf = true;
    st.first_nonfinite = named[static_cast<std::size_t>(bad)].name;
  }
  if (reduce_ && reduce_(st.found_inf) && !st.found_inf) {
    st.found_inf = true;
    st.first_nonfinite = "(a parameter shard on another rank)";
  }
  require_gradients(any_grad);
  PerOptimizer& recorded = this_iteration_[&opt];
  const bool unscaled = recorded.unscaled;
  recorded = std::move(st);
  recorded.unscaled = unscaled;
  return recorded;
}

void GradScaler::unscale(GradientStep& opt) {
  const auto it = this_iteration_.find(&opt);
  if (it != this_iteration_.end()) {
    MIXPREC_CHECK(!it->second.unscaled, kGradScaler,
                  "unscale() has already been called on this optimizer since the last update()");
    MIXPREC_CHECK(!it->second.stepped, kGradScaler, "unscale() is being called after step()");
  }
  if (!options_.allow_fp16_grads)  // torch.amp.GradScaler.unscale_'s refusal, word for word
    for (const NamedGradient& g : opt.gradients())
      MIXPREC_CHECK(g.grad.dtype() != DType::f16, kGradScaler,
                    "Attempting to unscale FP16 gradients. (parameter '" + std::string(g.name) +
                        "'; allow_fp16_grads = true unscales them, which flushes what falls "
                        "below f16's range after the division)");
  // A disabled scaler's 1/scale is 1: nothing to write, but the test is what unscale() is
  // called for (clipping comes next).
  check(opt, /*write=*/enabled()).unscaled = true;
}

StepReport GradScaler::step(GradientStep& opt, float grad_factor, std::optional<double> grad_norm) {
  MIXPREC_CHECK(std::isfinite(grad_factor) && grad_factor > 0.0f, kGradScaler,
                "step(): grad_factor " + std::to_string(grad_factor) + " must be finite and > 0");
  auto it = this_iteration_.find(&opt);
  MIXPREC_CHECK(it == this_iteration_.end() || !it->second.stepped, kGradScaler,
                "step() has already been called on this optimizer since the last update()");
  if (options_.unscale_in_step && (it == this_iteration_.end() || !it->second.unscaled)) {
    unscale(opt);  // PyTorch's step(): .grad holds the unscaled gradients afterwards
    it = this_iteration_.find(&opt);
  }
  const bool unscaled = it != this_iteration_.end() && it->second.unscaled;
  PerOptimizer* st = unscaled ? &it->second : nullptr;  // unscale() has tested the gradients
  // A finite f64 sum of squares has no inf or NaN in it; multiplying by 1/scale <= 1 (none
  // left when unscaled) makes none either.
  if (!st && grad_norm && std::isfinite(*grad_norm) && !reduce_ &&
      (unscaled || inv_scale() <= 1.0f)) {
    require_gradients(!opt.gradients().empty());
    st = &this_iteration_[&opt];  // found_inf stays false
  }
  if (!st) st = &check(opt, /*write=*/false);
  st->stepped = true;
  StepReport r;
  r.scale = get_scale();
  if (st->found_inf) {
    r.first_nonfinite = st->first_nonfinite;
    r.reason = "non-finite gradient (inf or NaN) in parameter '" + st->first_nonfinite +
               "' at loss scale " + scale_text(r.scale);
    ++state_.steps_skipped;
  } else {
    opt.step((unscaled ? 1.0f : inv_scale()) * grad_factor);
    r.stepped = true;
    ++state_.steps_taken;
  }
  last_report_ = r;
  return r;
}

void GradScaler::update() {
  MIXPREC_CHECK(!this_iteration_.empty(), kGradScaler,
                "update() without an unscale() or step() since the last update()");
  bool found_inf = false;
  for (const auto& [opt, st] : this_iteration_) found_inf = found_inf || st.found_inf;
  this_iteration_.clear();
  if (!enabled() || !options_.dynamic) return;
  ScalerState& s = state_;
  if (found_inf) {
    s.growth_tracker = 0;
    if (--s.hysteresis_left <= 0) {
      // Never below the smallest normal f32: 1/scale must stay finite (with min_scale 0, a
      // run of NaN steps would otherwise drive the scale to 0 and skip every step after).
      const double floor = std::max(options_.min_scale, static_cast<double>(FLT_MIN));
      s.scale = static_cast<float>(
          std::max(static_cast<double>(s.scale) * options_.backoff_factor, floor));
      s.hysteresis_left = options_.hysteresis;
    }
    return;
  }
  if (++s.growth_tracker < options_.growth_interval) return;
  // As PyTorch: the grown scale is rounded to f32 and kept only if finite (never past
  // FLT_MAX), and the tracker restarts either way.
  const auto grown = static_cast<float>(static_cast<double>(s.scale) * options_.growth_factor);
  if (std::isfinite(grown)) s.scale = std::min(grown, static_cast<float>(options_.max_scale));
  s.growth_tracker = 0;
  s.hysteresis_left = options_.hysteresis;
}

void GradScaler::load_state(const ScalerState& state) {
  MIXPREC_CHECK(state.scale > 0 && std::isfinite(state.scale), kGradScaler,
                "loaded scale must be positive and finite, got " + scale_text(state.scale));
  MIXPREC_CHECK(state.growth_tracker >= 0 && state.hysteresis_left >= 1 &&
                    state.hysteresis_left <= options_.hysteresis && state.steps_skipped >= 0 &&
                    state.steps_taken >= 0,
                kGradScaler,
                "loaded counters are negative, or hysteresis_left is outside [1, hysteresis = " +
                    std::to_string(options_.hysteresis) + "]");
  state_ = state;
  this_iteration_.clear();
}

void GradScaler::update(double new_scale) {
  this_iteration_.clear();
  if (!enabled()) return;
  MIXPREC_CHECK(new_scale > 0 && std::isfinite(static_cast<float>(new_scale)), kGradScaler,
                "update(new_scale): the scale must be positive and finite in f32, got " +
                    std::to_string(new_scale));
  state_.scale = static_cast<float>(new_scale);
}

TensorMap GradScaler::state_dict() const {
  if (!enabled()) return {};
  TensorMap out{{"scale", Tensor::from_vector(std::vector<float>{state_.scale})},
                {"_growth_tracker", scalar_tensor(state_.growth_tracker)},
                {"hysteresis_left", scalar_tensor(state_.hysteresis_left)}};
  for (const auto& f : kRealOptions)
    out.emplace(f.key, Tensor::from_vector(std::vector<double>{options_.*f.member}));
  for (const auto& f : kIntegerOptions) out.emplace(f.key, scalar_tensor(options_.*f.member));
  return out;
}

void GradScaler::load_state_dict(const TensorMap& dict) {
  if (!enabled()) return;
  MIXPREC_CHECK(!dict.empty(), kGradScaler,
                "the state dict is empty: it was saved by a disabled GradScaler, and this one "
                "is enabled");
  GradScaler trial = *this;  // every check passes before anything changes
  ScalerState& s = trial.state_;
  s.scale = entry(dict, "scale", DType::f32).data<float>()[0];
  // Dicts from before the options were saved name the tracker without PyTorch's underscore.
  const bool legacy = !dict.count("_growth_tracker") && dict.count("growth_tracker");
  s.growth_tracker =
      entry(dict, legacy ? "growth_tracker" : "_growth_tracker", DType::i64).data<int64_t>()[0];
  if (!legacy) {
    for (const auto& f : kRealOptions)
      if (f.pytorch || dict.count(f.key))
        trial.options_.*f.member = entry(dict, f.key, DType::f64).data<double>()[0];
    for (const auto& f : kIntegerOptions)
      if (f.pytorch || dict.count(f.key))
        trial.options_.*f.member = entry(dict, f.key, DType::i64).data<int64_t>()[0];
    check_options(trial.options_);
  }
  // PyTorch has no hysteresis: without the entry the allowance starts full.
  s.hysteresis_left = dict.count("hysteresis_left") || legacy
                          ? entry(dict, "hysteresis_left", DType::i64).data<int64_t>()[0]
                          : trial.options_.hysteresis;
  trial.load_state(s);  // checks hysteresis_left against the loaded hysteresis
  *this = std::move(trial);
}

TensorMap GradScaler::checkpoint_dict() const {
  TensorMap out = state_dict();
  for (const auto& f : kStepCounters) out.emplace(f.key, scalar_tensor(state_.*f.member));
  return out;
}

void GradScaler::load_checkpoint_dict(const TensorMap& dict) {
  GradScaler trial = *this;
  TensorMap scaler_state = dict;
  for (const auto& f : kStepCounters)
    if (scaler_state.erase(f.key))
      trial.state_.*f.member = entry(dict, f.key, DType::i64).data<int64_t>()[0];
  trial.load_state_dict(scaler_state);
  trial.load_state(trial.state_);  // checks the counters
  *this = std::move(trial);
}

}  // namespace mixprec::amp
