// AVX2/F16C conversion kernels. This file alone is compiled with -mavx2 -mfma -mf16c and is
// only entered after cpu_has_avx2_f16c(). It calls no inline code of other files at run time
// (scalar tails are left to the caller); the constexpr FloatFormat helpers it includes are
// folded into constants at -O2 and above.
//
// The generic kernel is the reference encoder (encode.h) transcribed lane by lane in integer
// arithmetic, so it gives the same bits for every format and rounding mode. bf16 and f16 with
// round-to-nearest-even or toward-zero (no saturation) take shorter special-purpose paths.
#include <immintrin.h>

#include <algorithm>
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
  // No inf and no NaN (E2M1): a NaN becomes +max finite (satfinite; encode.h), sign dropped.
  bool finite_only;

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
        nan(_mm256_set1_epi32(static_cast<int>(f.has_nan ? f.nan_bits() : f.max_finite_bits()))),
        nan_keeps_payload(f.nan_keeps_payload),
        finite_only(!f.has_inf && !f.has_nan) {}
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
  return _mm256_or_si256(enc, F.finite_only ? _mm256_andnot_si256(is_nan, sign) : sign);
}

// ---- Philox4x32-10, vectorised -------------------------------------------------------------
// Random words for 16 * kQuads consecutive elements starting at element 4*block0 (block0 =
// first Philox block), laid out so out[v] holds elements 8v..8v+7. Each register holds 4
// blocks, one 32-bit state word in the low half of each 64-bit lane: _mm256_mul_epu32 then
// yields the full 64-bit product (hi and lo) with no shuffles. The high halves carry junk that
// the multiplier never reads and the final packing drops.
template <int kQuads>
inline void philox_words(uint64_t seed, uint64_t stream, uint64_t block0, __m256i* out) {
  __m256i c0[kQuads], c1[kQuads], c2[kQuads], c3[kQuads];
  const __m256i s_lo = _mm256_set1_epi64x(static_cast<int64_t>(stream & 0xFFFFFFFFu));
  const __m256i s_hi = _mm256_set1_epi64x(static_cast<int64_t>(stream >> 32));
  for (int q = 0; q < kQuads; ++q) {
    const auto first = static_cast<int64_t>(block0 + 4 * static_cast<uint64_t>(q));
    const __m256i block =
        _mm256_add_epi64(_mm256_set1_epi64x(first), _mm256_setr_epi64x(0, 1, 2, 3));
    c0[q] = block;
    c1[q] = _mm256_srli_epi64(block, 32);
    c2[q] = s_lo;
    c3[q] = s_hi;
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const __m256i m0 = _mm256_set1_epi64x(0xD2511F53);
  const __m256i m1 = _mm256_set1_epi64x(0xCD9E8D57);
  for (int round = 0; round < 10; ++round) {
    const __m256i key0 = _mm256_set1_epi32(static_cast<int>(k0));
    const __m256i key1 = _mm256_set1_epi32(static_cast<int>(k1));
    for (int q = 0; q < kQuads; ++q) {
      const __m256i p0 = _mm256_mul_epu32(c0[q], m0);
      const __m256i p1 = _mm256_mul_epu32(c2[q], m1);
      c0[q] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1[q]), key0);
      c1[q] = p1;
      c2[q] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3[q]), key1);
      c3[q] = p0;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int q = 0; q < kQuads; ++q) {
    // Lane j (64-bit) of c_w holds word w of block j in its low half.
    const __m256i t01 = _mm256_blend_epi32(c0[q], _mm256_slli_epi64(c1[q], 32),
                                           0xAA);  // b0w0 b0w1 b1w0 b1w1 | b2 b3
    const __m256i t23 =
        _mm256_blend_epi32(c2[q], _mm256_slli_epi64(c3[q], 32), 0xAA);  // b0w2 b0w3 b1w2 b1w3 | ...
    const __m256i u0 = _mm256_unpacklo_epi64(t01, t23);        // b0 words 0-3 | b2 words 0-3
    const __m256i u1 = _mm256_unpackhi_epi64(t01, t23);        // b1 | b3
    out[2 * q] = _mm256_permute2x128_si256(u0, u1, 0x20);      // b0 b1
    out[2 * q + 1] = _mm256_permute2x128_si256(u0, u1, 0x31);  // b2 b3
  }
}

