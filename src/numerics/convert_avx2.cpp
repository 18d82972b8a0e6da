// AVX2/F16C conversion kernels. This file alone is compiled with -mavx2 -mfma -mf16c and is
// only entered after cpu_has_avx2_f16c(); it includes no inline code shared with other files,
// so no AVX2 instruction can leak into the portable path through a merged inline function.
//
// The generic kernel is the reference encoder (encode.h) transcribed lane by lane in integer
// arithmetic, so it gives the same bits for every format and rounding mode. bf16 and f16 with
// round-to-nearest-even or toward-zero (no saturation) take shorter special-purpose paths.
#include <immintrin.h>

#include <cstdint>

#include "convert_kernels.h"

namespace mixprec::kernels {
namespace {

// Format constants broadcast once per call.
struct VecFormat {
  __m256i min_exp_biased;  // f32-biased exponent of the smallest normal: min_exp + 127
  __m256i mant_shift;      // 23 - mant_bits
  __m256i exp_rebias;      // bias - 128: added to the f32-biased exponent, then << mant_bits
  __m128i mant_bits;       // shift count for _mm256_sll_epi32
  __m128i sign_shift;      // 32 - total_bits
  __m256i mant_mask;
  __m256i max_finite;
  __m256i overflow;     // inf, or the canonical NaN for formats without inf
  __m256i special_inf;  // what +-inf becomes
  __m256i nan;          // canonical NaN
  bool nan_keeps_payload;

