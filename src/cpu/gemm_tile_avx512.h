// The C tile of the AVX-512 block products' 12 x 32 micro-kernel (gemm_avx512.cpp,
// gemm_avx512_bf16.cpp): lane masks, the alpha/beta store, the epilogue's bias and rounding.
// Include only from code compiled for AVX-512F, BW and VL.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "gemm_panels.h"

namespace mixprec::cpu::gemm_panels {

inline constexpr int64_t kMR = 12;  // rows of C per micro-kernel (12 x 2 accumulators)
inline constexpr int64_t kNR = 32;  // columns of C per micro-kernel (two 16-lane vectors)

// Internal linkage: each includer compiles its own copy under its own target options.
namespace {  // NOLINT(google-build-namespaces)

// The first `count` of 16 lanes.
inline __mmask16 first16(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1);
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

// The lanes of v under m, rounded to bf16 (f16 when `f16`) at dst. bf16: nearest even, NaN a
// quiet NaN with its top payload (the encoder's bits, vector_storage.h's bf16_round_bits; from
// bf16 operands a NaN sum has a zero low half and never reaches the carry, kept so the bits
// stay the encoder's whatever C's source). f16: VCVTPS2PH, nearest even, as narrow_row_f32's
// vector path. (Vectors by reference: this header is also read by code built without AVX.)
inline void store_narrow(uint16_t* dst, __mmask16 m, const __m512& v, bool f16) {
  if (f16) {
    _mm256_mask_storeu_epi16(dst, m,
                             _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return;
  }
  const __m512i b = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7FFF)), odd), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF)),
                                                _mm512_set1_epi32(0x7F800000));
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40));
  _mm256_mask_storeu_epi16(dst, m, _mm512_cvtepi32_epi16(r));
}

MIXPREC_CHECKED_STORE inline void store_tile(const __m512 (&acc)[kMR][2], const TileStore& t,
                                             int64_t rows, int64_t cols) {
  if (t.bias == nullptr && t.out == nullptr) {
    store_c_tile(acc, t.c, t.ldc, t.alpha, t.beta, rows, cols);
    return;
  }
  const __m512 va = _mm512_set1_ps(t.alpha), vb = _mm512_set1_ps(t.beta);
  const __mmask16 m0 = first16(cols), m1 = first16(cols - 16);
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
  if (t.bias != nullptr) {
    b0 = _mm512_maskz_loadu_ps(m0, t.bias);
    b1 = _mm512_maskz_loadu_ps(m1, t.bias + 16);
  }
  for (int64_t i = 0; i < rows; ++i) {
    __m512 r0 = _mm512_mul_ps(va, acc[i][0]), r1 = _mm512_mul_ps(va, acc[i][1]);
    if (t.bias != nullptr) {
      r0 = _mm512_add_ps(b0, r0);
      r1 = _mm512_add_ps(b1, r1);
    } else if (t.beta != 0.0f) {
      const float* row = t.c + i * t.ldc;
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), r1);
    }
    if (t.out != nullptr) {
      uint16_t* row = t.out + i * t.ldout;
      store_narrow(row, m0, r0, t.out_f16);
      store_narrow(row + 16, m1, r1, t.out_f16);
    } else {
      float* row = t.c + i * t.ldc;
      _mm512_mask_storeu_ps(row, m0, r0);
      _mm512_mask_storeu_ps(row + 16, m1, r1);
    }
  }
}

}  // namespace
}  // namespace mixprec::cpu::gemm_panels