// Prefetch distance: with two threads streaming, hardware prefetch alone leaves too few
// loads in flight to reach memcpy bandwidth.
constexpr std::size_t kPrefetchBytes = 4096;
inline void prefetch(const void* p) {
  _mm_prefetch(static_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
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
  const int out_bits = tf32 ? 32 : std::max(8, f.total_bits());  // E2M1: a byte each
  const std::size_t out_bytes = static_cast<std::size_t>(out_bits / 8);
  const std::size_t done = n / 64 * 64;
  __m256i random[8] = {};
  for (std::size_t i = 0; i < done; i += 64) {
    if constexpr (kMode == Rounding::stochastic) {
      philox_words<2>(o.seed, o.stream, (index0 + i) / 4, random);
      philox_words<2>(o.seed, o.stream, (index0 + i) / 4 + 8, random + 4);
    }
    for (int half = 0; half < 2; ++half) {
      const float* s = src + i + 32 * half;
      prefetch(s);
      prefetch(s + 16);
      __m256i v[4];
      for (int k = 0; k < 4; ++k) {
        const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 8 * k));
        v[k] = encode8<kMode, kSaturate>(bits, F, random[4 * half + k]);
        if (tf32) v[k] = _mm256_slli_epi32(v[k], 13);
      }
      store32(out_bits, static_cast<char*>(dst) + (i + 32 * half) * out_bytes, v);
    }
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
// bf16 from f32 always discards exactly 16 bits (the formats share the exponent range), so
// every mode is "add a bias to the f32 bits, keep the top half":
//   nearest-even: 0x7FFF + lsb;  toward zero: 0;  stochastic: (~random) >> 16, which carries
//   into the top half iff (random >> 16) < low half, encode_bits()'s rule for 16 bits.
// NaN lanes take (bits >> 16) | quiet bit, exactly as encode_bits() does.
template <Rounding kMode>
std::size_t bf16_fast(const float* src, uint16_t* dst, std::size_t n, const ConvertOptions& o,
                      uint64_t index0) {
  const std::size_t done = n / 64 * 64;
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
  auto one = [&](__m256i b, __m256i random) {
    const __m256i nan_value = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
    __m256i bias = _mm256_setzero_si256();  // toward zero: plain truncation (max stays finite)
    if constexpr (kMode == Rounding::nearest_even)
      bias = _mm256_add_epi32(_mm256_set1_epi32(0x7FFF),
                              _mm256_and_si256(_mm256_srli_epi32(b, 16), ones32()));
    else if constexpr (kMode == Rounding::stochastic)
      bias = _mm256_srli_epi32(_mm256_xor_si256(random, _mm256_set1_epi32(-1)), 16);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(b, bias), 16);
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, abs_mask), inf);
    return _mm256_blendv_epi8(rounded, nan_value, is_nan);
  };
  __m256i random[8] = {};
  for (std::size_t i = 0; i < done; i += 64) {
    if constexpr (kMode == Rounding::stochastic) {
      philox_words<2>(o.seed, o.stream, (index0 + i) / 4, random);
      philox_words<2>(o.seed, o.stream, (index0 + i) / 4 + 8, random + 4);
    }
    for (int k = 0; k < 8; k += 2) {
      const float* s = src + i + 8 * k;
      prefetch(s);
      const __m256i a = one(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)), random[k]);
      const __m256i b =
          one(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 8)), random[k + 1]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 8 * k), pack32to16(a, b));
    }
  }
  return done;
}