  VecFormat(const FloatFormat& f, bool saturate)
      : min_exp_biased(_mm256_set1_epi32(f.min_exp() + 127)),
        mant_shift(_mm256_set1_epi32(23 - f.mant_bits)),
        exp_rebias(_mm256_set1_epi32(f.bias - 128)),
        mant_bits(_mm_cvtsi32_si128(f.mant_bits)),
        sign_shift(_mm_cvtsi32_si128(32 - f.total_bits())),
        mant_mask(_mm256_set1_epi32(static_cast<int>(f.mant_mask()))),
        max_finite(_mm256_set1_epi32(static_cast<int>(f.max_finite_bits()))),
        overflow(_mm256_set1_epi32(static_cast<int>(f.has_inf ? f.inf_bits() : f.nan_bits()))),
        special_inf(saturate ? max_finite : overflow),
        nan(_mm256_set1_epi32(static_cast<int>(f.nan_bits()))),
        nan_keeps_payload(f.nan_keeps_payload) {}
};

inline __m256i ones32() {
  return _mm256_set1_epi32(1);
}

// Encodes 8 f32 bit patterns; see encode_bits() in encode.h for the scalar statement.
template <Rounding kMode, bool kSaturate>
inline __m256i encode8(__m256i bits, const VecFormat& F, __m256i random) {
  const __m256i sign = _mm256_sll_epi32(_mm256_srli_epi32(bits, 31),
                                        _mm_sub_epi32(_mm_cvtsi32_si128(31), F.sign_shift));
  const __m256i a = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i exp_field = _mm256_srli_epi32(a, 23);
  const __m256i frac = _mm256_and_si256(a, _mm256_set1_epi32(0x7FFFFF));
  const __m256i is_normal = _mm256_cmpgt_epi32(exp_field, _mm256_setzero_si256());
  const __m256i m = _mm256_or_si256(frac, _mm256_and_si256(is_normal, _mm256_set1_epi32(0x800000)));
  const __m256i e_eff = _mm256_max_epi32(exp_field, ones32());
  const __m256i t = _mm256_max_epi32(e_eff, F.min_exp_biased);
  const __m256i shift = _mm256_add_epi32(_mm256_sub_epi32(t, e_eff), F.mant_shift);
  const __m256i r = _mm256_srlv_epi32(m, shift);
  const __m256i rem =
      _mm256_and_si256(m, _mm256_sub_epi32(_mm256_sllv_epi32(ones32(), shift), ones32()));

  __m256i up_mask = _mm256_setzero_si256();  // all-ones lanes round away from zero
  if constexpr (kMode == Rounding::nearest_even) {
    // shift >= 25 discards all of m (< 2^24), so half = 2^24 serves there too.
    const __m256i half = _mm256_sllv_epi32(
        ones32(), _mm256_sub_epi32(_mm256_min_epi32(shift, _mm256_set1_epi32(25)), ones32()));
    const __m256i gt = _mm256_cmpgt_epi32(rem, half);
    const __m256i tie_odd = _mm256_and_si256(
        _mm256_cmpeq_epi32(rem, half), _mm256_cmpeq_epi32(_mm256_and_si256(r, ones32()), ones32()));
    up_mask = _mm256_or_si256(gt, tie_odd);
  } else if constexpr (kMode == Rounding::stochastic) {
    // frac32 = rem << (32 - shift) or rem >> (shift - 32); out-of-range counts give 0.
    const __m256i k32 = _mm256_set1_epi32(32);
    const __m256i frac32 = _mm256_or_si256(_mm256_sllv_epi32(rem, _mm256_sub_epi32(k32, shift)),
                                           _mm256_srlv_epi32(rem, _mm256_sub_epi32(shift, k32)));
    const __m256i flip = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    up_mask = _mm256_cmpgt_epi32(_mm256_xor_si256(frac32, flip), _mm256_xor_si256(random, flip));
  }
  __m256i enc =
      _mm256_add_epi32(_mm256_sll_epi32(_mm256_add_epi32(t, F.exp_rebias), F.mant_bits), r);
  enc = _mm256_sub_epi32(enc, up_mask);  // - (-1) == + 1

  const __m256i over = _mm256_cmpgt_epi32(enc, F.max_finite);
  const __m256i over_value =
      (kSaturate || kMode == Rounding::toward_zero) ? F.max_finite : F.overflow;
  enc = _mm256_blendv_epi8(enc, over_value, over);

  // inf / NaN inputs
  const __m256i is_special = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F7FFFFF));
  const __m256i is_nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F800000));
  __m256i nan_value = F.nan;
  if (F.nan_keeps_payload)
    nan_value = _mm256_or_si256(
        nan_value, _mm256_and_si256(_mm256_srlv_epi32(frac, F.mant_shift), F.mant_mask));
  const __m256i special = _mm256_blendv_epi8(F.special_inf, nan_value, is_nan);
  enc = _mm256_blendv_epi8(enc, special, is_special);
  return _mm256_or_si256(enc, sign);
}

