#include "mixprec/train/checkpoint_plausibility.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/io/checkpoint_state.h"
#include "mixprec/numerics/float_format.h"

namespace mixprec::train {
namespace {

constexpr const char* kPlausibility = "checkpoint";

// The scalar entry `key` as an integer, if present and a one-element number.
std::optional<int64_t> counter(const io::Checkpoint& c, const std::string& key) {
  const auto it = c.tensors.find(key);
  if (it == c.tensors.end() || it->second.numel() != 1) return std::nullopt;
  const Tensor& t = it->second;
  if (t.dtype() == DType::i64) return t.contiguous().data<int64_t>()[0];
  const double v = t.to(DType::f64).contiguous().data<double>()[0];
  if (!std::isfinite(v) || std::fabs(v) > 9.0e18) return INT64_MAX;  // absurd either way
  return static_cast<int64_t>(v);
}

float max_abs(const Tensor& t) {
  const Tensor f = t.to(DType::f32).contiguous();  // no copy for f32 masters
  const float* v = f.data<float>();
  float m = 0;
  for (int64_t i = 0; i < f.numel(); ++i) m = std::fmax(m, std::fabs(v[i]));  // NaN skipped
  return m;
}

}  // namespace

void check_known_entries(const io::Checkpoint& c) {
  for (const auto& [key, t] : c.tensors) {
    if (key == "train.step" || key == "train.seed") continue;
    bool known = false;
    for (const char* prefix : {io::kModelPrefix, io::kOptimPrefix, io::kScalerPrefix,
                               io::kBufferPrefix, io::kFp8ScalingPrefix})
      known = known || key.starts_with(prefix);
    MIXPREC_CHECK(known, kPlausibility,
                  c.path + ": entry '" + key +
                      "' belongs to no section a mixprec checkpoint has (model., optim., "
                      "scaler., buffer., fp8_scaling., train.step, train.seed): the file was "
                      "altered");
  }
}

void check_step_counters(const io::Checkpoint& c, int64_t step, const config::TrainConfig& config) {
  MIXPREC_CHECK(step >= 0, kPlausibility,
                c.path + ": train.step = " + std::to_string(step) + " is negative");
  MIXPREC_CHECK(step <= config.training.steps, kPlausibility,
                c.path + " holds train.step = " + std::to_string(step) +
                    ", past training.steps = " + std::to_string(config.training.steps) +
                    " of this run: raise training.steps to train on, or start a new run_dir");
  const std::string taken_key = std::string(io::kScalerPrefix) + "steps_taken";
  const std::string skipped_key = std::string(io::kScalerPrefix) + "steps_skipped";
  const auto taken = counter(c, taken_key), skipped = counter(c, skipped_key);
  if (taken && skipped) {
    // Every completed step was taken or skipped, once (compared without overflow).
    MIXPREC_CHECK(*taken >= 0 && *skipped >= 0 && *taken <= step && *skipped == step - *taken,
                  kPlausibility,
                  fmt::format("{}: {} = {} and {} = {} do not add up to train.step = {}", c.path,
                              taken_key, *taken, skipped_key, *skipped, step));
  }
  const std::string optim_key = std::string(io::kOptimPrefix) + "step";
  if (const auto optim = counter(c, optim_key)) {
    const int64_t bound = taken ? *taken : step;  // an optimizer moves on taken steps only
    MIXPREC_CHECK(*optim >= 0 && *optim <= bound, kPlausibility,
                  fmt::format("{}: {} = {} is past the {} steps {}", c.path, optim_key, *optim,
                              bound, taken ? "taken (" + taken_key + ")" : "completed"));
  }
}

void check_masters_fit(const io::Checkpoint& c, const amp::MixedPrecisionPolicy& policy) {
  const DType working = policy.param_dtype;
  // Past the working dtype's largest value the cast is inf; past the square root of f32's
  // (1.8e19) every norm's sum of squares, and the gradient norm's, overflows: either way no
  // step can be finite, or the model's output is flat (a norm of inf scales it to 0).
  const double limit =
      std::min(max_finite(*info(working).format), std::sqrt(max_finite(kFormatF32)));
  for (const auto& [key, t] : c.tensors) {
    if (!key.starts_with(io::kModelPrefix) || t.is_meta() || !is_floating(t.dtype())) continue;
    // inf and NaN are restore_training_state's to refuse (one scan of them, not two).
    const double largest = max_abs(t);
    MIXPREC_CHECK(!std::isfinite(largest) || largest <= limit, kPlausibility,
                  fmt::format("{}: entry '{}' holds {:.4g}, past {:.4g}, the largest weight a "
                              "{} working copy and f32 norms survive: the weights come from a run "
                              "that diverged, or were altered",
                              c.path, key, largest, limit, dtype_name(working)));
  }
}

void check_tokenizer(const std::string& recorded, const std::string& checkpoint_path,
                     const data::Tokenizer& tokenizer, const std::string& tokenizer_path) {
  if (recorded.empty() || recorded == tokenizer.id()) return;
  throw Error(kPlausibility, checkpoint_path + " was trained with tokenizer " + recorded +
                                 ", but " +
                                 (tokenizer_path.empty() ? "model.tokenizer = \"\" (bytes)"
                                                         : "model.tokenizer " + tokenizer_path) +
                                 " is " + tokenizer.id() +
                                 ": its ids would mean other text (the model file was replaced; "
                                 "restore it, or train a new run)");
}

void check_tokenizer(const io::Checkpoint& c, const data::Tokenizer& tokenizer,
                     const std::string& tokenizer_path) {
  const auto it = c.metadata.find(kTokenizerKey);
  check_tokenizer(it == c.metadata.end() ? "" : it->second, c.path, tokenizer, tokenizer_path);
}

}  // namespace mixprec::train
