// Range checks across keys, and the precision policy resolved from training.precision or
// torchtitan's mixed_precision_param / mixed_precision_reduce.
#pragma once

#include <map>
#include <string>

#include "mixprec/config/train_config.h"

namespace mixprec::config::detail {

// Where each key's value came from ("line 7", "override 'model.d_model=64'"); keys left at
// their defaults are absent.
using Origins = std::map<std::string, std::string>;

// Sets config.training.policy; throws mixprec::Error(where, ...) naming the key and value.
void resolve_policy(TrainConfig& config, const Origins& origins, const std::string& where);
// Derives model.d_ff from model.multiple_of (torchtitan's Llama sizing) when that is set;
// a d_ff the config also gives must equal it.
void resolve_model_sizes(TrainConfig& config, const Origins& origins, const std::string& where);
// Throws mixprec::Error(where, ...) naming the first bad key, its value and its origin.
void validate(const TrainConfig& config, const Origins& origins, const std::string& where);

}  // namespace mixprec::config::detail
