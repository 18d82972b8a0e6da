// What mixprec's own block products (gemm_own.h, gemm_avx512_bf16.h) do with a narrow C
// that is not read (beta == 0): the first K-block starts from the bias (f32 [n], every row:
// C = alpha·s + bias, one rounding, as when the f32 tile held the bias and beta were 1), and
// the last K-block's rows are rounded to bf16 or f16 (nearest even; NaN kept quiet with its
// top payload: narrow_row_f32's bits) and stored straight from the registers. Without it a
// narrow C took an f32 tile filled with the bias, finished in it and narrowed in passes of
// their own. The f32 tile is used only between K-blocks (it may be null for one block).
#pragma once

#include <cstdint>

namespace mixprec::cpu {

struct GemmEpilogue {
  const float* bias = nullptr;
  uint16_t* out = nullptr;  // bf16 or f16 bits
  bool out_f16 = false;
  int64_t ldout = 0;
};

// Whether cpu::gemm hands narrow outputs to the epilogue (on unless MIXPREC_GEMM_EPILOGUE=0;
// benchmarks compare both, tests check they give the same bits). Not while a GEMM runs.
void set_gemm_epilogue_enabled(bool enabled);
bool gemm_epilogue_enabled();

}  // namespace mixprec::cpu
