// NVFP4 quantization as torchao 0.18 computes it (prototype/mx_formats/nvfp4_tensor.py,
// nvfp4_quantize and per_tensor_amax_to_scale): blocks of 16 consecutive values, each with an
// E4M3 block scale, optionally under one f32 per-tensor scale; elements E2M1, packed two per
// byte (fp4.h). Every step is torchao's f32 arithmetic in its order:
//   per_tensor_scale = tensor_amax / (448·6)
//   block_scale      = block_amax / 6                       (f32)
//   one level:  s = e4m3(clamp(block_scale, 2^-6, 448)),                q = x·(1/s)
//   two levels: s = e4m3(clamp(block_scale / per_tensor_scale, 2^-6, 448)),
//               q = x·((1/per_tensor_scale)/s)
//   element = e2m1(clamp(q, -6, 6)), round to nearest even
// and x ≈ e2m1·s (·per_tensor_scale). A NaN in a block gives that block a NaN scale (0x7F).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace mixprec {

inline constexpr std::size_t kNvfp4BlockSize = 16;

// torchao per_tensor_amax_to_scale: amax / (448 * 6) in f32.
float nvfp4_per_tensor_scale(float tensor_amax);

// Quantizes x (its size a multiple of 16; blocks are consecutive runs of 16) into
// block_scales (E4M3 bits, x.size() / 16) and packed (E2M1, x.size() / 2 bytes).
// Throws mixprec::Error naming the sizes when they do not fit.
void nvfp4_quantize(std::span<const float> x, std::optional<float> per_tensor_scale,
                    std::span<uint8_t> block_scales, std::span<uint8_t> packed);

// x ≈ e2m1 · block scale (· per-tensor scale), in f32.
void nvfp4_dequantize(std::span<const uint8_t> packed, std::span<const uint8_t> block_scales,
                      std::optional<float> per_tensor_scale, std::span<float> out);

// Transformer Engine's NVFP4 scales (NVFP4BlockScaling; the arithmetic of its reference
// quantizer, custom_recipes/reference_nvfp4.py, which its kernels match bit for bit), in f32
// and in its order. From the tensor's amax:
//   encode = min(448·6 / amax, FLT_MAX), 1 where that is 0;  decode = 1 / encode;
//   multiplier = encode · f32(1/6)
// and from a block's amax:
//   block decode (stored, E4M3) = e4m3(clamp(min(block_amax · multiplier, FLT_MAX), 448)),
//   block encode = min(1 / (f32(block decode) · decode), FLT_MAX)
// Elements are e2m1(clamp(x · block encode, ±6)) and x ≈ e2m1 · block decode · decode. Its GEMM
// multiplies the sum of (e2m1 · block decode) products by te_nvfp4_gemm_alpha.
struct TeNvfp4TensorScale {
  float encode, decode, multiplier;
};
TeNvfp4TensorScale te_nvfp4_tensor_scale(float tensor_amax);
struct TeNvfp4BlockScale {
  float decode;  // an E4M3 value: what the block stores
  float encode;  // what its elements are multiplied by before the E2M1 cast
};
TeNvfp4BlockScale te_nvfp4_block_scale(float block_amax, const TeNvfp4TensorScale& t);
// The block encode scale from the stored decode one (what te_nvfp4_block_scale returns with it).
float te_nvfp4_block_encode(float block_decode, const TeNvfp4TensorScale& t);
// (amax_a · amax_b) / (6² · 448²) in f32: TE's GEMM alpha for two NVFP4 operands.
float te_nvfp4_gemm_alpha(float amax_a, float amax_b);

}  // namespace mixprec
