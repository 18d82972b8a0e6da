// Checkpoints whose parameters are named as another layout of the same model names them
// (models::ModelSpec::other_layouts: the moe family's model.moe.idle_experts, stacked or
// per-expert experts): which layout they hold, and the hint for the messages that report
// missing or unknown model entries.
#pragma once

#include <optional>
#include <string>

#include "mixprec/config/train_config.h"
#include "mixprec/io/checkpoint_store.h"
#include "mixprec/models/registry.h"

namespace mixprec::train {

// Whether the checkpoint's model.* entries are named as under `there` rather than `here`: they
// hold a name only `there` has and none only `here` has (a rank's share of a sharded
// checkpoint will do). Describes both models (nothing allocated): for configs that fit.
bool named_as(const io::TensorMap& tensors, const config::ModelConfig& here,
              const config::ModelConfig& there);

// The other layout of `config`'s model the checkpoint's entries are named as, if any.
std::optional<models::ParamLayout> checkpoint_layout(const io::TensorMap& tensors,
                                                     const config::ModelConfig& config);

// "; its parameters are named as under model.moe.idle_experts = "skip": set that to load it"
// when checkpoint_layout finds one; "" otherwise.
std::string checkpoint_layout_hint(const io::TensorMap& tensors, const config::ModelConfig& config);

}  // namespace mixprec::train
