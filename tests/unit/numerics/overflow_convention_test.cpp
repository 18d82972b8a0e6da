// The two overflow conventions at the edges of every narrow format, through the scalar encoder
// and both bulk paths. satfinite (the default) is CUDA's __nv_cvt_float_to_fp8 with
// __NV_SATFINITE (+-inf and overflow to +-MAXNORM), torchao's to_fp8_saturated (a clamp to
// +-finfo.max) and IEEE 754 roundTowardZero (overflow to the largest finite); ml_dtypes is
// ml_dtypes' float8 ConvertImpl<kSaturate, kTruncate> (infinities and NaN are handled before
// saturation, so +-inf stay +-inf, NaN in e4m3fn; truncation only skips the rounding, so an
// overflow past the top binade becomes inf, NaN in e4m3fn).
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/encode.h"

namespace mixprec {
namespace {

constexpr Rounding RNE = Rounding::nearest_even;
constexpr Rounding RTZ = Rounding::toward_zero;

struct Case {
  DType dtype;
  uint32_t input;  // f32 bits
  Rounding mode;
  bool saturate;
  uint32_t satfinite, ml_dtypes;  // the result under each convention
  const char* why;
};

// clang-format off
constexpr Case kCases[] = {
    // e4m3fn: max 448 (0x7E), no inf, NaN 0x7F.
    {DType::f8_e4m3fn, 0x7F800000, RNE, true,  0x7E, 0x7F, "saturate: inf"},
    {DType::f8_e4m3fn, 0xFF800000, RNE, true,  0xFE, 0xFF, "saturate: -inf"},
    {DType::f8_e4m3fn, 0x447A0000, RNE, true,  0x7E, 0x7E, "saturate: 1000, finite overflow"},
    {DType::f8_e4m3fn, 0x7FC00000, RNE, true,  0x7F, 0x7F, "saturate: NaN"},
    {DType::f8_e4m3fn, 0x43EB0000, RTZ, false, 0x7E, 0x7E, "truncate: 470 is within the top binade"},
    {DType::f8_e4m3fn, 0x43F00000, RTZ, false, 0x7E, 0x7F, "truncate: 480 is past max"},
    {DType::f8_e4m3fn, 0xC47A0000, RTZ, false, 0xFE, 0xFF, "truncate: -1000"},
    {DType::f8_e4m3fn, 0x447A0000, RTZ, true,  0x7E, 0x7E, "truncate and saturate: 1000"},
    {DType::f8_e4m3fn, 0x7F800000, RTZ, false, 0x7F, 0x7F, "truncate: inf stays (NaN)"},
    {DType::f8_e4m3fn, 0x43E80000, RNE, false, 0x7E, 0x7E, "464 rounds to 448 (tie to even)"},
    // e5m2: max 57344 (0x7B), inf 0x7C.
    {DType::f8_e5m2,   0x7F800000, RNE, true,  0x7B, 0x7C, "saturate: inf"},
    {DType::f8_e5m2,   0x49742400, RNE, true,  0x7B, 0x7B, "saturate: 1e6, finite overflow"},
    {DType::f8_e5m2,   0x47700000, RTZ, false, 0x7B, 0x7B, "truncate: 61440 is within the top binade"},
    {DType::f8_e5m2,   0x47700000, RNE, false, 0x7C, 0x7C, "round: 61440 to inf"},
    {DType::f8_e5m2,   0x47800000, RTZ, false, 0x7B, 0x7C, "truncate: 65536 is past max"},
    {DType::f8_e5m2,   0xC9742400, RTZ, false, 0xFB, 0xFC, "truncate: -1e6"},
    // f16: max 65504 (0x7BFF), inf 0x7C00.
    {DType::f16,       0x49742400, RTZ, false, 0x7BFF, 0x7C00, "truncate: 1e6"},
    {DType::f16,       0x7F800000, RNE, true,  0x7BFF, 0x7C00, "saturate: inf"},
    {DType::f16,       0x49742400, RNE, true,  0x7BFF, 0x7BFF, "saturate: 1e6"},
    {DType::f16,       0x477FE000, RTZ, false, 0x7BFF, 0x7BFF, "truncate: 65504 exactly"},
    // bf16 has f32's range: truncation never overflows; only saturate on inf differs.
    {DType::bf16,      0x7F7FFFFF, RTZ, false, 0x7F7F, 0x7F7F, "truncate: FLT_MAX"},
    {DType::bf16,      0x7F800000, RNE, true,  0x7F7F, 0x7F80, "saturate: inf"},
    {DType::bf16,      0xFF800000, RNE, true,  0xFF7F, 0xFF80, "saturate: -inf"},
    {DType::bf16,      0x7F7F8000, RNE, true,  0x7F7F, 0x7F7F, "saturate: overflow tie"},
};
// clang-format on

uint32_t bulk(const Case& c, OverflowConvention convention, Isa isa) {
  ConvertOptions o;
  o.rounding = c.mode;
  o.saturate = c.saturate;
  o.overflow = convention;
  // 40 copies so the vector kernels (blocks of 8 to 32) see the value too.
  const std::vector<float> in(40, std::bit_cast<float>(c.input));
  std::vector<uint8_t> out(in.size() * dtype_size(c.dtype));
  convert_from_f32(in.data(), c.dtype, out.data(), in.size(), o, isa);
  uint32_t bits = 0;
  std::memcpy(&bits, out.data() + 17 * dtype_size(c.dtype), dtype_size(c.dtype));
  return bits;
}

uint32_t from_f64(const Case& c, OverflowConvention convention) {
  ConvertOptions o;
  o.rounding = c.mode;
  o.saturate = c.saturate;
  o.overflow = convention;
  const double x = std::bit_cast<float>(c.input);
  uint32_t bits = 0;
  convert_from_f64(&x, c.dtype, &bits, 1, o);
  return bits;
}

TEST(OverflowConvention, EveryEdgeUnderBothConventionsAndEveryPath) {
  for (const Case& c : kCases) {
    for (OverflowConvention conv : {OverflowConvention::satfinite, OverflowConvention::ml_dtypes}) {
      SCOPED_TRACE(::testing::Message()
                   << dtype_name(c.dtype) << " 0x" << std::hex << c.input << " " << c.why
                   << " under " << overflow_convention_name(conv));
      const uint32_t want = conv == OverflowConvention::satfinite ? c.satfinite : c.ml_dtypes;
      EXPECT_EQ(encode_bits<uint32_t>(*info(c.dtype).format, c.input, c.mode, c.saturate, 0, conv),
                want);
      EXPECT_EQ(bulk(c, conv, Isa::scalar), want);
      if (cpu_has_avx2_f16c()) {
        EXPECT_EQ(bulk(c, conv, Isa::avx2), want);
      }
      EXPECT_EQ(from_f64(c, conv), want);
    }
  }
}

TEST(OverflowConvention, SatfiniteIsTheDefaultAndNamesRoundTrip) {
  EXPECT_EQ(ConvertOptions{}.overflow, OverflowConvention::satfinite);
  for (OverflowConvention c : {OverflowConvention::satfinite, OverflowConvention::ml_dtypes})
    EXPECT_EQ(parse_overflow_convention(overflow_convention_name(c)), c);
  EXPECT_EQ(parse_overflow_convention("ML_DTYPES"), OverflowConvention::ml_dtypes);
  EXPECT_THROW(parse_overflow_convention("clamp"), Error);
}

}  // namespace
}  // namespace mixprec
