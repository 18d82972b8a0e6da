// Expert loads of an MoE model for the run's metrics: each expert's tokens over the mean of its
// block's experts (1 = perfectly balanced), per step, from the counts of the whole batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/train/step_metrics.h"

namespace mixprec::train {

// counts: Model::expert_counts()' layout (block after block, n_experts each) -> per block,
// count / mean count. Empty for no counts; a block that routed nothing gets zeros.
std::vector<std::vector<double>> expert_loads(const std::vector<int64_t>& counts,
                                              int64_t n_experts);

// The band the loads kept over the last quarter of `steps` (at least one step): per step the
// largest and smallest load over every block and expert, their extremes and medians. "" when
// no step has loads.
std::string describe_expert_load_band(const std::vector<StepMetrics>& steps);

}  // namespace mixprec::train
