// Optimizer and schedule from the config.
#include "mixprec/train/optimizer_factory.h"

#include <algorithm>

#include "mixprec/core/error.h"
#include "mixprec/optim/adam_mini.h"
#include "mixprec/optim/adamw.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const config::OptimizerConfig& c,
                                                 const optim::ParamList& params, uint64_t seed) {
  if (c.name == "adamw")
    return std::make_unique<optim::AdamW>(params, c.lr, c.weight_decay,
                                          optim::AdamWOptions{c.beta1, c.beta2, c.eps, seed});
  if (c.name == "adam-mini")
    return std::make_unique<optim::AdamMini>(params, c.lr, c.weight_decay,
                                             optim::AdamMiniOptions{c.beta1, c.beta2, c.eps, seed});
  MIXPREC_CHECK(c.name == "sgd", "optimizer.name",
                "'" + c.name + "' is not one of adamw, sgd, adam-mini");
  return std::make_unique<optim::SGD>(params, c.lr, c.weight_decay,
                                      optim::SgdOptions{c.momentum, 0.0, c.nesterov, seed});
}

optim::LrSchedule make_lr_schedule(const config::TrainConfig& config) {
  const config::LrSchedulerConfig& s = config.lr_scheduler;
  optim::LrScheduleOptions o;
  o.lr = config.optimizer.lr;
  o.total_steps = config.training.steps;
  // A warm-up as long as the run leaves no room to decay: cap it so the schedule stays valid.
  o.warmup_steps = std::min(s.warmup_steps, std::max<int64_t>(config.training.steps - 1, 0));
  o.min_lr = config.optimizer.lr * s.min_lr_ratio;
  o.decay = optim::parse_lr_decay(s.decay);
  return optim::LrSchedule(o);
}

}  // namespace mixprec::train
