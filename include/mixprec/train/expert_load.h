// The band an MoE model's expert loads keep over a run (StepMetrics::expert_load: each
// expert's tokens over the mean of its block's experts, 1 = perfectly balanced).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/train/step_metrics.h"

namespace mixprec::train {

// The band the loads kept over the last quarter of `steps` (at least one step): per step the
// largest and smallest load over every block and expert, their extremes and medians. "" when
// no step has loads.
std::string describe_expert_load_band(const std::vector<StepMetrics>& steps);

}  // namespace mixprec::train
