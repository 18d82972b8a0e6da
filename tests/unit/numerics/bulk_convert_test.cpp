// Bulk conversion plumbing: odd lengths and offsets (vector body + scalar tail), thread-count
// independence, in-place tf32, f64 sources against a table-search reference, and errors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/philox.h"
#include "reference_rounding.h"

namespace mixprec {
namespace {

std::vector<float> random_floats(std::size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const uint32_t r = philox_u32(seed, 0, i);
    // wide spread of magnitudes around the narrow formats' ranges, both signs
    v[i] = std::ldexp(1.0f + static_cast<float>(r & 0xFFFFF) * 0x1p-20f,
                      static_cast<int>((r >> 20) % 60) - 40) *
           ((r >> 31) ? -1.0f : 1.0f);
  }
  return v;
}

TEST(BulkConvert, EveryLengthAndOffsetMatchesScalarEncoder) {
  // Magnitudes 2^-40 .. 2^20 mixed in every vector: f16 subnormal, normal and overflow lanes.
  const std::vector<float> src = random_floats(300, 1);
  for (const DType dtype : {DType::bf16, DType::f16, DType::f8_e4m3fn, DType::f8_e5m2})
    for (const Rounding mode :
         {Rounding::nearest_even, Rounding::toward_zero, Rounding::stochastic})
      for (std::size_t offset = 0; offset < 5; ++offset)
        // lengths below, at and above the vector blocks (8, 16, 32, 64 elements)
        for (const std::size_t n : {0, 1, 7, 8, 15, 31, 33, 63, 64, 65, 127, 130, 200, 295}) {
          const FloatFormat& f = *info(dtype).format;
          ConvertOptions o;
          o.rounding = mode;
          o.seed = 3;
          o.index_base = 11 + offset;  // deliberately not a multiple of 4
          const std::size_t esz = dtype_size(dtype);
          std::vector<uint8_t> out(n * esz + 1, 0xAB);  // one guard byte
          convert_from_f32(src.data() + offset, dtype, out.data(), n, o);
          for (std::size_t i = 0; i < n; ++i) {
            const uint32_t want =
                encode_f32(f, src[offset + i], mode, false, philox_u32(3, 0, o.index_base + i));
            uint32_t got = 0;
            std::memcpy(&got, out.data() + i * esz, esz);
            ASSERT_EQ(got, want) << dtype_name(dtype) << " n=" << n << " i=" << i;
          }
          ASSERT_EQ(out[n * esz], 0xAB) << "wrote past the end";
        }
}

TEST(BulkConvert, SameBitsForAnyThreadCount) {
  const std::vector<float> src = random_floats(1 << 20, 2);
  auto run = [&](int threads, DType dtype) {
    const int saved = num_threads();
    set_num_threads(threads);
    std::vector<uint8_t> out(src.size() * dtype_size(dtype));
    convert_from_f32(src.data(), dtype, out.data(), src.size());
    set_num_threads(saved);
    return out;
  };
  for (const DType d : {DType::bf16, DType::f16, DType::f8_e4m3fn}) EXPECT_EQ(run(1, d), run(2, d));
}

TEST(BulkConvert, Tf32InPlace) {
  std::vector<float> v = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -2.5f};
  round_to_tf32(v.data(), v.data(), v.size());
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 1.0f + 0x1p-9f);
  EXPECT_EQ(v[2], -2.5f);
}

