// The config rules every decoder-only transformer family shares (sizes, heads, positions,
// norms), and the bounds they keep. A family's check_config calls check_decoder_config, then
// states its own rules.
#pragma once

#include <cstdint>
#include <string>

#include "mixprec/config/config_rules.h"
#include "mixprec/config/train_config.h"

namespace mixprec::models {

// Widths and counts a config may give: far above any model trained today (Llama 3 405B:
// d_ff 53248, vocab 128256, 126 layers), and low enough that a weight's element count (copies x
// d_model x d_ff) stays inside int64; whether a model fits this machine's memory is
// dist::check_fits_machine's question. 2^40 weights in one layer is a thousand times today's
// largest; Llama 3 405B's ffn_dim_multiplier is 1.2.
inline constexpr int64_t kMaxModelWidth = int64_t{1} << 24;
inline constexpr int64_t kMaxModelCount = int64_t{1} << 14;
inline constexpr double kMaxLayerWeights = 0x1p40;
inline constexpr double kMaxFfnMultiplier = 1000.0;

// `mlp_copies` MLPs of width d_ff sit in one block (an MoE's experts: n_experts + shared),
// named by `copies_keys` (" and model.moe.n_experts") in the bound's message.
void check_decoder_config(const config::ModelConfig& m, const config::ConfigRules& c,
                          double mlp_copies = 1.0, const std::string& copies_keys = "");

// "must be <= bound" when value > bound.
void check_bound(const config::ConfigRules& c, const std::string& key, int64_t value,
                 int64_t bound);

// Spec parts of a family whose blocks are all alike and whose size the shared keys say
// (ModelSpec::size_keys, block_kinds, with_blocks).
std::string no_size_keys(const config::ModelConfig& m);
int64_t one_block_kind(const config::ModelConfig& m);
config::ModelConfig with_layers(const config::ModelConfig& m, int64_t layers, int64_t block_kind);

}  // namespace mixprec::models
