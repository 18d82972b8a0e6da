// The deepseek_v3 family's Hugging Face layout (DeepseekV3ForCausalLM): its tensors, with each
// routed expert a tensor of its own (stacked in memory), DeepSeek's interleaved RoPE rows, and
// its config.json keys.
#pragma once

#include "mixprec/config/train_config.h"
#include "mixprec/models/hf_layout.h"

namespace mixprec::models::deepseek_v3 {

HfLayout hf_layout(const config::ModelConfig& m);

}  // namespace mixprec::models::deepseek_v3
