// Portable scalar conversion kernels, written directly on the reference encoder.
#include <array>
#include <bit>
#include <cstring>

#include "convert_kernels.h"
#include "mixprec/numerics/encode.h"
#include "philox_draws.h"

namespace mixprec::kernels {
namespace {

// Formats of 8 bits or fewer (FP8, FP4 E2M1: one value a byte) store a byte.
int storage_bits(const FloatFormat& f) {
  return f.total_bits() <= 8 ? 8 : f.total_bits();
}

void store(const FloatFormat& f, void* dst, std::size_t i, uint32_t bits) {
  switch (storage_bits(f)) {
    case 8:
      static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(bits);
      break;
    case 16:
      static_cast<uint16_t*>(dst)[i] = static_cast<uint16_t>(bits);
      break;
    default:
      static_cast<uint32_t*>(dst)[i] = bits;
      break;
  }
}

uint32_t load(const FloatFormat& f, const void* src, std::size_t i) {
  switch (storage_bits(f)) {
    case 8:
      return static_cast<const uint8_t*>(src)[i];
    case 16:
      return static_cast<const uint16_t*>(src)[i];
    default:
      return static_cast<const uint32_t*>(src)[i];
  }
}

// One instantiation per format and mode, so the encoder's branches fold into constants.
template <const FloatFormat& F, Rounding kMode>
void narrow_f32_mode(const float* src, void* dst, std::size_t n, const ConvertOptions& o,
                     uint64_t index0) {
  detail::for_each_with_random(n, o, index0, [&](std::size_t i, uint32_t random) {
    store(F, dst, i, encode_f32(F, src[i], kMode, o.saturate, random, o.overflow));
  });
}

template <const FloatFormat& F>
void narrow_f32(const float* src, void* dst, std::size_t n, const ConvertOptions& o,
                uint64_t index0) {
  switch (o.rounding) {
    case Rounding::nearest_even:
      return narrow_f32_mode<F, Rounding::nearest_even>(src, dst, n, o, index0);
    case Rounding::toward_zero:
      return narrow_f32_mode<F, Rounding::toward_zero>(src, dst, n, o, index0);
    case Rounding::stochastic:
      return narrow_f32_mode<F, Rounding::stochastic>(src, dst, n, o, index0);
  }
}

}  // namespace

void scalar_narrow_f32(const FloatFormat& f, const float* src, void* dst, std::size_t n,
                       const ConvertOptions& o, uint64_t index0) {
  // Every caller hands the vector kernels' tail here, and hot rows leave none.
  if (n == 0) return;
  if (&f == &kFormatBF16) return narrow_f32<kFormatBF16>(src, dst, n, o, index0);
  if (&f == &kFormatF16) return narrow_f32<kFormatF16>(src, dst, n, o, index0);
  if (&f == &kFormatE4M3FN) return narrow_f32<kFormatE4M3FN>(src, dst, n, o, index0);
  if (&f == &kFormatE5M2) return narrow_f32<kFormatE5M2>(src, dst, n, o, index0);
  if (&f == &kFormatE2M1FN) return narrow_f32<kFormatE2M1FN>(src, dst, n, o, index0);
  detail::for_each_with_random(n, o, index0, [&](std::size_t i, uint32_t random) {
    store(f, dst, i, encode_f32(f, src[i], o.rounding, o.saturate, random, o.overflow));
  });
}

void scalar_narrow_f64(const FloatFormat& f, const double* src, void* dst, std::size_t n,
                       const ConvertOptions& o, uint64_t index0) {
  detail::for_each_with_random(n, o, index0, [&](std::size_t i, uint32_t random) {
    const uint32_t bits = encode_f64(f, src[i], o.rounding, o.saturate, random, o.overflow);
    // tf32 results are stored as f32 with the low 13 bits clear.
    store(f, dst, i, &f == &kFormatTF32 ? bits << 13 : bits);
  });
}

void scalar_widen_f32(const FloatFormat& f, const void* src, float* dst, std::size_t n) {
  if (n == 0) return;  // the vector kernels' empty tail (see scalar_narrow_f32)
  // Tables for the dtypes of a byte, built once from the reference decoder (E2M1 keeps its
  // value in a byte's low nibble: the byte indexes its table all the same).
  static const auto make = [](const FloatFormat& g) {
    std::array<float, 256> t{};
    for (uint32_t b = 0; b <= g.sign_bit() + g.abs_mask(); ++b) t[b] = decode_f32(g, b);
    return t;
  };
  static const std::array<float, 256> e4m3 = make(kFormatE4M3FN), e5m2 = make(kFormatE5M2),
                                      e2m1 = make(kFormatE2M1FN);
  const std::array<float, 256>* lut = &f == &kFormatE4M3FN   ? &e4m3
                                      : &f == &kFormatE5M2   ? &e5m2
                                      : &f == &kFormatE2M1FN ? &e2m1
                                                             : nullptr;
  if (lut) {
    const auto* s = static_cast<const uint8_t*>(src);
    for (std::size_t i = 0; i < n; ++i) dst[i] = (*lut)[s[i]];
    return;
  }
  for (std::size_t i = 0; i < n; ++i) dst[i] = decode_f32(f, load(f, src, i));
}

void scalar_tf32(const float* src, float* dst, std::size_t n, const ConvertOptions& o,
                 uint64_t index0) {
  detail::for_each_with_random(n, o, index0, [&](std::size_t i, uint32_t random) {
    // kFormatTF32 is a constant here, so the encoder specialises as in narrow_f32.
    const uint32_t bits =
        encode_f32(kFormatTF32, src[i], o.rounding, o.saturate, random, o.overflow);
    dst[i] = std::bit_cast<float>(bits << 13);
  });
}

}  // namespace mixprec::kernels