TEST(BulkConvert, F64SourcesMatchTableSearchReference) {
  // Random doubles with bits below f32 precision, so double rounding would show.
  const testref::Spec specs[] = {testref::kBF16, testref::kF16, testref::kE4M3FN, testref::kE5M2};
  const DType dtypes[] = {DType::bf16, DType::f16, DType::f8_e4m3fn, DType::f8_e5m2};
  for (int k = 0; k < 4; ++k) {
    const auto mags = testref::magnitudes(specs[k]);
    const double max = mags.back();
    std::vector<double> src(20000);
    for (std::size_t i = 0; i < src.size(); ++i) {
      const PhiloxBlock b = philox_block(77, static_cast<uint64_t>(k), i);
      const double u = static_cast<double>((uint64_t{b[0]} << 21) ^ (b[1] >> 11)) * 0x1p-53;
      src[i] = max * 1.05 * u * u * u * ((b[2] & 1) ? -1 : 1);  // dense near zero, some overflow
    }
    std::vector<uint8_t> out(src.size() * dtype_size(dtypes[k]));
    convert_from_f64(src.data(), dtypes[k], out.data(), src.size());
    const uint32_t sign_bit = dtype_size(dtypes[k]) == 1 ? 0x80 : 0x8000;
    const uint32_t overflow_codes[] = {0x7F80, 0x7C00, 0x7F, 0x7C};  // inf, or e4m3fn's NaN
    const uint32_t overflow = overflow_codes[k];
    for (std::size_t i = 0; i < src.size(); ++i) {
      uint32_t idx = testref::nearest_even_index(mags, std::fabs(src[i]));
      if (idx >= mags.size()) idx = overflow;
      const uint32_t want = idx | (std::signbit(src[i]) ? sign_bit : 0);
      uint32_t got = 0;
      std::memcpy(&got, out.data() + i * dtype_size(dtypes[k]), dtype_size(dtypes[k]));
      ASSERT_EQ(got, want) << dtype_name(dtypes[k]) << " x=" << src[i];
    }
  }
}

TEST(BulkConvert, RejectsNonFloatingTargetsWithClearError) {
  float x = 1.0f;
  int32_t out = 0;
  try {
    convert_from_f32(&x, DType::i32, &out, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("i32"), std::string::npos) << e.what();
  }
}

TEST(BulkConvert, WideningIsExactForEveryFormat) {
  const std::vector<float> src = random_floats(4096, 5);
  for (const DType d : {DType::bf16, DType::f16, DType::f8_e4m3fn, DType::f8_e5m2}) {
    std::vector<uint8_t> narrow(src.size() * dtype_size(d));
    convert_from_f32(src.data(), d, narrow.data(), src.size());
    std::vector<float> back(src.size());
    std::vector<double> back64(src.size());
    widen_to_f32(d, narrow.data(), back.data(), src.size());
    widen_to_f64(d, narrow.data(), back64.data(), src.size());
    for (std::size_t i = 0; i < src.size(); ++i) {
      if (std::isnan(back[i])) continue;
      ASSERT_EQ(static_cast<double>(back[i]), back64[i]);
      // re-narrowing an exactly widened value is the identity
      uint32_t again = encode_f32(*info(d).format, back[i]), orig = 0;
      std::memcpy(&orig, narrow.data() + i * dtype_size(d), dtype_size(d));
      ASSERT_EQ(again, orig);
    }
  }
}

TEST(BulkConvert, RowConversionsOfTheKernelsMatchTheScalarCodec) {
  // widen_row_f32 / narrow_row_f32 take this CPU's widest path (AVX-512, AVX2 or scalar):
  // every 16-bit pattern widened, and every f32 high half with the low halves that decide
  // rounding (ties, just above and below) narrowed, at a length with a scalar tail.
  for (const DType d : {DType::bf16, DType::f16}) {
    const FloatFormat& f = *info(d).format;
    std::vector<uint16_t> all((1 << 16) + 7);
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> wide(all.size());
    widen_row_f32(d, all.data(), wide.data(), all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
      const float want = decode_f32(f, all[i]);
      ASSERT_TRUE(std::bit_cast<uint32_t>(wide[i]) == std::bit_cast<uint32_t>(want) ||
                  (std::isnan(want) && std::isnan(wide[i])))
          << dtype_name(d) << " widen 0x" << std::hex << all[i];
    }
    std::vector<float> src;
    for (uint32_t hi = 0; hi < (1u << 16); ++hi)
      for (uint32_t lo :
           {0x0000u, 0x0001u, 0x0FFFu, 0x1000u, 0x1001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
        src.push_back(std::bit_cast<float>(hi << 16 | lo));
    src.resize(src.size() - 5);  // not a multiple of 16
    std::vector<uint16_t> out(src.size());
    narrow_row_f32(src.data(), d, out.data(), src.size());
    for (std::size_t i = 0; i < src.size(); ++i)
      ASSERT_EQ(out[i], encode_f32(f, src[i]))
          << dtype_name(d) << " narrow 0x" << std::hex << std::bit_cast<uint32_t>(src[i]);
  }
}

}  // namespace
}  // namespace mixprec
