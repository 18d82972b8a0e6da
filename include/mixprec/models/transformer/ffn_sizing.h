// torchtitan's Llama feed-forward sizing (model.multiple_of, model.ffn_dim_multiplier): the
// SwiGLU hidden width that keeps the parameter count of a 4·d GELU MLP, scaled, rounded up to
// a multiple of multiple_of.
#pragma once

#include <cstdint>

namespace mixprec::models {

// round_up(int(multiplier · int(2 · 4 · d_model / 3)), multiple_of), multiplier 1 when
// ffn_dim_multiplier <= 0 (torchtitan's None). d_model 256, multiple_of 256: 768. Requires
// d_model > 0 and multiple_of > 0.
int64_t llama_ffn_hidden_dim(int64_t d_model, int64_t multiple_of, double ffn_dim_multiplier);

}  // namespace mixprec::models