// ---- Philox4x32-10 for 8 blocks at once (one block per 32-bit lane) ----------------------
inline void mulhilo8(__m256i a, __m256i mul, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, mul);                        // lanes 0,2,4,6
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), mul);  // lanes 1,3,5,7
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// Random words for 32 consecutive elements starting at element 4*block0 (block0 = first
// Philox block), laid out so out[v] holds elements 8v..8v+7.
inline void philox32(uint64_t seed, uint64_t stream, uint64_t block0, __m256i out[4]) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(block0)), lane);
  // carry into the high counter word when the low word wraps inside this group
  const __m256i wrapped = _mm256_cmpgt_epi32(
      _mm256_xor_si256(_mm256_set1_epi32(static_cast<int>(block0)), _mm256_set1_epi32(INT32_MIN)),
      _mm256_xor_si256(lo, _mm256_set1_epi32(INT32_MIN)));
  __m256i c0 = lo;
  __m256i c1 = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int>(block0 >> 32)), wrapped);
  __m256i c2 = _mm256_set1_epi32(static_cast<int>(stream));
  __m256i c3 = _mm256_set1_epi32(static_cast<int>(stream >> 32));
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  for (int round = 0; round < 10; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    mulhilo8(c0, m0, hi0, lo0);
    mulhilo8(c2, m1, hi1, lo1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    c1 = lo1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // Transpose: lane b of (c0,c1,c2,c3) is block b's 4 words; element 4b+w = word w of block b.
  const __m256i t0 = _mm256_unpacklo_epi32(c0, c1);  // b0w0 b0w1 b1w0 b1w1 | b4.. b5..
  const __m256i t1 = _mm256_unpackhi_epi32(c0, c1);  // b2w0 b2w1 b3w0 b3w1 | b6.. b7..
  const __m256i t2 = _mm256_unpacklo_epi32(c2, c3);  // b0w2 b0w3 b1w2 b1w3 | ...
  const __m256i t3 = _mm256_unpackhi_epi32(c2, c3);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2);  // b0 words 0-3 | b4 words 0-3
  const __m256i u1 = _mm256_unpackhi_epi64(t0, t2);  // b1 | b5
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3);  // b2 | b6
  const __m256i u3 = _mm256_unpackhi_epi64(t1, t3);  // b3 | b7
  out[0] = _mm256_permute2x128_si256(u0, u1, 0x20);  // b0 b1
  out[1] = _mm256_permute2x128_si256(u2, u3, 0x20);  // b2 b3
  out[2] = _mm256_permute2x128_si256(u0, u1, 0x31);  // b4 b5
  out[3] = _mm256_permute2x128_si256(u2, u3, 0x31);  // b6 b7
}

// ---- stores of 32 encoded lanes ------------------------------------------------------------
inline __m256i pack32to16(__m256i a, __m256i b) {
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
}

inline void store32(int total_bits, void* dst, const __m256i v[4]) {
  if (total_bits == 16) {
    auto* d = static_cast<__m256i*>(dst);
    _mm256_storeu_si256(d, pack32to16(v[0], v[1]));
    _mm256_storeu_si256(d + 1, pack32to16(v[2], v[3]));
  } else if (total_bits == 8) {
    const __m256i lo = pack32to16(v[0], v[1]), hi = pack32to16(v[2], v[3]);
    _mm256_storeu_si256(static_cast<__m256i*>(dst),
                        _mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), 0xD8));
  } else {  // 32-bit results (tf32 stored as f32)
    auto* d = static_cast<__m256i*>(dst);
    for (int k = 0; k < 4; ++k) _mm256_storeu_si256(d + k, v[k]);
  }
}

template <Rounding kMode, bool kSaturate>
std::size_t generic_narrow(const FloatFormat& f, const float* src, void* dst, std::size_t n,
                           const ConvertOptions& o, uint64_t index0, bool tf32) {
  const VecFormat F(f, kSaturate);
  const int out_bits = tf32 ? 32 : f.total_bits();
  const std::size_t out_bytes = static_cast<std::size_t>(out_bits / 8);
  const std::size_t done = n / 32 * 32;
  __m256i random[4] = {};
  for (std::size_t i = 0; i < done; i += 32) {
    if constexpr (kMode == Rounding::stochastic)
      philox32(o.seed, o.stream, (index0 + i) / 4, random);
    __m256i v[4];
    for (int k = 0; k < 4; ++k) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 8 * k));
      v[k] = encode8<kMode, kSaturate>(bits, F, random[k]);
      if (tf32) v[k] = _mm256_slli_epi32(v[k], 13);
    }
    store32(out_bits, static_cast<char*>(dst) + i * out_bytes, v);
  }
  return done;
}

template <Rounding kMode>
std::size_t generic_narrow_sat(const FloatFormat& f, const float* src, void* dst, std::size_t n,
                               const ConvertOptions& o, uint64_t index0, bool tf32) {
  return o.saturate ? generic_narrow<kMode, true>(f, src, dst, n, o, index0, tf32)
                    : generic_narrow<kMode, false>(f, src, dst, n, o, index0, tf32);
}

