// Transformer Engine's random Hadamard transform (RHT), which its NVFP4 recipe applies to both
// operands of the weight-gradient product along their contraction dim: each run of 16 values
// v becomes v·(S·H)/4, with H the 16x16 Sylvester Hadamard matrix (H[i][j] = (-1)^popcount(i&j))
// and S = diag(TE's fixed signs, get_wgrad_sign_vector). (S·H)/4 is orthogonal, so the product
// of two operands both transformed is unchanged; the transform spreads a block's outliers.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

#include "mixprec/numerics/dtype.h"

namespace mixprec {

inline constexpr int kRhtSize = 16;
// Transformer Engine's hard-coded signs (custom_recipes/reference_nvfp4.py, the same in its
// CUDA kernels): row i of H is multiplied by sign i.
inline constexpr std::array<int8_t, kRhtSize> kTeRhtSigns = {1,  1,  1,  -1, 1,  -1, -1, -1,
                                                             -1, -1, -1, 1,  -1, 1,  -1, -1};

// x[0, n) in place, n a multiple of 16: signs, then the fast Walsh-Hadamard butterflies in f32,
// then the 1/4 (exact). The sums are exact while a run's exponents lie within f32's 24 bits
// of each other (always for bf16 values within 2^16 of each other's magnitude).
void rht16(float* x, int64_t n);
// rht16, then each value rounded to `dtype` (f32, bf16 or f16) and widened back: TE transforms
// a tensor in its own dtype. Every cast's and statistic's view of a transformed row.
void rht16_in(float* x, int64_t n, DType dtype);

// H[i][j]·sign[i]/4: the transform's matrix, for reference computations.
constexpr double rht16_entry(int i, int j) {
  const int parity = std::popcount(static_cast<unsigned>(i & j)) & 1;
  return (parity ? -0.25 : 0.25) * kTeRhtSigns[static_cast<std::size_t>(i)];
}

}  // namespace mixprec
