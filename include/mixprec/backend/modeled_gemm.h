// The scaled GEMM C = A·Bᵀ of backend/quantized.h summed as a GPU's tensor core sums it
// (numerics/accumulator_model.h), not in f32: within each K-step the FP8 values' exact
// products (the scales are not in them, as on the GPU) go through the accumulator model, with
// each product aligned by its operands' exponent sum; the step's result times both operands'
// descales is added to an f32 sum in K order (the epilogue, and a block recipe's promotion of
// each 128-product partial sum, as DeepGEMM does). A scalar loop over every product: for
// inspecting a recipe's numerics on small models, hundreds of times slower than scaled_gemm.
#pragma once

#include "mixprec/backend/quantized.h"
#include "mixprec/numerics/accumulator_model.h"

namespace mixprec::backend {

// C [rows of a, rows of b] in f32.
Tensor scaled_gemm_modeled(const Quantized& a, const Quantized& b, const AccumulatorModel& model);

}  // namespace mixprec::backend
