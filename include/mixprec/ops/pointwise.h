// Pointwise math, as torch.exp, torch.log, ..., torch.nn.functional.softplus and torch.pow
// with a scalar exponent: f32 math (f64 for f64) on each element with libm's functions, one
// rounding into the input's dtype. Inputs are floating (f64, f32, bf16, f16); gradients come
// back in the input's dtype, computed from the input (PyTorch's formulas, with f(x)
// recomputed in f32 where PyTorch reads its rounded result). Domain errors give NaN and poles
// give inf, as in PyTorch (log(-1) = NaN, log(0) = -inf, reciprocal(0) = inf). Under autocast
// all of them run in f32 (their rows in amp/autocast_table.h), as AMP's fp32 lists have them.
#pragma once

#include "mixprec/tensor/tensor.h"

namespace mixprec {

Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);  // log(1 + x), accurate for small x
Tensor expm1(const Tensor& x);  // e^x - 1, accurate for small x
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);  // 1 / sqrt(x)
Tensor reciprocal(const Tensor& x);
Tensor tanh(const Tensor& x);
// log(1 + e^(beta·x)) / beta, and x itself where beta·x > threshold (PyTorch's defaults).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
// x^exponent; the gradient is 0 for exponent 0 (torch.pow's rule), exponent·x^(exponent-1)
// otherwise.
Tensor pow(const Tensor& x, double exponent);
// x^exponent elementwise with broadcasting, in promote(x, exponent) (both floating), rounded
// once. Gradients (torch.pow's): exponent·x^(exponent-1), 0 where exponent is 0; and
// x^exponent·log x, 0 where x == 0 and exponent >= 0.
Tensor pow(const Tensor& x, const Tensor& exponent);

}  // namespace mixprec
