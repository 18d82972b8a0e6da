// Activations and dropout: f32 math (f64 for f64) on each element, one rounding on store.
// Inputs are floating (f64, f32, bf16, f16); gradients come back in the input's dtype. The
// f32 erf/exp/tanh are vectorised polynomial approximations with ~1e-6 relative accuracy,
// tails included (see mixprec/cpu/activation.h).
#pragma once

#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

Tensor gelu(const Tensor& x);       // x·Φ(x), the exact (erf) form
Tensor gelu_tanh(const Tensor& x);  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
Tensor silu(const Tensor& x);       // x·σ(x)
// silu(gate) * up, fused (the SwiGLU feed-forward's elementwise part); same shapes.
Tensor swiglu(const Tensor& gate, const Tensor& up);
// Zeroes each element with probability p and scales the rest by 1/(1-p) (f32; f64 for f64).
// The mask is a pure function of (seed, stream, element index) — Philox, counter-based — so
// it does not depend on the thread count and backward regenerates it instead of saving it:
// element i (row-major) is kept iff philox_u32(seed, stream, i) >= floor(p·2^32). Calls with
// the same (seed, stream) drop the same elements: give each dropout its own stream (e.g.
// Generator::next_stream()). p must be in [0, 1) (else Error); p == 0 returns x itself.
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t stream = 0);

}  // namespace mixprec
