// FP8 / MX kernels of the cpu backend (contracts: backend/backend.h, quantize and
// scaled_gemm). quantize reads rows in parallel; scaled_gemm widens the FP8 operands to bf16
// (exact: every E4M3 and E5M2 value is a bf16 value) and runs the bf16 GEMM once per K-step.
#pragma once

#include "mixprec/backend/quantized.h"

namespace mixprec::cpu {

backend::Quantized quantize(const Tensor& x, const backend::QuantSpec& spec);
Tensor scaled_gemm(const backend::Quantized& a, const backend::Quantized& b, DType out_dtype);

}  // namespace mixprec::cpu
