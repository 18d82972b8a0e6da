// Every 8- and 16-bit pattern: decoding is exact (checked against bit-field arithmetic and,
// for f16, the F16C instruction), widening paths agree, and re-encoding gives the pattern
// back (a NaN gives a NaN).
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <vector>

#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/storage_types.h"
#include "reference_rounding.h"

namespace mixprec {
namespace {

struct Narrow {
  DType dtype;
  testref::Spec spec;
};
const Narrow kNarrow[] = {{DType::bf16, testref::kBF16},
                          {DType::f16, testref::kF16},
                          {DType::f8_e4m3fn, testref::kE4M3FN},
                          {DType::f8_e5m2, testref::kE5M2}};

std::vector<uint8_t> all_patterns(DType dtype) {
  const std::size_t esz = dtype_size(dtype);
  const uint32_t count = 1u << (8 * esz);
  std::vector<uint8_t> raw(count * esz);
  for (uint32_t b = 0; b < count; ++b) std::memcpy(raw.data() + b * esz, &b, esz);
  return raw;
}

TEST(AllPatterns, DecodeRoundTripAndWidenPathsAgree) {
  for (const Narrow& n : kNarrow) {
    SCOPED_TRACE(dtype_name(n.dtype));
    const FloatFormat& f = *info(n.dtype).format;
    const std::size_t esz = dtype_size(n.dtype);
    const uint32_t count = 1u << (8 * esz);
    const std::vector<uint8_t> raw = all_patterns(n.dtype);
    std::vector<float> scalar(count), simd(count);
    std::vector<double> wide(count);
    widen_to_f32(n.dtype, raw.data(), scalar.data(), count, Isa::scalar);
    widen_to_f32(n.dtype, raw.data(), simd.data(), count, Isa::best);
    widen_to_f64(n.dtype, raw.data(), wide.data(), count);
    const uint32_t exp_ones = ((1u << n.spec.exp_bits) - 1) << n.spec.mant_bits;
    const uint32_t sign_bit = 1u << (n.spec.exp_bits + n.spec.mant_bits);
    int mismatches = 0;
    for (uint32_t b = 0; b < count && mismatches < 5; ++b) {
      const uint32_t mag = b & (sign_bit - 1);
      const bool nan = n.spec.ieee_specials ? (mag & exp_ones) == exp_ones && (mag & ~exp_ones)
                                            : mag == sign_bit - 1;
      const bool inf = n.spec.ieee_specials && mag == exp_ones;
      const double sign = (b & sign_bit) ? -1.0 : 1.0;
      bool ok = std::bit_cast<uint32_t>(scalar[b]) == std::bit_cast<uint32_t>(simd[b]);
      if (nan) {
        ok = ok && std::isnan(scalar[b]) && std::isnan(wide[b]) &&
             std::signbit(scalar[b]) == (sign < 0);
        ok = ok && f.is_nan(encode_f32(f, scalar[b]));  // NaN stays NaN
      } else {
        const double want = inf ? sign * INFINITY : sign * testref::field_value(n.spec, mag);
        ok = ok && static_cast<double>(scalar[b]) == want && wide[b] == want &&
             std::signbit(scalar[b]) == (sign < 0);
        ok = ok && encode_f32(f, scalar[b]) == b && encode_f64(f, wide[b]) == b;
      }
      if (!ok) {
        ++mismatches;
        ADD_FAILURE() << "pattern 0x" << std::hex << b << " decodes to " << scalar[b];
      }
    }
  }
}

__attribute__((target("f16c"))) float f16c_widen(uint32_t bits) {
  return _cvtsh_ss(static_cast<unsigned short>(bits));
}

TEST(AllPatterns, F16DecodeMatchesF16CInstructionBitForBit) {
  if (!cpu_has_avx2_f16c()) GTEST_SKIP() << "no F16C on this CPU";
  for (uint32_t b = 0; b < 65536; ++b) {
    const f16 h = f16::from_bits(b);
    const float hw = f16c_widen(b);
    ASSERT_EQ(std::bit_cast<uint32_t>(h.to_float()), std::bit_cast<uint32_t>(hw)) << std::hex << b;
    ASSERT_EQ(std::bit_cast<uint32_t>(decode_f32(kFormatF16, b)), std::bit_cast<uint32_t>(hw));
  }
}

TEST(AllPatterns, Bf16WideningIsTheUpperHalfOfTheF32Word) {
  for (uint32_t b = 0; b < 65536; ++b)
    ASSERT_EQ(std::bit_cast<uint32_t>(bf16::from_bits(b).to_float()), b << 16);
}

TEST(StorageTypes, ImplicitConversionsRoundToNearestEven) {
  const bf16 a = 1.0f + 0x1p-8f;  // tie, even
  EXPECT_EQ(a.bits, 0x3F80);
  const f16 h = 65520.0f;  // overflow tie
  EXPECT_EQ(h.bits, 0x7C00);
  const f8_e4m3fn e = 464.0f;
  EXPECT_EQ(e.bits, 0x7E);
  EXPECT_EQ(static_cast<float>(f8_e5m2::from_bits(0x7B)), 57344.0f);
}

}  // namespace
}  // namespace mixprec
