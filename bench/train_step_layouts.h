// bench_train_step --layouts: stacked routed experts (model.moe.idle_experts = "step", one
// grouped GEMM over [E, d_ff, d] weights) against per-expert weights ("skip", today's products
// over one [d_ff, d] weight per expert), side by side on config S's MoE and
// configs/deepseek_moe_debug.toml, fp32 and bf16-mixed: whole training steps (the two layouts
// start from the same weights and alternate in blocks, the first step of a block untimed, the
// order swapped every round), then the MoE layer's forward + backward alone.
#pragma once

#include <string>

#include "mixprec/config/train_config.h"
#include "mixprec/data/token_dataset.h"

namespace mixprec::bench {

struct LayoutModel {
  std::string label;
  config::ModelConfig model;
  int64_t batch, seq;
};

struct LayoutOptions {
  int reps = 12;  // timed steps per variant
  int warmup = 2;
  int block = 4;  // steps per variant and round, the first untimed
  int threads = 2;
};

int run_layouts(const std::vector<LayoutModel>& models, const data::TokenSplit& tokens,
                const LayoutOptions& options);

}  // namespace mixprec::bench
