// Matrix products. Inputs share one dtype (f64, f32, bf16, f16); products accumulate in f32
// (f64 for f64) and the result is rounded once into that dtype. Backward: dA = dC·Bᵀ,
// dB = Aᵀ·dC through the same GEMM (see mixprec/cpu/gemm.h).
// f32 x f32 products follow amp::matmul_precision() (mixprec/amp/policy.h), read by the
// forward and kept for its backward: high rounds the operands (and dC) to TF32, medium to
// bf16; the output stays f32. Under autocast these ops take lower-precision inputs.
#pragma once

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// a [..., M, K] @ b [K, N] -> [..., M, N]; or a [..., M, K] @ b [..., K, N] with equal
// leading dims (a batched product).
Tensor matmul(const Tensor& a, const Tensor& b);
// a [B, M, K] @ b [B, K, N] -> [B, M, N]
Tensor bmm(const Tensor& a, const Tensor& b);
// x [..., In] · weightᵀ [In, Out] + bias [Out] -> [..., Out]; bias may be undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

}  // namespace mixprec
