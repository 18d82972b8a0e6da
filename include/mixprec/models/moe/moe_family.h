// The moe family (model.kind = "moe"): the decoder with a mixture of experts as every block's
// MLP from model.moe.n_dense_layers on (Switch / Mixtral routing, and DeepSeek-V3's as
// torchtitan's deepseek_v3 MoE has it: sigmoid scores, group-limited top-k, shared experts,
// auxiliary-loss-free expert biases), models/transformer/moe.h. No Hugging Face layout (the
// deepseek_v3 family, these experts beside latent attention, has one).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/models/registry.h"

namespace mixprec::models::moe {

extern const ModelSpec kSpec;

// The parts deepseek_v3 shares: the [model.moe] rules (and the shared decoder's), the expert
// count in size messages, dense and expert blocks for the planner, the other expert layout.
void check_moe_config(const config::ModelConfig& m, const config::ConfigRules& c);
std::string size_keys(const config::ModelConfig& m);
int64_t block_kinds(const config::ModelConfig& m);
config::ModelConfig with_blocks(const config::ModelConfig& m, int64_t layers, int64_t kind);
std::vector<ParamLayout> other_layouts(const config::ModelConfig& m);

}  // namespace mixprec::models::moe
