#include "mixprec/numerics/nvfp4.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/fp4.h"

namespace mixprec {
namespace {

constexpr auto kE4M3Max = static_cast<float>(max_finite(kFormatE4M3FN));
constexpr auto kE4M3Tiny = static_cast<float>(min_normal(kFormatE4M3FN));  // torch's finfo.tiny

// torch.clamp: NaN stays NaN.
float clamp_keep_nan(float v, float lo, float hi) {
  return std::isnan(v) ? v : std::min(std::max(v, lo), hi);
}

void check_nvfp4_sizes(const char* where, std::size_t n, std::size_t scales, std::size_t packed) {
  MIXPREC_CHECK(n % kNvfp4BlockSize == 0 && scales == n / kNvfp4BlockSize && packed == n / 2, where,
                std::to_string(n) + " values need a multiple of 16, with " +
                    std::to_string(n / kNvfp4BlockSize) + " block scales and " +
                    std::to_string(n / 2) + " packed bytes; got " + std::to_string(scales) +
                    " scales and " + std::to_string(packed) + " bytes");
}

}  // namespace

float nvfp4_per_tensor_scale(float tensor_amax) {
  return tensor_amax / (kE4M3Max * kE2M1Max);
}

void nvfp4_quantize(std::span<const float> x, std::optional<float> per_tensor_scale,
                    std::span<uint8_t> block_scales, std::span<uint8_t> packed) {
  check_nvfp4_sizes("nvfp4_quantize", x.size(), block_scales.size(), packed.size());
  for (std::size_t b = 0; b < block_scales.size(); ++b) {
    const std::span<const float> block = x.subspan(b * kNvfp4BlockSize, kNvfp4BlockSize);
    float amax = 0;
    for (const float v : block)
      amax = std::isnan(v) || std::isnan(amax) ? NAN : std::max(amax, std::fabs(v));
    float scale = amax / kE2M1Max;
    if (per_tensor_scale) scale /= *per_tensor_scale;
    const auto s_bits =
        static_cast<uint8_t>(encode_f32(kFormatE4M3FN, clamp_keep_nan(scale, kE4M3Tiny, kE4M3Max)));
    block_scales[b] = s_bits;
    const float s = decode_f32(kFormatE4M3FN, s_bits);
    // torchao multiplies by a reciprocal (as the MSLK Triton kernel does), never divides.
    const float reciprocal = per_tensor_scale ? (1.0f / *per_tensor_scale) / s : 1.0f / s;
    // torchao clamps to ±6 first: the E2M1 cast saturates finite values and ±inf the same.
    std::array<float, kNvfp4BlockSize> scaled;
    for (std::size_t i = 0; i < kNvfp4BlockSize; ++i) scaled[i] = block[i] * reciprocal;
    e2m1_pack_from_f32(scaled, packed.subspan(b * kNvfp4BlockSize / 2, kNvfp4BlockSize / 2));
  }
}

void nvfp4_dequantize(std::span<const uint8_t> packed, std::span<const uint8_t> block_scales,
                      std::optional<float> per_tensor_scale, std::span<float> out) {
  check_nvfp4_sizes("nvfp4_dequantize", out.size(), block_scales.size(), packed.size());
  e2m1_unpack_to_f32(packed, out);
  for (std::size_t b = 0; b < block_scales.size(); ++b) {
    float s = decode_f32(kFormatE4M3FN, block_scales[b]);
    if (per_tensor_scale) s *= *per_tensor_scale;
    for (float& v : out.subspan(b * kNvfp4BlockSize, kNvfp4BlockSize)) v *= s;
  }
}

TeNvfp4TensorScale te_nvfp4_tensor_scale(float tensor_amax) {
  // torch.min with FLT_MAX keeps a NaN (an amax of NaN leaves every scale NaN).
  float encode = (kE4M3Max * kE2M1Max) / tensor_amax;
  if (encode > FLT_MAX) encode = FLT_MAX;
  if (encode == 0) encode = 1;  // an infinite amax
  return {encode, 1.0f / encode, encode * (1.0f / kE2M1Max)};
}

TeNvfp4BlockScale te_nvfp4_block_scale(float block_amax, const TeNvfp4TensorScale& t) {
  float d = block_amax * t.multiplier;
  if (d > FLT_MAX) d = FLT_MAX;
  d = clamp_keep_nan(d, -kE4M3Max, kE4M3Max);
  const float decode = decode_f32(kFormatE4M3FN, encode_f32(kFormatE4M3FN, d));
  return {decode, te_nvfp4_block_encode(decode, t)};
}

float te_nvfp4_block_encode(float block_decode, const TeNvfp4TensorScale& t) {
  const float encode = 1.0f / (block_decode * t.decode);
  return encode > FLT_MAX ? FLT_MAX : encode;  // a zero block: its elements are all 0
}

float te_nvfp4_gemm_alpha(float amax_a, float amax_b) {
  constexpr float kFactor = kE2M1Max * kE2M1Max * kE4M3Max * kE4M3Max;  // exact in f32
  return (amax_a * amax_b) / kFactor;
}

}  // namespace mixprec
