// Every one of the 2^32 f32 bit patterns, through the AVX2 kernels and the portable scalar
// kernels, against independent references: exact-distance RNE for bf16, the CPU's F16C
// instruction for f16, and sorted-table search for fp8. Under sanitizers a strided subset of
// 65536-pattern chunks runs instead (every 61st chunk), which still crosses every exponent.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mixprec/numerics/convert.h"
#include "reference_rounding.h"

namespace mixprec {
namespace {

#ifdef MIXPREC_SANITIZED
constexpr uint64_t kChunkStride = 61;
#else
constexpr uint64_t kChunkStride = 1;
#endif
constexpr uint64_t kChunk = 1 << 16;
constexpr uint64_t kChunks = (uint64_t{1} << 32) / kChunk;

struct Mismatches {
  std::atomic<uint64_t> count{0};
  std::atomic<bool> reported{false};
  void add(const char* what, uint32_t input, uint32_t got, uint32_t want) {
    if (count.fetch_add(1) < 5)
      ADD_FAILURE() << what << ": input 0x" << std::hex << input << " got 0x" << got << " want 0x"
                    << want;
  }
};

// Runs check(inputs, n) over all chunks of f32 patterns, in parallel.
template <class Check>
void for_all_f32(Check&& check, uint64_t extra_stride = 1) {
#pragma omp parallel
  {
    std::vector<uint32_t> in(kChunk);
#pragma omp for schedule(dynamic, 8)
    for (uint64_t c = 0; c < kChunks; ++c) {
      if (c % (kChunkStride * extra_stride) != 0) continue;
      for (uint64_t i = 0; i < kChunk; ++i) in[i] = static_cast<uint32_t>(c * kChunk + i);
      check(reinterpret_cast<const float*>(in.data()), kChunk);
    }
  }
}

uint32_t f32_bits(float x) {
  return std::bit_cast<uint32_t>(x);
}

struct NoReference {};

// SIMD and scalar kernels agree on every input, for one format and options; `reference`
// (optional) is checked on every `reference_every`-th input.
template <class Bits, class Reference = NoReference>
void expect_simd_equals_scalar(DType dtype, const ConvertOptions& opts, Reference reference = {},
                               std::size_t reference_every = 1, uint64_t chunk_stride = 1) {
  ASSERT_TRUE(cpu_has_avx2_f16c()) << "this machine has no AVX2/F16C: nothing to compare";
  ASSERT_EQ(sizeof(Bits), dtype_size(dtype));
  Mismatches simd_vs_scalar, scalar_vs_ref;
  for_all_f32(
      [&](const float* in, std::size_t n) {
        std::vector<Bits> simd(n), scalar(n);
        ConvertOptions o = opts;
        o.index_base = f32_bits(in[0]);  // distinct random numbers in every chunk
        convert_from_f32(in, dtype, simd.data(), n, o, Isa::avx2);
        convert_from_f32(in, dtype, scalar.data(), n, o, Isa::scalar);
        for (std::size_t i = 0; i < n; ++i)
          if (simd[i] != scalar[i])
            simd_vs_scalar.add("simd vs scalar", f32_bits(in[i]), simd[i], scalar[i]);
        if constexpr (!std::is_same_v<Reference, NoReference>) {
          for (std::size_t i = 0; i < n; i += reference_every) {
            const uint32_t want = reference(in[i]);
            if (scalar[i] != want)
              scalar_vs_ref.add("scalar vs reference", f32_bits(in[i]), scalar[i], want);
          }
        }
      },
      chunk_stride);
  EXPECT_EQ(simd_vs_scalar.count.load(), 0u);
  EXPECT_EQ(scalar_vs_ref.count.load(), 0u);
}

TEST(Exhaustive, Bf16NearestEvenMatchesExactArithmetic) {
  expect_simd_equals_scalar<uint16_t>(DType::bf16, {},
                                      [](float x) { return testref::bf16_rne_exact(f32_bits(x)); });
}

TEST(Exhaustive, Bf16TowardZeroIsTruncation) {
  ConvertOptions o;
  o.rounding = Rounding::toward_zero;
  expect_simd_equals_scalar<uint16_t>(DType::bf16, o, [](float x) {
    const uint32_t b = f32_bits(x);
    return std::isnan(x) ? (b >> 16) | 0x40u : b >> 16;
  });
}

// The AVX2 f16 kernel for these two modes is the F16C instruction itself (VCVTPS2PH), so
// "SIMD equals scalar" is "the portable encoder equals the hardware", on every input.
TEST(Exhaustive, F16NearestEvenScalarMatchesF16CInstruction) {
  expect_simd_equals_scalar<uint16_t>(DType::f16, {});
}

TEST(Exhaustive, F16TowardZeroScalarMatchesF16CInstruction) {
  ConvertOptions o;
  o.rounding = Rounding::toward_zero;
  expect_simd_equals_scalar<uint16_t>(DType::f16, o);
}

TEST(Exhaustive, F16NearestEvenMatchesGccFloat16OnFiniteValues) {
  // A second, compiler-provided reference; NaNs are compared as NaN only (payload rules of
  // the compiler's conversion are not ours to assume).
  Mismatches bad;
  for_all_f32([&](const float* in, std::size_t n) {
    std::vector<uint16_t> out(n);
    convert_from_f32(in, DType::f16, out.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto want = std::bit_cast<uint16_t>(static_cast<_Float16>(in[i]));
      const bool both_nan = std::isnan(in[i]) && (out[i] & 0x7FFF) > 0x7C00;
      if (out[i] != want && !both_nan) bad.add("f16 vs _Float16", f32_bits(in[i]), out[i], want);
    }
  });
  EXPECT_EQ(bad.count.load(), 0u);
}

// The scalar Philox costs ~10 cycles an element, so this runs on every 2nd chunk: all 65536
// low-half patterns (every discarded fraction) under half of the sign/exponent/high prefixes.
TEST(Exhaustive, StochasticBf16AndF16SimdEqualsScalar) {
  ConvertOptions o;
  o.rounding = Rounding::stochastic;
  o.seed = 0x5EED5EED12345678ull;
  o.stream = 3;
  expect_simd_equals_scalar<uint16_t>(DType::bf16, o, NoReference{}, 1, 2);
  expect_simd_equals_scalar<uint16_t>(DType::f16, o, NoReference{}, 1, 2);
}

// fp8 against sorted-table search: NaN/inf/overflow handled as the OCP spec says.
uint32_t fp8_reference(const testref::Spec& spec, const std::vector<double>& mags, bool saturate,
                       float x) {
  const uint32_t sign = std::signbit(x) ? 0x80u : 0u;
  const uint32_t max_bits = static_cast<uint32_t>(mags.size() - 1);
  const uint32_t overflow = spec.ieee_specials ? 0x7Cu : 0x7Fu;
  if (std::isnan(x)) return sign | 0x7F;
  if (std::isinf(x)) return sign | (saturate ? max_bits : overflow);
  const uint32_t idx = testref::nearest_even_index(mags, std::fabs(static_cast<double>(x)));
  if (idx > max_bits) return sign | (saturate ? max_bits : overflow);
  return sign | idx;
}

// The table search costs ~20x a conversion, so it checks every 7th input (7 is odd, so every
// mantissa remainder pattern, ties included, is still visited across chunks). The saturating
// variant differs only at overflow, so it runs on every 4th chunk (all exponents included).
TEST(Exhaustive, Fp8NearestEvenSimdEqualsScalarAndTableSearch) {
  for (const bool saturate : {false, true}) {
    ConvertOptions o;
    o.saturate = saturate;
    const uint64_t chunk_stride = saturate ? 4 : 1;
    const auto e4m3 = testref::magnitudes(testref::kE4M3FN);
    const auto e5m2 = testref::magnitudes(testref::kE5M2);
    expect_simd_equals_scalar<uint8_t>(
        DType::f8_e4m3fn, o,
        [&](float x) { return fp8_reference(testref::kE4M3FN, e4m3, saturate, x); }, 7,
        chunk_stride);
    expect_simd_equals_scalar<uint8_t>(
        DType::f8_e5m2, o,
        [&](float x) { return fp8_reference(testref::kE5M2, e5m2, saturate, x); }, 7, chunk_stride);
  }
}

// E2M1 (a byte each) against Transformer Engine's reference cast (cast_to_fp4x2): magnitude
// thresholds with the ties going to the even code, +-6 past 5, and under satfinite a NaN as
// +6. Saturation changes nothing (the format has no inf to overflow to).
uint32_t e2m1_reference(float x) {
  if (std::isnan(x)) return 0x7;
  const float a = std::fabs(x);
  const uint32_t code = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                        (a >= 3.5f) + (a > 5.0f);
  return (std::signbit(x) ? 0x8u : 0u) | code;
}

TEST(Exhaustive, E2m1NearestEvenSimdEqualsScalarAndThresholds) {
  for (const bool saturate : {false, true}) {
    ConvertOptions o;
    o.saturate = saturate;
    expect_simd_equals_scalar<uint8_t>(DType::f4_e2m1fn, o, e2m1_reference, 3, saturate ? 4 : 1);
  }
}

// NVFP4's gradients round stochastically: the AVX2 kernel against the scalar one (every 4th
// chunk: the scalar Philox dominates).
TEST(Exhaustive, StochasticE2m1SimdEqualsScalar) {
  ConvertOptions o;
  o.rounding = Rounding::stochastic;
  o.saturate = true;
  o.seed = 0xF0F0123456789ull;
  o.stream = 11;
  expect_simd_equals_scalar<uint8_t>(DType::f4_e2m1fn, o, NoReference{}, 1, 4);
}

TEST(Exhaustive, Tf32NearestEvenSimdEqualsScalar) {
  ASSERT_TRUE(cpu_has_avx2_f16c());
  Mismatches bad;
  for_all_f32([&](const float* in, std::size_t n) {
    std::vector<float> simd(n), scalar(n);
    round_to_tf32(in, simd.data(), n, {}, Isa::avx2);
    round_to_tf32(in, scalar.data(), n, {}, Isa::scalar);
    for (std::size_t i = 0; i < n; ++i)
      if (f32_bits(simd[i]) != f32_bits(scalar[i]))
        bad.add("tf32", f32_bits(in[i]), f32_bits(simd[i]), f32_bits(scalar[i]));
  });
  EXPECT_EQ(bad.count.load(), 0u);
}

}  // namespace
}  // namespace mixprec
