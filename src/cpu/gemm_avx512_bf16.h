// The AVX512-BF16 GEMM block product behind cpu::gemm for bf16 x bf16 operands on CPUs with
// VDPBF16PS but no AMX (AMD Zen 4/5, Intel Cooper Lake), or with AMX switched off. Each
// VDPBF16PS multiplies 16 pairs of bf16 into 16 f32 sums: twice the products per instruction
// of the f32 FMA the widening path would run, from operands half the size.
//
// Sums. Operands are packed as K-pairs (elements 2q and 2q + 1 of a row in one 32-bit lane).
// Within one KC-block of K the sum of C[i][j] starts at 0 and takes, pair by pair in order,
// s = (s + x[2q+1]·y[2q+1]) + x[2q]·y[2q], each addition rounded to f32 (round to nearest
// even) - the instruction's documented order, checked on the hardware by the unit tests.
// Like every AVX-512/AMX BF16 dot product it treats bf16 subnormal inputs as zero and flushes
// subnormal sums to zero. Blocks are then added into C in order: C = alpha·s + beta·C for
// the first block, C = alpha·s + C after. The bits depend on the shape alone.
#pragma once

#include <cstdint>

#include "gemm_epilogue.h"

namespace mixprec::cpu::avx512_bf16_gemm {

// K elements per block (the sums restart at each multiple of kBlockK).
inline constexpr int64_t kBlockK = 768;

// The CPU has AVX512-BF16 (with AVX-512F/BW/VL).
bool available();
// Taken for bf16 x bf16 when available and enabled (the default; MIXPREC_AVX512_BF16=0 in
// the environment switches back to widening into the f32 kernel). Tests switch it to cover
// both; not while a GEMM runs.
void set_enabled(bool enabled);
bool enabled();

// acc[i * ldacc + j] = alpha * Σ_p op(A)[i][p] · op(B)[p][j] + beta * acc[i * ldacc + j]
// for i < m, j < n, p < k (beta == 0: acc is not read), summed as described above.
// op(A)[i][p] is a[p * lda + i] when ta, else a[i * lda + p]; op(B)[p][j] is b[j * ldb + p]
// when tb, else b[p * ldb + j]; a and b hold bf16 bits. Requires available(); k == 0 leaves
// acc untouched.
//
// `epilogue` (gemm_epilogue.h): bias and rounding to a narrow C in the registers.
void gemm(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda, bool ta,
          const uint16_t* b, int64_t ldb, bool tb, float beta, float* acc, int64_t ldacc,
          const GemmEpilogue* epilogue = nullptr);

}  // namespace mixprec::cpu::avx512_bf16_gemm
