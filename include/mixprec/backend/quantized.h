// A matrix quantized to FP8 (or another narrow element format) with one scale per block, the
// operand of the scaled GEMM. Every recipe's granularity is a block shape over the [rows,
// cols] matrix, cols being the GEMM's contraction dim (0 = the whole dim):
//   tensorwise {0, 0}; rowwise (torchao axiswise) {1, 0}; MX {1, 32};
//   DeepSeek-V3 / TE Float8BlockScaling activations {1, 128}, weights {128, 128};
//   TE NVFP4 (E2M1 elements, E4M3 block scales under an f32 tensor scale) {1, 16}, {16, 16}.
// A block cut short by the matrix's edge takes the amax of the elements it has (as DeepSeek's
// zero padding does). Plain data, no compute: the kernels are in the backend table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/numerics/rounding.h"
#include "mixprec/numerics/scale_rules.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::backend {

struct BlockShape {
  int64_t rows = 0, cols = 0;  // 0: the whole dimension
  bool operator==(const BlockShape&) const = default;
};

struct QuantSpec {
  DType element = DType::f8_e4m3fn;  // f8_e4m3fn or f8_e5m2; f4_e2m1fn with rule te_nvfp4
  BlockShape block;
  ScaleRule rule = ScaleRule::torchao;
  bool pow2 = false;  // round the scales to powers of two (scale_rules.h); MX rules always do
  // TE's random Hadamard transform (hadamard.h) of each row's runs of 16, in the input's dtype,
  // before the amaxes and the cast: NVFP4's weight-gradient operands.
  bool rht = false;
  // Stochastic rounding of the elements (NVFP4's gradients, as TE's cvt.rs): element (r, c)
  // draws Philox4x32-10 keyed by `seed` at counter (r·cols + c, `stream`) (numerics/rounding.h),
  // so the cast depends on neither the thread count nor the order of the casts. A recipe sets
  // `stochastic`; whoever casts sets seed and stream (a linear: per step and operand).
  bool stochastic = false;
  uint64_t seed = 0, stream = 0;
};

struct Quantized {
  Tensor data;    // [rows, cols] in spec.element, contiguous
  Tensor scales;  // [row blocks, col blocks] f32: each block's stored value (ScaleForm says how)
  QuantSpec spec;
  // te_nvfp4's second level: the amax of the tensor (after the RHT) its f32 scale comes from.
  std::optional<float> tensor_amax = std::nullopt;
};

// "e4m3 1x128 deepseek pow2": the spec as messages and tables name it.
std::string describe(const QuantSpec& spec);
// How a cast by `spec` rounds its elements from the one at row-major index `index` of the
// matrix on: to nearest even, or stochastically by the spec's key (the cast saturates anyway).
ConvertOptions element_rounding(const QuantSpec& spec, int64_t index = 0);
// Throws naming `where` unless the element is an FP8 dtype and the block sizes are >= 0.
void check_spec(const QuantSpec& spec, const char* where);
// check_spec, and x a 2-d f32 / bf16 / f16 matrix the spec can cast (te_nvfp4: rows of a
// multiple of 16 values, as TE's cast and its RHT need); throws naming `where`.
void check_operand(const Tensor& x, const QuantSpec& spec, const char* where);
// The block extents for a [rows, cols] matrix (zeros resolved, each >= 1).
BlockShape resolved_block(const QuantSpec& spec, int64_t rows, int64_t cols);
// ceil(rows / block.rows) x ceil(cols / block.cols) for the resolved block.
Shape scale_shape(const QuantSpec& spec, int64_t rows, int64_t cols);

// The K-step of a scaled GEMM C = A·Bᵀ (A [m, k], B [n, k] quantized): both operands' scales
// must be constant over each step, so each one's block along k is either all of k or the step
// itself. Throws naming `where` and both specs otherwise, when k differs, or when one operand
// is NVFP4 and the other is not.
int64_t scaled_gemm_k_step(const Quantized& a, const Quantized& b, const char* where);

// Every block's descale (descale_of its stored scale) as the scales are laid out; at() is the
// one of row `row` in column block `col_block` (a block spanning all columns has one: every
// col_block reads it), which in a scaled GEMM is that row's K-step.
struct Descales {
  std::vector<float> values;
  int64_t block_rows = 1, cols = 1;
  float at(int64_t row, int64_t col_block) const {
    return values[row_offset(row) + (cols == 1 ? 0 : static_cast<std::size_t>(col_block))];
  }
  // Where row `row`'s descales begin in `values`, one per column block.
  std::size_t row_offset(int64_t row) const {
    return static_cast<std::size_t>((row / block_rows) * cols);
  }
};
Descales descales(const Quantized& q);

// Each element's value, q / v or q·v by the rule's form, computed in f64 and converted to
// `dtype` (for f64 the value torchao's emulation divides out, to f64's precision); NVFP4's
// times its tensor decode scale unless with_tensor_scale is false (the block level only).
Tensor dequantize(const Quantized& q, DType dtype = DType::f32, bool with_tensor_scale = true);
// What a scaled GEMM of a and b multiplies its block-scaled sum by: TE's NVFP4 alpha when both
// have a tensor amax (te_nvfp4_gemm_alpha), else 1.
float tensor_scale_alpha(const Quantized& a, const Quantized& b);

}  // namespace mixprec::backend
