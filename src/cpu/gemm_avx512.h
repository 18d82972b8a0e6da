// mixprec's own AVX-512 GEMM block product, behind cpu::gemm for f32, f16 and bf16 operands
// (bf16 x bf16 goes to AMX first where the CPU has it). OpenBLAS 0.3.21's SkylakeX sgemm
// reaches 60-66% of the FMA peak on the transformer shapes, and a narrow operand had to be
// widened into an f32 copy that OpenBLAS then packed again; here the packing routines read
// f32, bf16 or f16 directly (widening as they pack, no extra pass) into the panels of a
// 12 x 32 register-blocked FMA micro-kernel (BLIS-style loops: NC columns of op(B) in L3, a
// KC x 32 micro-panel of it in L1, MC x KC of op(A) in L2).
//
// Sums run over K in order, in KC-blocks added into C: the bits depend on the shape only.
#pragma once

#include <cstdint>

#include "gemm_epilogue.h"
#include "mixprec/numerics/dtype.h"

namespace mixprec::cpu::avx512_gemm {

// The CPU has AVX-512F and AVX-512BW.
bool available();
// Taken when available and enabled (the default; MIXPREC_OWN_GEMM=0 in the environment
// switches back to OpenBLAS). Tests switch it to compare the two; not while a GEMM runs.
void set_enabled(bool enabled);
bool enabled();

// One operand block: element (r, c) of op(X) is data[c * ld + r] when trans, else
// data[r * ld + c], stored as dtype (f32, bf16 or f16).
struct Block {
  DType dtype;
  const void* data;
  int64_t ld;
  bool trans;
};

// acc[i * ldacc + j] = alpha * Σ_p op(A)[i][p] · op(B)[p][j] + beta * acc[i * ldacc + j] for
// i < m, j < n, p < k (beta == 0: acc is not read). Requires available(); k == 0 leaves acc
// untouched.
// `epilogue` (gemm_epilogue.h): bias and rounding to a narrow C in the registers.
void gemm(int64_t m, int64_t n, int64_t k, float alpha, const Block& a, const Block& b, float beta,
          float* acc, int64_t ldacc, const GemmEpilogue* epilogue = nullptr);

}  // namespace mixprec::cpu::avx512_gemm
