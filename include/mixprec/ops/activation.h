// Activations and dropout: f32 math (f64 for f64) on each element, one rounding on store.
#pragma once

#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

Tensor gelu(const Tensor& x);       // x·Φ(x), the exact (erf) form
Tensor gelu_tanh(const Tensor& x);  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
Tensor silu(const Tensor& x);       // x·σ(x)
// silu(gate) * up, fused (the SwiGLU feed-forward's elementwise part); same shapes.
Tensor swiglu(const Tensor& gate, const Tensor& up);
// Zeroes each element with probability p and scales the rest by 1/(1-p). The mask is a pure
// function of (seed, stream, element index) — Philox, counter-based — so it does not depend
// on the thread count and backward regenerates it instead of saving it. p == 0 returns x.
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t stream = 0);

}  // namespace mixprec