// f16 stochastic: in the f16 normal range the f32 -> f16 step discards exactly 13 bits, so
// adding (~random) >> 19 to the f32 bits and clearing the low 13 gives encode_bits()'s value,
// exactly representable in f16; F16C then converts it exactly, and with nearest-even turns a
// sum >= 2^16 into inf as the encoder does (inf inputs stay inf: their low bits are cleared).
// NaN lanes convert unchanged, and a vector holding any |x| in (0, 2^-14) (f16 subnormal
// range, where more bits are discarded) takes the generic encoder.
std::size_t f16_stochastic(const float* src, uint16_t* dst, std::size_t n, const ConvertOptions& o,
                           uint64_t index0) {
  const VecFormat F(kFormatF16, false);
  const std::size_t done = n / 64 * 64;
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i keep = _mm256_set1_epi32(static_cast<int>(0xFFFFE000u));
  const __m256i below_min_normal = _mm256_set1_epi32(0x387FFFFE);  // (2^-14 bits) - 2
  const __m256i f32_inf = _mm256_set1_epi32(0x7F800000);
  __m256i random[8] = {};
  for (std::size_t i = 0; i < done; i += 64) {
    philox_words<2>(o.seed, o.stream, (index0 + i) / 4, random);
    philox_words<2>(o.seed, o.stream, (index0 + i) / 4 + 8, random + 4);
    for (int k = 0; k < 8; ++k) {
      const float* s = src + i + 8 * k;
      if (k % 2 == 0) prefetch(s);
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
      const __m256i a = _mm256_and_si256(b, abs_mask);
      // a - 1 <= 2^-14 bits - 2 (unsigned) picks 0 < |x| < 2^-14; zero wraps to 0xFFFFFFFF
      const __m256i am1 = _mm256_sub_epi32(a, ones32());
      const __m256i tiny = _mm256_cmpeq_epi32(_mm256_min_epu32(am1, below_min_normal), am1);
      __m128i h;
      if (!_mm256_testz_si256(tiny, tiny)) {
        h = _mm256_castsi256_si128(pack32to16(encode8<Rounding::stochastic, false>(b, F, random[k]),
                                              _mm256_setzero_si256()));
      } else {
        const __m256i noise =
            _mm256_srli_epi32(_mm256_xor_si256(random[k], _mm256_set1_epi32(-1)), 19);
        const __m256i t = _mm256_and_si256(_mm256_add_epi32(b, noise), keep);
        const __m256i x = _mm256_blendv_epi8(t, b, _mm256_cmpgt_epi32(a, f32_inf));
        h = _mm256_cvtps_ph(_mm256_castsi256_ps(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 8 * k), h);
    }
  }
  return done;
}

// f16, RNE or RTZ without saturation: the F16C instruction implements exactly these rules.
template <int kImm>
std::size_t f16_fast(const float* src, uint16_t* dst, std::size_t n) {
  const std::size_t done = n / 16 * 16;
  for (std::size_t i = 0; i < done; i += 16) {
    prefetch(src + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kImm));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 8),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), kImm));
  }
  return done;
}

// The vector encoders implement the satfinite convention; the ml_dtypes one differs only
// under saturate or toward-zero rounding, which the scalar kernel then does whole.
bool vector_encoders_apply(const ConvertOptions& o) {
  return o.overflow == OverflowConvention::satfinite ||
         (!o.saturate && o.rounding != Rounding::toward_zero);
}

}  // namespace

std::size_t avx2_narrow_f32(const FloatFormat& f, const float* src, void* dst, std::size_t n,
                            const ConvertOptions& o, uint64_t index0) {
  if (!vector_encoders_apply(o)) return 0;
  if (&f == &kFormatBF16 && !o.saturate) {
    auto* d = static_cast<uint16_t*>(dst);
    switch (o.rounding) {
      case Rounding::nearest_even:
        return bf16_fast<Rounding::nearest_even>(src, d, n, o, index0);
      case Rounding::toward_zero:
        return bf16_fast<Rounding::toward_zero>(src, d, n, o, index0);
      case Rounding::stochastic:
        return bf16_fast<Rounding::stochastic>(src, d, n, o, index0);
    }
  }
  if (&f == &kFormatF16 && !o.saturate) {
    if (o.rounding == Rounding::nearest_even)
      return f16_fast<_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC>(
          src, static_cast<uint16_t*>(dst), n);
    if (o.rounding == Rounding::toward_zero)
      return f16_fast<_MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC>(src, static_cast<uint16_t*>(dst), n);
    return f16_stochastic(src, static_cast<uint16_t*>(dst), n, o, index0);
  }
  // FP4 (a byte each) stores as FP8 does; ml_dtypes' NaN rule for it (a signed zero) is the
  // scalar encoder's alone.
  if (f.total_bits() < 8 && o.overflow != OverflowConvention::satfinite) return 0;
  return generic_dispatch(f, src, dst, n, o, index0, false);
}

std::size_t avx2_tf32(const float* src, float* dst, std::size_t n, const ConvertOptions& o,
                      uint64_t index0) {
  if (!vector_encoders_apply(o)) return 0;
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
