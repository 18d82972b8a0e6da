// mixprec's own GEMM block product, behind cpu::gemm for f32, f16 and bf16 operands (bf16 x
// bf16 goes to AMX or VDPBF16PS first where the host measured them faster): packing that
// widens narrow operands as it copies, a register-blocked FMA micro-kernel, and the BLIS loop
// nest around them (gemm_blocked.h), built for AVX-512 (12 x 32 tiles, gemm_avx512.cpp) and
// AVX2 (6 x 16, gemm_avx2.cpp). Against OpenBLAS 0.3.21 it spares a narrow operand its
// widened f32 copy (which OpenBLAS then packed again) and a narrow C its f32 tile (bias and
// rounding in the registers, gemm_epilogue.h); OpenBLAS's SkylakeX sgemm also reached only
// 60-66% of the FMA peak on the transformer shapes.
//
// Sums run over K in order, in KC-blocks added into C: the bits depend on the shape only, and
// both builds give the same bits (tests compare each with a scalar loop of that order).
#pragma once

#include <cstdint>

#include "gemm_epilogue.h"
#include "mixprec/numerics/dtype.h"

namespace mixprec::cpu::own_gemm {

// The builds, narrowest first.
enum class Build : uint8_t { none, avx2, avx512 };

// The widest build this CPU runs: avx512 with AVX-512F, BW and VL; avx2 with AVX2, FMA and
// F16C; else none.
Build best_build();
// The build gemm() runs: best_build() unless a test chose a narrower one (set_build).
Build build();
void set_build(Build b);  // requires b <= best_build(); not while a GEMM runs
const char* build_name(Build b);

// Taken when the CPU has a build and the path is enabled (the default; MIXPREC_OWN_GEMM=0 in
// the environment switches back to OpenBLAS). Tests switch it to compare the two; not while a
// GEMM runs.
void set_enabled(bool enabled);
bool enabled();
bool switched_on();  // the switch alone, whatever the CPU (for restoring it)

// One operand block: element (r, c) of op(X) is data[c * ld + r] when trans, else
// data[r * ld + c], stored as dtype (f32, bf16 or f16).
struct Block {
  DType dtype;
  const void* data;
  int64_t ld;
  bool trans;
};

// acc[i * ldacc + j] = alpha * Σ_p op(A)[i][p] · op(B)[p][j] + beta * acc[i * ldacc + j] for
// i < m, j < n, p < k (beta == 0: acc is not read), by build(). Requires build() != none;
// k == 0 leaves acc untouched.
// `epilogue` (gemm_epilogue.h): bias and rounding to a narrow C in the registers.
void gemm(int64_t m, int64_t n, int64_t k, float alpha, const Block& a, const Block& b, float beta,
          float* acc, int64_t ldacc, const GemmEpilogue* epilogue = nullptr);

// The builds' entry points (gemm_avx512.cpp, gemm_avx2.cpp), with gemm()'s contract.
void gemm_avx512(int64_t m, int64_t n, int64_t k, float alpha, const Block& a, const Block& b,
                 float beta, float* acc, int64_t ldacc, const GemmEpilogue& epilogue);
void gemm_avx2(int64_t m, int64_t n, int64_t k, float alpha, const Block& a, const Block& b,
               float beta, float* acc, int64_t ldacc, const GemmEpilogue& epilogue);

}  // namespace mixprec::cpu::own_gemm
