// Whole f32 vectors of L lanes loaded from and stored to bf16 / f16 rows, so kernels widen
// and round inside their own loops instead of in a separate pass over an f32 copy. Stores
// round to nearest even with encode_f32's bits (NaN stays a quiet NaN with its top payload
// bits). L = 16 needs AVX-512F, L = 8 AVX2 + F16C: each function carries its target and is
// inlined only into code compiled for at least that (a `#pragma GCC target` file, or a
// target function marked `flatten`, since always_inline helpers in between have the default
// target); L = 4 is baseline x86-64 (SSE2).
// Include before any `#pragma GCC target`, so the baseline code is never built for AVX.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "mixprec/numerics/storage_types.h"
#include "vector_lanes.h"

// Passing these vectors by value never crosses an ABI boundary: everything here is inlined.
#pragma GCC diagnostic ignored "-Wpsabi"
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and warn that it "may be used
// uninitialized" where they are inlined (GCC bug 105593, fixed in GCC 13): a false positive,
// silenced for every file that includes this one.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace mixprec::simd {

// bf16 bits (in the low half of each lane) of f32 bits b, rounded to nearest even.
template <class vu>
MIXPREC_INLINE vu bf16_round_bits(vu b) {
  const vu rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
  return (b & 0x7FFFFFFFu) > 0x7F800000u ? (b >> 16) | 0x40u : rounded;
}

template <int L>
struct StorageLanes;

template <>
struct StorageLanes<4> {
  using vf = Lanes<4>::vf;
  using vu = Lanes<4>::vu;
  typedef uint16_t vh __attribute__((vector_size(8)));
  MIXPREC_INLINE static vf load(const bf16* p) {
    vh h;
    std::memcpy(&h, p, sizeof h);
    return reinterpret_cast<vf>(__builtin_convertvector(h, vu) << 16);
  }
  MIXPREC_INLINE static void store(bf16* p, vf v) {
    const vh h = __builtin_convertvector(bf16_round_bits(reinterpret_cast<vu>(v)), vh);
    std::memcpy(static_cast<void*>(p), &h, sizeof h);
  }
  // No F16C in the baseline ISA: one exact scalar conversion per lane.
  MIXPREC_INLINE static vf load(const f16* p) {
    return vf{p[0].to_float(), p[1].to_float(), p[2].to_float(), p[3].to_float()};
  }
  MIXPREC_INLINE static void store(f16* p, vf v) {
    for (int j = 0; j < 4; ++j) p[j] = f16(static_cast<float>(v[j]));
  }
};

#define MIXPREC_AVX2_F16C [[gnu::target("avx2,fma,f16c")]] inline
template <>
struct StorageLanes<8> {
  using vf = Lanes<8>::vf;
  using vu = Lanes<8>::vu;
  MIXPREC_AVX2_F16C static vf load(const bf16* p) {
    return reinterpret_cast<vf>(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  MIXPREC_AVX2_F16C static void store(bf16* p, vf v) {
    const __m256i r = reinterpret_cast<__m256i>(bf16_round_bits(reinterpret_cast<vu>(v)));
    const __m256i packed = _mm256_packus_epi32(r, r);  // lanes < 2^16: no saturation
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
  }
  MIXPREC_AVX2_F16C static vf load(const f16* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  MIXPREC_AVX2_F16C static void store(f16* p, vf v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};
#undef MIXPREC_AVX2_F16C

#define MIXPREC_AVX512 [[gnu::target("avx512f,avx2,fma,f16c")]] inline
template <>
struct StorageLanes<16> {
  using vf = Lanes<16>::vf;
  using vu = Lanes<16>::vu;
  MIXPREC_AVX512 static vf load(const bf16* p) {
    return reinterpret_cast<vf>(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }
  MIXPREC_AVX512 static void store(bf16* p, vf v) {
    const __m512i r = reinterpret_cast<__m512i>(bf16_round_bits(reinterpret_cast<vu>(v)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
  }
  MIXPREC_AVX512 static vf load(const f16* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  MIXPREC_AVX512 static void store(f16* p, vf v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};
#undef MIXPREC_AVX512

}  // namespace mixprec::simd
