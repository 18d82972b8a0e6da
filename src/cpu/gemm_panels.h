// What the AVX-512 GEMM block products (gemm_avx512.cpp, gemm_avx512_bf16.cpp) share: the
// per-thread panel buffers, and the C tile of a 12 x 32 micro-kernel (lane masks, the early
// fetch, the alpha/beta store). Include only from code compiled for AVX-512F.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace mixprec::cpu::gemm_panels {

inline constexpr int64_t kMR = 12;  // rows of C per micro-kernel (12 x 2 accumulators)
inline constexpr int64_t kNR = 32;  // columns of C per micro-kernel (two 16-lane vectors)

// 64-byte aligned buffer `slot` (0: packed A, 1: packed B) of this thread, at least `bytes`
// long. Kept between calls (fresh ones would page-fault) and shared by the block products,
// which never run nested.
void* thread_buffer(int slot, size_t bytes);

inline int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

// Internal linkage: each includer compiles its own copy under its own target options.
namespace {  // NOLINT(google-build-namespaces)

// The first `count` of 16 lanes.
inline __mmask16 first16(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1);
}

// The C tile is needed only after the K loop, but it usually lives in L3 by then: fetching
// it first hides that latency behind the products (measured 4% on a 16 MB C).
inline void prefetch_c_tile(const float* c, int64_t ldc, int64_t rows) {
  for (int64_t i = 0; i < rows; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
  }
}

// c[0:rows, 0:cols] = alpha * acc + beta * c (beta == 0: c not read), one rounding each.
inline void store_c_tile(const __m512 (&acc)[kMR][2], float* c, int64_t ldc, float alpha,
                         float beta, int64_t rows, int64_t cols) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const __mmask16 m0 = first16(cols), m1 = first16(cols - 16);
  for (int64_t i = 0; i < rows; ++i) {
    float* row = c + i * ldc;
    __m512 r0 = _mm512_mul_ps(va, acc[i][0]), r1 = _mm512_mul_ps(va, acc[i][1]);
    if (beta != 0.0f) {
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), r1);
    }
    _mm512_mask_storeu_ps(row, m0, r0);
    _mm512_mask_storeu_ps(row + 16, m1, r1);
  }
}

}  // namespace
}  // namespace mixprec::cpu::gemm_panels
