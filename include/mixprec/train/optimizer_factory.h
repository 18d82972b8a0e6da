// The optimizer a config names, over a model's parameters.
#pragma once

#include <cstdint>
#include <memory>

#include "mixprec/config/train_config.h"
#include "mixprec/optim/lr_schedule.h"
#include "mixprec/optim/optimizer.h"

namespace mixprec::train {

// adamw | sgd | adam-mini with the [optimizer] settings; `seed` keys stochastic rounding of
// narrow masters (bf16-pure). Weight decay skips parameters whose role says so (norms,
// biases).
std::unique_ptr<optim::Optimizer> make_optimizer(const config::OptimizerConfig& config,
                                                 const optim::ParamList& params, uint64_t seed);

// Warm-up then cosine (to lr * min_lr_ratio) or constant, over `total_steps`.
optim::LrSchedule make_lr_schedule(const config::TrainConfig& config);

}  // namespace mixprec::train
