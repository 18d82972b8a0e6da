#include "mixprec/numerics/fp4.h"

#include <array>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/numerics/encode.h"
#include "philox_draws.h"

namespace mixprec {
namespace {

// The 16 values, from the reference decoder.
constexpr std::array<float, 16> kE2M1Values = [] {
  std::array<float, 16> t{};
  for (uint32_t b = 0; b < 16; ++b) t[b] = decode_f32(kFormatE2M1FN, b);
  return t;
}();
static_assert(kE2M1Values[7] == kE2M1Max && kE2M1Values[1] == 0.5f && kE2M1Values[9] == -0.5f);

void check_sizes(bool ok, const char* where, std::size_t a, std::size_t b, const char* rule) {
  MIXPREC_CHECK(ok, where,
                std::string("sizes ") + std::to_string(a) + " and " + std::to_string(b) +
                    " do not match (" + rule + ")");
}

std::size_t packed_size(std::size_t n) {
  return (n + 1) / 2;
}

}  // namespace

uint8_t e2m1_from_f32(float x, Rounding mode, uint32_t random, OverflowConvention convention) {
  return static_cast<uint8_t>(encode_f32(kFormatE2M1FN, x, mode, false, random, convention));
}

uint8_t e2m1_from_f64(double x, Rounding mode, uint32_t random, OverflowConvention convention) {
  return static_cast<uint8_t>(encode_f64(kFormatE2M1FN, x, mode, false, random, convention));
}

float e2m1_to_f32(uint8_t nibble) {
  return kE2M1Values[nibble & 0xF];
}

void e2m1_from_f32(std::span<const float> src, std::span<uint8_t> nibbles,
                   const ConvertOptions& opts) {
  check_sizes(src.size() == nibbles.size(), "e2m1_from_f32", src.size(), nibbles.size(),
              "one nibble per value");
  detail::for_each_with_random(
      src.size(), opts, opts.index_base, [&](std::size_t i, uint32_t random) {
        nibbles[i] = e2m1_from_f32(src[i], opts.rounding, random, opts.overflow);
      });
}

void e2m1_to_f32(std::span<const uint8_t> nibbles, std::span<float> dst) {
  check_sizes(nibbles.size() == dst.size(), "e2m1_to_f32", nibbles.size(), dst.size(),
              "one value per nibble");
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = kE2M1Values[nibbles[i] & 0xF];
}

void pack_e2m1(std::span<const uint8_t> nibbles, std::span<uint8_t> packed) {
  check_sizes(packed.size() == packed_size(nibbles.size()), "pack_e2m1", nibbles.size(),
              packed.size(), "packed bytes = (nibbles + 1) / 2");
  for (std::size_t i = 0; i < packed.size(); ++i) {
    const uint8_t hi = 2 * i + 1 < nibbles.size() ? nibbles[2 * i + 1] & 0xF : 0;
    packed[i] = static_cast<uint8_t>((nibbles[2 * i] & 0xF) | hi << 4);
  }
}

void unpack_e2m1(std::span<const uint8_t> packed, std::span<uint8_t> nibbles) {
  check_sizes(packed.size() == packed_size(nibbles.size()), "unpack_e2m1", packed.size(),
              nibbles.size(), "packed bytes = (nibbles + 1) / 2");
  for (std::size_t i = 0; i < nibbles.size(); ++i)
    nibbles[i] = static_cast<uint8_t>(i % 2 ? packed[i / 2] >> 4 : packed[i / 2] & 0xF);
}

void e2m1_pack_from_f32(std::span<const float> src, std::span<uint8_t> packed,
                        const ConvertOptions& opts) {
  check_sizes(packed.size() == packed_size(src.size()), "e2m1_pack_from_f32", src.size(),
              packed.size(), "packed bytes = (values + 1) / 2");
  for (uint8_t& b : packed) b = 0;
  detail::for_each_with_random(
      src.size(), opts, opts.index_base, [&](std::size_t i, uint32_t random) {
        const uint8_t q = e2m1_from_f32(src[i], opts.rounding, random, opts.overflow);
        packed[i / 2] |= static_cast<uint8_t>(i % 2 ? q << 4 : q);
      });
}

void e2m1_unpack_to_f32(std::span<const uint8_t> packed, std::span<float> dst) {
  check_sizes(packed.size() == packed_size(dst.size()), "e2m1_unpack_to_f32", packed.size(),
              dst.size(), "packed bytes = (values + 1) / 2");
  for (std::size_t i = 0; i < dst.size(); ++i)
    dst[i] = kE2M1Values[i % 2 ? packed[i / 2] >> 4 : packed[i / 2] & 0xF];
}

}  // namespace mixprec
