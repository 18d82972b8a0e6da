// model.rope_scaling as the rope op and Hugging Face's config.json see it: the decoder's
// frequencies come from rope_scaling_of, its config.json "rope_scaling" from
// hf_rope_scaling, and a file's value is compared after normalize_hf_rope_scaling.
#pragma once

#include <nlohmann/json.hpp>

#include "mixprec/config/train_config.h"
#include "mixprec/ops/rope_scaling.h"

namespace mixprec::models {

// The ops' RopeScaling of model.rope_scaling (yarn's original_max_position_embeddings 0:
// model.max_seq_len, as HF falls back to max_position_embeddings; attention_factor 0: none).
RopeScaling rope_scaling_of(const config::ModelConfig& m);

// config.json's "rope_scaling" for the config: null for type "none", else an object with
// "rope_type" and the keys of that type, as HF writes them.
nlohmann::json hf_rope_scaling(const config::ModelConfig& m);

// A file's "rope_scaling" in hf_rope_scaling's form, so two spellings of one scaling compare
// equal: "type" read as "rope_type", "default" as no scaling, HF's defaults filled in
// (yarn: beta_fast 32, beta_slow 1 (also for 0, as HF reads `or`), truncate true,
// original_max_position_embeddings = max_position_embeddings), null-valued keys dropped.
// Other values come back as they are, to be reported as differing.
// `file` is the whole config.json (its max_position_embeddings, when an integer); the
// signature is HfKey::normalize's, so every layout's rope_scaling key takes it as it is.
nlohmann::json normalize_hf_rope_scaling(const nlohmann::json& value, const nlohmann::json& file);

}  // namespace mixprec::models
