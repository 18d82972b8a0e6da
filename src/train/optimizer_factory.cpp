// Optimizer and schedule from the config.
#include "mixprec/train/optimizer_factory.h"

#include <algorithm>

#include "mixprec/core/error.h"
#include "mixprec/optim/optimizer_table.h"

namespace mixprec::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const config::OptimizerConfig& c,
                                                 const optim::ParamList& params, uint64_t seed) {
  const optim::OptimizerSettings settings{.lr = c.lr,
                                          .weight_decay = c.weight_decay,
                                          .decay_every_parameter = c.weight_decay_params == "all",
                                          .beta1 = c.beta1,
                                          .beta2 = c.beta2,
                                          .eps = c.eps,
                                          .momentum = c.momentum,
                                          .nesterov = c.nesterov,
                                          .seed = seed};
  return optim::optimizer_kind(c.name).make(params, settings);
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