std::size_t generic_dispatch(const FloatFormat& f, const float* src, void* dst, std::size_t n,
                             const ConvertOptions& o, uint64_t index0, bool tf32) {
  switch (o.rounding) {
    case Rounding::nearest_even:
      return generic_narrow_sat<Rounding::nearest_even>(f, src, dst, n, o, index0, tf32);
    case Rounding::toward_zero:
      return generic_narrow_sat<Rounding::toward_zero>(f, src, dst, n, o, index0, tf32);
    case Rounding::stochastic:
      return generic_narrow_sat<Rounding::stochastic>(f, src, dst, n, o, index0, tf32);
  }
  return 0;
}

// ---- special-purpose fast paths ------------------------------------------------------------
// bf16, RNE or RTZ: add the rounding bias to the f32 bits and keep the top half; NaN lanes
// take (bits >> 16) | quiet bit, exactly as encode_bits() does.
template <bool kNearest>
std::size_t bf16_fast(const float* src, uint16_t* dst, std::size_t n) {
  const std::size_t done = n / 16 * 16;
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
  auto one = [&](__m256i b) {
    const __m256i nan_value = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
    __m256i rounded;
    if constexpr (kNearest) {
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), ones32());
      rounded = _mm256_srli_epi32(
          _mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb)), 16);
    } else {
      // toward zero: truncation, but finite values must not reach inf (none can: the largest
      // finite f32 truncates to 0x7F7F).
      rounded = _mm256_srli_epi32(b, 16);
    }
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, abs_mask), inf);
    return _mm256_blendv_epi8(rounded, nan_value, is_nan);
  };
  for (std::size_t i = 0; i < done; i += 16) {
    const __m256i a = one(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    const __m256i b = one(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 8)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), pack32to16(a, b));
  }
  return done;
}

// f16, RNE or RTZ without saturation: the F16C instruction implements exactly these rules.
template <int kImm>
std::size_t f16_fast(const float* src, uint16_t* dst, std::size_t n) {
  const std::size_t done = n / 8 * 8;
  for (std::size_t i = 0; i < done; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kImm));
  return done;
}

}  // namespace

std::size_t avx2_narrow_f32(const FloatFormat& f, const float* src, void* dst, std::size_t n,
                            const ConvertOptions& o, uint64_t index0) {
  if (&f == &kFormatBF16 && !o.saturate) {
    if (o.rounding == Rounding::nearest_even)
      return bf16_fast<true>(src, static_cast<uint16_t*>(dst), n);
    if (o.rounding == Rounding::toward_zero)
      return bf16_fast<false>(src, static_cast<uint16_t*>(dst), n);
  }
  if (&f == &kFormatF16 && !o.saturate) {
    if (o.rounding == Rounding::nearest_even)
      return f16_fast<_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC>(
          src, static_cast<uint16_t*>(dst), n);
    if (o.rounding == Rounding::toward_zero)
      return f16_fast<_MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC>(src, static_cast<uint16_t*>(dst), n);
  }
  return generic_dispatch(f, src, dst, n, o, index0, false);
}

std::size_t avx2_tf32(const float* src, float* dst, std::size_t n, const ConvertOptions& o,
                      uint64_t index0) {
  return generic_dispatch(kFormatTF32, src, dst, n, o, index0, true);
}

std::size_t avx2_widen_f32(const FloatFormat& f, const void* src, float* dst, std::size_t n) {
  const std::size_t done = n / 8 * 8;
  if (&f == &kFormatBF16) {
    const auto* s = static_cast<const uint16_t*>(src);
    for (std::size_t i = 0; i < done; i += 8) {
      const __m256i w =
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(w, 16));
    }
    return done;
  }
  if (&f == &kFormatF16) {
    const auto* s = static_cast<const uint16_t*>(src);
    for (std::size_t i = 0; i < done; i += 8)
      _mm256_storeu_ps(dst + i,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
    return done;
  }
  return 0;  // fp8 widening is a table lookup: the scalar kernel is already memory-bound
}

}  // namespace mixprec::kernels
