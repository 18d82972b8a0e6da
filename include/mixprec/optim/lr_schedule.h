// Learning-rate schedules: linear warm-up, then cosine decay to a floor or a constant rate.
// The trainer asks lr(step) before each optimizer step and sets it on every group
// (LrSchedule::apply).
#pragma once

#include <cstdint>
#include <string_view>

#include "mixprec/optim/optimizer.h"

namespace mixprec::optim {

enum class LrDecay { constant, cosine };
LrDecay parse_lr_decay(std::string_view name);  // "constant" | "cosine"
const char* lr_decay_name(LrDecay decay);

struct LrScheduleOptions {
  double lr = 1e-3;          // peak rate, reached at the end of warm-up
  int64_t warmup_steps = 0;  // steps 0..warmup_steps-1 ramp linearly up to lr
  int64_t total_steps = 0;   // cosine: the decay ends here (needs total_steps > warmup_steps)
  double min_lr = 0.0;       // cosine: the floor, in [0, lr]
  LrDecay decay = LrDecay::cosine;
};

class LrSchedule {
 public:
  explicit LrSchedule(LrScheduleOptions options);

  // The rate for step `step` (0 = the first update):
  //   step < warmup:  lr * (step + 1) / warmup
  //   constant:       lr
  //   cosine:         min_lr + (lr - min_lr) * (1 + cos(pi * progress)) / 2,
  //                   progress = (step - warmup) / (total - warmup), capped at 1.
  double lr(int64_t step) const;
  // Sets every group of `optimizer` to lr(step).
  void apply(Optimizer& optimizer, int64_t step) const { optimizer.set_lr(lr(step)); }

  const LrScheduleOptions& options() const { return options_; }

 private:
  LrScheduleOptions options_;
};

}  // namespace mixprec::optim
