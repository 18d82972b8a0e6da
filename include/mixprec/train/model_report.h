// One-paragraph description of a model before it is allocated (meta device): kind, shape,
// parameter count (active per token for MoE) and the bytes its parameters will take under a
// precision policy.
#pragma once

#include <cstdint>
#include <string>

#include "mixprec/amp/policy.h"
#include "mixprec/models/transformer.h"

namespace mixprec::train {

// Parameters a token passes through: all of them for gpt; for moe, the experts count top_k
// of n_experts.
int64_t active_parameter_count(const models::Transformer& model);

std::string describe_model(const models::Transformer& model,
                           const amp::MixedPrecisionPolicy& policy);

}  // namespace mixprec::train
