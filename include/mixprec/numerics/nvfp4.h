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

}  // namespace mixprec
