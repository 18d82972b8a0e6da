// Matrix products. Inputs share one dtype (f64, f32, bf16, f16); products accumulate in f32
// (f64 for f64) and the result is rounded once into that dtype. Backward: dA = dC·Bᵀ,
// dB = Aᵀ·dC through the same GEMM (see mixprec/cpu/gemm.h).
// f32 x f32 products follow amp::matmul_precision() (mixprec/amp/policy.h), read by the
// forward and kept for its backward: high rounds the operands (and dC) to TF32, medium to
// bf16; the output stays f32. Under autocast these ops take lower-precision inputs.
#pragma once

#include <string_view>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// torch.matmul: a [..., M, K] @ b [..., K, N] -> [..., M, N] with the leading (batch) dims
// broadcast; a 1-d a is a row [1, K] and a 1-d b a column [K, 1], the added dim dropped
// from the result (1-d @ 1-d is the dot product, a 0-d result). 0-d operands are an error.
Tensor matmul(const Tensor& a, const Tensor& b);
// a [B, M, K] @ b [B, K, N] -> [B, M, N]
Tensor bmm(const Tensor& a, const Tensor& b);
// a [M, K] @ b [K, N] -> [M, N] (torch.mm: 2-d only).
Tensor mm(const Tensor& a, const Tensor& b);
// a [M, K] @ v [K] -> [M] (torch.mv).
Tensor mv(const Tensor& a, const Tensor& v);
// Σ a[i]·b[i] of two 1-d tensors of one size -> 0-d (torch.dot; empty gives 0).
Tensor dot(const Tensor& a, const Tensor& b);
// beta·input + alpha·(m1 [N, M] @ m2 [M, P]), input broadcast to [N, P] (torch.addmm). The
// product accumulates in f32 (f64 for f64) on top of beta·input and is rounded once. As in
// BLAS and PyTorch, beta = 0 never reads input (its NaN and inf do not reach the result).
// Gradients: input beta·g (summed to its shape), m1 alpha·g·m2ᵀ, m2 alpha·m1ᵀ·g.
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta = 1.0,
             double alpha = 1.0);
// The batched form: b1 [B, N, M] @ b2 [B, M, P] (no broadcasting between them, as
// torch.baddbmm), input broadcast to [B, N, P].
Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, double beta = 1.0,
               double alpha = 1.0);
// torch.einsum over one or two operands: "ij,jk->ik", "bij,bjk->bik", "...ij,...jk", "ii->i".
// Letters a-z and A-Z name dims; "..." the broadcast dims; a letter repeated in one operand
// takes its diagonal; letters absent from the output are summed. Without "->" the output is
// the ellipsis dims, then the letters used once, in ASCII order (uppercase first), as in
// PyTorch. Two operands contract through one batched GEMM (f32 accumulation); size-1 dims
// broadcast.
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands);
// x [..., In] · weightᵀ [In, Out] + bias [Out] -> [..., Out]; bias may be undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

}  // namespace mixprec
