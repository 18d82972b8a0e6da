// Activation and dropout kernels (forward/backward pairs) on same-shape operands in any
// floating dtype: f32 math (f64 when an operand or the result is f64), one rounding on store.
//
// The f32 math is branch-free vector code (GCC vector extensions) built for SSE2, AVX2+FMA
// and AVX-512F+FMA; `isa` picks one (Isa::best: the widest the CPU runs). The two FMA builds
// give the same bits; the SSE2 build rounds products separately (last-bit differences, same
// accuracy). Instead of libm's scalar erff/expf/tanhf, exp and the Gaussian tail are
// polynomial approximations (~1e-7 relative each), and the formulas avoid cancellation, so
// results stay within ~1e-6 relative of the exact function even in the tails (tested against
// f64 libm on every bf16 value in [-40, 40] and a dense grid):
//   gelu       x·Φ(x), Φ from the Gaussian tail Q(|x|) = φ(x)·m(|x|) (m the Mills ratio, a
//              polynomial in 1/(4+|x|)), exp(-x²/2) with x² split exactly;
//   gelu_tanh  0.5·x·(1 + tanh(u)) = x·σ(2u), u = √(2/π)·(x + 0.044715·x³) (for x < 0 this
//              keeps the relative accuracy that 1 + tanh(u) loses; the error still grows
//              like |u|·2^-24 because u itself is rounded in f32);
//   silu       x·σ(x), σ from e^-|x| (never overflows).
// Results below 2^-149 flush to zero as f32 itself does; NaN propagates.
#pragma once

#include <array>
#include <cstdint>
#include "mixprec/backend/kernel_types.h"

#include "mixprec/numerics/convert.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

using backend::Activation;

// act(x) in x's dtype.
Tensor activation_forward(Activation act, const Tensor& x, Isa isa = Isa::best);
// g·act'(x) in x's dtype; g of x's shape, any floating dtype.
Tensor activation_backward(Activation act, const Tensor& x, const Tensor& g, Isa isa = Isa::best);

// silu(gate)·up in their (shared) dtype; same shapes.
Tensor swiglu_forward(const Tensor& gate, const Tensor& up, Isa isa = Isa::best);
// {g·up·silu'(gate), g·silu(gate)} in gate's and up's dtypes; an entry is undefined unless
// wanted.
std::array<Tensor, 2> swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& g,
                                      bool want_gate, bool want_up, Isa isa = Isa::best);

// Dropout keeps element i (row-major index) iff philox_u32(seed, stream, i) >= threshold(p),
// where threshold(p) = floor(p·2^32): a keep probability of 1 - p to within 2^-32.
uint32_t dropout_threshold(double p);
// x·mask/(1-p) in x's dtype (the factor 1/(1-p) rounded to f32; f64 for f64). p in [0, 1).
Tensor dropout_forward(const Tensor& x, double p, uint64_t seed, uint64_t stream,
                       Isa isa = Isa::best);
// g·mask/(1-p) with the same mask, regenerated, in `out_dtype`.
Tensor dropout_backward(const Tensor& g, double p, uint64_t seed, uint64_t stream, DType out_dtype,
                        Isa isa = Isa::best);

}  // namespace mixprec::cpu
