// FP4 E2M1 (kFormatE2M1FN: the element of MXFP4 and NVFP4): exact conversions from f32 and
// f64, exact decoding, and the two-per-byte packing of torch.float4_e2m1fn_x2.
//
// Values: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}; nibble = sign(1) exponent(2) mantissa(1), bias 1.
// Rounding as the reference encoder (encode.h): nearest even, toward zero, or stochastic with
// a 32-bit uniform word (NVFP4 recipes round gradients stochastically). E2M1 has no inf and
// no NaN, so overflow and +-inf always give +-6; a NaN gives +6 under satfinite and, under
// ml_dtypes, zero with the NaN's sign flipped (what ml_dtypes 0.6.0 does; see encode.h).
//
// Packing (torchao's pack_uint4 / unpack_uint4, which NVFP4Tensor and MXTensor use for
// torch.float4_e2m1fn_x2): element 2i in the low nibble of byte i, element 2i+1 in the high.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "mixprec/numerics/rounding.h"

namespace mixprec {

inline constexpr float kE2M1Max = 6.0f;

// One value, as a nibble in the low 4 bits. `random` is used by stochastic rounding only.
// From f64 the rounding is single, as every mixprec narrowing from f64: ml_dtypes casts an f64
// through f32 and so rounds twice (0.25 + 2^-54: ml_dtypes 0 via the tie 0.25, mixprec 0.5).
uint8_t e2m1_from_f32(float x, Rounding mode = Rounding::nearest_even, uint32_t random = 0,
                      OverflowConvention convention = OverflowConvention::satfinite);
uint8_t e2m1_from_f64(double x, Rounding mode = Rounding::nearest_even, uint32_t random = 0,
                      OverflowConvention convention = OverflowConvention::satfinite);
// Exact value of the low nibble (the high 4 bits are ignored).
float e2m1_to_f32(uint8_t nibble);

// Spans, one nibble per byte. Stochastic rounding draws element i's word from Philox4x32-10
// at counter (opts.index_base + i, opts.stream) under opts.seed, as convert_from_f32 does.
// opts.saturate changes nothing (E2M1 always saturates). Sizes must match.
void e2m1_from_f32(std::span<const float> src, std::span<uint8_t> nibbles,
                   const ConvertOptions& opts = {});
void e2m1_to_f32(std::span<const uint8_t> nibbles, std::span<float> dst);

// Two nibbles per byte: packed.size() == (nibbles.size() + 1) / 2; an odd count leaves the
// last byte's high nibble 0 (and unpacking ignores it).
void pack_e2m1(std::span<const uint8_t> nibbles, std::span<uint8_t> packed);
void unpack_e2m1(std::span<const uint8_t> packed, std::span<uint8_t> nibbles);

// f32 straight to packed bytes and back (the two steps above fused).
void e2m1_pack_from_f32(std::span<const float> src, std::span<uint8_t> packed,
                        const ConvertOptions& opts = {});
void e2m1_unpack_to_f32(std::span<const uint8_t> packed, std::span<float> dst);

}  // namespace mixprec
