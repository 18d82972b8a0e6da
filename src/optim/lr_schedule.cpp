#include "mixprec/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "mixprec/core/error.h"

namespace mixprec::optim {

LrDecay parse_lr_decay(std::string_view name) {
  if (name == "constant") return LrDecay::constant;
  if (name == "cosine") return LrDecay::cosine;
  throw Error("parse_lr_decay",
              "unknown decay '" + std::string(name) + "'; valid: constant, cosine");
}

const char* lr_decay_name(LrDecay decay) {
  return decay == LrDecay::constant ? "constant" : "cosine";
}

LrSchedule::LrSchedule(LrScheduleOptions options) : options_(options) {
  const char* where = "LrSchedule";
  MIXPREC_CHECK(options.lr >= 0 && std::isfinite(options.lr), where,
                "lr must be finite and >= 0, got " + std::to_string(options.lr));
  MIXPREC_CHECK(options.warmup_steps >= 0, where,
                "warmup_steps must be >= 0, got " + std::to_string(options.warmup_steps));
  if (options.decay == LrDecay::cosine) {
    MIXPREC_CHECK(options.total_steps > options.warmup_steps, where,
                  "cosine decay needs total_steps (" + std::to_string(options.total_steps) +
                      ") > warmup_steps (" + std::to_string(options.warmup_steps) + ")");
    MIXPREC_CHECK(options.min_lr >= 0 && options.min_lr <= options.lr, where,
                  "min_lr must lie in [0, lr], got " + std::to_string(options.min_lr));
  }
}

double LrSchedule::lr(int64_t step) const {
  MIXPREC_CHECK(step >= 0, "LrSchedule::lr", "step must be >= 0, got " + std::to_string(step));
  const LrScheduleOptions& o = options_;
  if (step < o.warmup_steps)
    return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  if (o.decay == LrDecay::constant) return o.lr;
  const double progress = std::min(1.0, static_cast<double>(step - o.warmup_steps) /
                                            static_cast<double>(o.total_steps - o.warmup_steps));
  return o.min_lr + (o.lr - o.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace mixprec::optim
