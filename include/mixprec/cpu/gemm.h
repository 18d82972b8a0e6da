// Row-major GEMM over storage dtypes, accumulating in f32 (f64 for f64):
//   C[b] = alpha * op(A[b]) · op(B[b]) + beta * C[b],   op(X) = X or Xᵀ,  b < batch
// op(A) is m×k, op(B) is k×n, C is m×n. A and B may each be f32, bf16 or f16 and C any of
// those (all three f64 for checking). Work is split over mixprec's own OpenMP threads by a
// grid that depends on the shape only, so the bits never depend on the thread count: C
// tiles, or, when K dwarfs m and n, K-ranges of the whole matrices whose f32 partials are
// summed in a fixed order. Each piece runs single-threaded: on CPUs with AVX-512 or AVX2,
// mixprec's own block product (src/cpu/gemm_own.h; both builds give the same bits), whose
// packing widens bf16 / f16 operands as it copies them; elsewhere (or with MIXPREC_OWN_GEMM=0)
// OpenBLAS sgemm, with narrow operands widened to f32 in cache-sized K-blocks right before the
// sgemm that reads them. A narrow C
// is accumulated in f32 (a bounded tile, or the partials) and rounded once (nearest even).
// bf16 x bf16 tiles run on AMX-BF16 instead when the CPU has it (src/cpu/gemm_amx.h; off with
// MIXPREC_AMX=0), else on AVX512-BF16 dot products when it has those (AMD Zen 4/5;
// src/cpu/gemm_avx512_bf16.h; off with MIXPREC_AVX512_BF16=0): exact products, f32 sums in a
// fixed K order, but bf16 subnormal inputs count as zero there, as in every AMX / AVX-512
// BF16 dot product (oneDNN's too).
// Scratch memory is bounded: K-split partials <= 64 MB, narrow-C tiles <= 8 MB per thread.
#pragma once

#include <cstdint>
#include "mixprec/backend/kernel_types.h"

#include "mixprec/numerics/dtype.h"

namespace mixprec::cpu {

using backend::GemmOperand;
using backend::GemmOutput;

// Which kernel runs bf16 x bf16 products on this CPU with the current switches: "amx",
// "avx512-bf16", "avx512 (widened)", "avx2 (widened)" or "openblas (widened)". For benchmark
// tables.
const char* bf16_gemm_path();
// True when that kernel multiplies bf16 natively ("amx" or "avx512-bf16").
bool bf16_gemm_is_native();

// beta == 0 never reads C (NaN there is ignored).
//   C[b] = alpha * op(A[b]) · op(B[b]) + beta * C[b] (+ row_bias)
void gemm(int64_t m, int64_t n, int64_t k, float alpha, const GemmOperand& a, const GemmOperand& b,
          float beta, const GemmOutput& c, int64_t batch = 1);

// While set (backend::WholeProductScope sets it), gemm() runs each product whole on the calling
// thread (one piece instead of the grid's C tiles; a K-split keeps its pieces, whose sums
// depend on them). For callers
// that spread independent products over the threads themselves (grouped_linear): each
// shared operand is packed once instead of once per tile. On the AVX-512 and AMX paths a C
// tile's bits do not depend on the tiling, so the results are the same as outside; on the
// OpenBLAS path they are fixed too, but may differ from the tiled ones in the last bit.
// The setting for the calling thread; returns the previous one.
bool set_whole_products(bool whole);

// How the work is split; exposed for tests and benchmarks.
struct GemmGrid {
  int64_t pieces;  // C split into this many row (split_m) or column blocks, or K into ranges
  bool split_m;
  int64_t piece;         // rows, columns or K per piece (multiple of 16 but the last)
  bool split_k = false;  // pieces are K-ranges of whole matrices, summed in piece order
};
GemmGrid gemm_grid(int64_t m, int64_t n, int64_t k, int64_t batch);

}  // namespace mixprec::cpu
