// FP8 / MX kernels of the cpu backend (contracts: backend/backend.h, quantize and
// scaled_gemm). quantize reads rows in parallel and casts them with the vector kernels;
// scaled_gemm widens the FP8 operands exactly (to bf16 where the CPU multiplies bf16 natively,
// else to f32) and runs the GEMM once per K-step, or once when the block scales are exact.
#pragma once

#include "mixprec/backend/quantized.h"

namespace mixprec::cpu {

backend::Quantized quantize(const Tensor& x, const backend::QuantSpec& spec);
Tensor scaled_gemm(const backend::Quantized& a, const backend::Quantized& b, DType out_dtype);

}  // namespace mixprec::cpu
