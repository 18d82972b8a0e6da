// Which ways of training a config fit a given memory: the planner (memory_plan.h) walked over
// the choices that trade memory for speed without changing the model or its precision
// policy: the optimizer (AdamW, or Adam-mini's one second moment per block: a different
// update rule, so a different run), activation
// checkpointing (none, selective, full) and the rows per forward/backward (gradient
// accumulation keeps the step's batch). `mixprec memory --fit RAM` prints them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/config/train_config.h"
#include "mixprec/dist/memory_plan.h"

namespace mixprec::dist {

struct FitOption {
  std::string optimizer;              // optimizer.name
  std::string activation_checkpoint;  // activation_checkpoint.mode
  int64_t local_batch_size = 0;       // training.local_batch_size (rows per forward/backward)
  MemoryPlan plan;
  std::size_t rss = 0;  // predicted resident set between steps (predict_rss)
  bool fits = false;    // rss <= the memory asked about
};

// Every combination, in the order of preference: the ones that fit first; among those (and
// among those that do not), the config's optimizer before the other, less recomputation
// before more, more rows per forward/backward before fewer. `threads`: the trainer's.
std::vector<FitOption> fit_options(const config::TrainConfig& config, int world_size,
                                   std::size_t memory_bytes, int threads);

}  // namespace mixprec::dist
