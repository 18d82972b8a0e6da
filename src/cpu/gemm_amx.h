// The AMX-BF16 block product behind cpu::gemm for bf16 x bf16 operands (Intel Sapphire Rapids
// and later): tiles of 16 x 32 bf16 multiplied into 16 x 16 f32 accumulators (TDPBF16PS).
// Each product of two bf16 values is exact in f32 and the sums are f32, as the portable path
// (widen to f32, sgemm); the order of the sums is fixed by the shape alone (K in steps of 32,
// in order), so the bits never depend on the thread count. Like every AMX/AVX-512 BF16 dot
// product, bf16 subnormal inputs count as zero and subnormal results flush to zero.
#pragma once

#include <cstdint>

namespace mixprec::cpu::amx {

// The CPU has AMX-TILE and AMX-BF16 and the kernel granted this process the tile state
// (asked once).
bool available();
// The AMX path is taken when available and enabled (the default; MIXPREC_AMX=0 in the
// environment disables it). Tests switch it off to cover the portable path on AMX machines;
// not meant to change while a GEMM runs.
void set_enabled(bool enabled);
bool enabled();

// acc[i * ldacc + j] = alpha * Σ_p op(A)[i][p] · op(B)[p][j] + beta * acc[i * ldacc + j]
// for i < m, j < n, p < k (beta == 0: acc is not read). op(A)[i][p] is a[p * lda + i] when
// ta, else a[i * lda + p]; op(B)[p][j] is b[j * ldb + p] when tb, else b[p * ldb + j].
// a and b hold bf16 bits. Requires available(); k == 0 leaves acc untouched.
void gemm_bf16(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda,
               bool ta, const uint16_t* b, int64_t ldb, bool tb, float beta, float* acc,
               int64_t ldacc);

}  // namespace mixprec::cpu::amx
