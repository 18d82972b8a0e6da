// Fused scaled-dot-product attention and rotary position embedding.
#pragma once

#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// q, k, v [B, H, T, Dh] -> [B, H, T, Dh]: softmax(q·kᵀ·scale, causal mask) · v per head.
// scale <= 0 means 1/sqrt(Dh). Saves only the output and one f32 log-sum-exp per row for
// backward (no T×T tensor); backward recomputes the probabilities block by block.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool causal = true, double scale = 0.0);
// Rotate-half RoPE (GPT-NeoX / LLaMA): x [B, H, T, Dh] (Dh even), positions
// position_offset .. position_offset+T-1, inv_freq[i] = theta^(-2i/Dh); angles in f64.
Tensor rope(const Tensor& x, double theta = 10000.0, int64_t position_offset = 0);

}  // namespace mixprec
