// The 16-lane f32 vector of the AVX-512 row kernel builds (softmax_row_ops_avx512*.cpp):
// included after their target switch, so these helpers are compiled for AVX-512.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace mixprec::cpu {
namespace {  // NOLINT(google-build-namespaces): one private copy per ISA translation unit

struct F32x16 {
  using S = float;
  using V = float __attribute__((vector_size(64)));
  using U = uint32_t __attribute__((vector_size(64)));
  // vmaxps/vminps return their second operand when either is NaN: x, so NaN stays NaN. The
  // all-lanes masked forms: GCC 12's unmasked ones start from an undefined vector and trip
  // -Wuninitialized.
  static constexpr __mmask16 kAll = 0xFFFF;
  static V clamp_low(V x, float lo) {
    const __m512 l = _mm512_set1_ps(lo);
    return _mm512_mask_max_ps(l, kAll, l, x);
  }
  static V clamp(V x, float lo, float hi) {
    const __m512 h = _mm512_set1_ps(hi);
    return _mm512_mask_min_ps(h, kAll, h, clamp_low(x, lo));
  }
  static constexpr bool kFma = true;  // a * b + c contracts to one FMA
  // p * 2^n in one vscalefps, rounded once (gradual underflow).
  static constexpr bool kScalef = true;
  static V scalef(V p, V n) { return _mm512_mask_scalef_ps(p, kAll, p, n); }
};

}  // namespace
}  // namespace mixprec::cpu
