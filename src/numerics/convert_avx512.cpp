// AVX-512F row conversions for the kernels' hot path (widen_row_f32 / narrow_row_f32, nearest
// even only): 16 lanes per instruction where the AVX2 kernels have 8. Compiled with
// -mavx512f (CMakeLists.txt) and called only after cpu_has_avx512f(); the bits are those of
// the scalar encoder (bulk_convert_test compares every path with it).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "convert_kernels.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and warn that it "may be used
// uninitialized" (GCC bug 105593, fixed in GCC 13): a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace mixprec::kernels {

std::size_t avx512_widen_f32(const FloatFormat& f, const void* src, float* dst, std::size_t n) {
  const std::size_t done = n / 16 * 16;
  const auto* s = static_cast<const uint16_t*>(src);
  if (&f == &kFormatBF16) {
    for (std::size_t i = 0; i < done; i += 16)
      _mm512_storeu_si512(dst + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
                                                         reinterpret_cast<const __m256i*>(s + i))),
                                                     16));
    return done;
  }
  if (&f == &kFormatF16) {
    for (std::size_t i = 0; i < done; i += 16)
      _mm512_storeu_ps(
          dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
    return done;
  }
  return 0;
}

std::size_t avx512_narrow_f32_nearest(const FloatFormat& f, const float* src, void* dst,
                                      std::size_t n) {
  const std::size_t done = n / 16 * 16;
  auto* d = static_cast<uint16_t*>(dst);
  if (&f == &kFormatBF16) {
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
    const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1);
    for (std::size_t i = 0; i < done; i += 16) {
      const __m512i b = _mm512_loadu_si512(src + i);
      const __m512i hi = _mm512_srli_epi32(b, 16);
      // bits + 0x7FFF + lsb, >> 16: nearest even; NaN: the top half with the quiet bit.
      const __m512i rounded = _mm512_srli_epi32(
          _mm512_add_epi32(b, _mm512_add_epi32(bias, _mm512_and_si512(hi, one))), 16);
      const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(b, abs_mask), inf);
      const __m512i r = _mm512_mask_or_epi32(rounded, nan, hi, _mm512_set1_epi32(0x40));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm512_cvtepi32_epi16(r));
    }
    return done;
  }
  if (&f == &kFormatF16) {
    for (std::size_t i = 0; i < done; i += 16)
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(d + i),
          _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return done;
  }
  return 0;
}

}  // namespace mixprec::kernels
