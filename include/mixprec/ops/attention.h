// Fused scaled-dot-product attention and rotary position embedding.
#pragma once

#include <cstdint>

#include "mixprec/ops/rope_scaling.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {

// q, k, v [B, H, T, Dh] -> [B, H, T, Dh]: softmax(q·kᵀ·scale, causal mask) · v per head.
// scale <= 0 means 1/sqrt(Dh). Causal: query i attends to keys 0..i. k and v may have fewer
// heads, [B, Hkv, T, Dh] with Hkv dividing H (grouped-query attention): key/value head j serves
// query heads j·H/Hkv .. (j+1)·H/Hkv - 1, read in place (never repeated), and its gradients
// sum over them. Without the causal mask, k and v may hold more positions than q (Tk > T:
// each query sees every key, a decoding step against cached keys; no gradients). q, k, v share
// one dtype (f64, f32, bf16, f16; math in f32, f64 for f64; outputs
// rounded once). Fused (flash-style): saves only q, k, v, the output (for bf16/f16 inputs its
// unrounded f32 value, so the gradients see one rounding, not several) and one f32 log-sum-exp per
// row for backward (no T×T tensor); backward recomputes the probabilities block by block. q, k, v
// are read in place when each row's Dh elements are adjacent (a contiguous tensor, or a [B, T,
// H·Dh] projection viewed as [B, H, T, Dh]); the output takes q's layout, as PyTorch's CPU flash
// attention does: for such a view it is [B, T, H, Dh] memory seen as [B, H, T, Dh] (not contiguous;
// out.transpose(1, 2) is), and the gradients of q, k, v take the layouts of q, k, v.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool causal = true, double scale = 0.0);
// Rotate-half RoPE (GPT-NeoX / LLaMA): x [B, H, T, Dh] (Dh even), positions
// position_offset .. position_offset+T-1 (offset >= 0), angle position·inv_freq[i],
// cos and sin times freqs.attention_factor (a = 1 unless yarn scaling):
//   out[i] = x[i]·cos - x[i+Dh/2]·sin,  out[i+Dh/2] = x[i+Dh/2]·cos + x[i]·sin  (i < Dh/2).
// freqs: Dh/2 finite inverse frequencies and a finite attention_factor > 0 (rope_frequencies()
// in rope_scaling.h builds them, scaled or not). Angles and cos/sin in f64, applied in f32
// (f64 for f64); backward is the inverse rotation times a (the transpose of a·rotation).
Tensor rope(const Tensor& x, const RopeFrequencies& freqs, int64_t position_offset = 0);
// Unscaled RoPE, inv_freq[i] = theta^(-2i/Dh) (theta finite, > 0): the same bits as
// rope(x, rope_frequencies(Dh, theta), position_offset).
Tensor rope(const Tensor& x, double theta = 10000.0, int64_t position_offset = 0);

}  // namespace mixprec
