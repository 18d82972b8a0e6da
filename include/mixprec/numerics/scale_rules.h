// How FP8 and MX recipes turn a block's amax into the factor its values are multiplied or
// divided by before the saturating cast to the element format, each rule computed the way its
// source computes it (README, "FP8 and MX scaling"). One table, read by the quantize kernels,
// the config loader and `mixprec dtype`.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "mixprec/numerics/float_format.h"

namespace mixprec {

enum class ScaleRule : uint8_t { torchao, te, deepseek, mx_floor, mx_rceil, te_nvfp4 };

// What the stored value v means: q = cast(x·v) and x ≈ q / v (torchao's `_scale`, TE's
// `scale`), or q = cast(x / v) and x ≈ q·v (DeepSeek-V3's `scale_inv`, MX's E8M0 block scale).
enum class ScaleForm : uint8_t { multiply, divide };

struct ScaleRuleInfo {
  ScaleRule rule;
  const char* name;
  ScaleForm form;
  bool always_pow2;  // the format of the scale holds only powers of two (E8M0)
  const char* source;
};

// clang-format off
inline constexpr ScaleRuleInfo kScaleRules[] = {
  // rule                 name        form                 pow2   source
  {ScaleRule::torchao,  "torchao",  ScaleForm::multiply, false, "torchao.float8 amax_to_scale: v = f32(max / max(amax, 1e-12)) divided in f64"},
  {ScaleRule::te,       "te",       ScaleForm::multiply, false, "Transformer Engine compute_scale_from_amax: v = max / amax in f32; 1 for amax 0, inf or NaN; FLT_MAX for an inf quotient"},
  {ScaleRule::deepseek, "deepseek", ScaleForm::divide,   false, "DeepSeek-V3 act_quant: v = max(amax, 1e-4) / max in f32"},
  {ScaleRule::mx_floor, "mx_floor", ScaleForm::divide,   true,  "OCP MX v1.0 (torchao FLOOR): v = 2^(floor(log2 amax) - emax), E8M0"},
  {ScaleRule::mx_rceil, "mx_rceil", ScaleForm::divide,   true,  "NVIDIA cvt.rp.ue8m0 (torchao RCEIL): v = amax·(1/max) rounded up to a power of two, E8M0"},
  {ScaleRule::te_nvfp4, "te_nvfp4", ScaleForm::divide,   false, "Transformer Engine NVFP4BlockScaling: v = E4M3 block scale under an f32 tensor scale from the tensor's amax (nvfp4.h: te_nvfp4_*); E2M1 elements"},
};
// clang-format on

constexpr const ScaleRuleInfo& scale_rule_info(ScaleRule r) {
  return kScaleRules[static_cast<int>(r)];
}
// Parses a rule name; throws mixprec::Error naming `where` and listing the valid names.
ScaleRule parse_scale_rule(std::string_view name, std::string_view where = "scale rule");

// The largest power-of-two exponent of the element format (emax: 8 for e4m3, 15 for e5m2).
constexpr int max_exponent(const FloatFormat& f) {
  return static_cast<int>(f.max_finite_bits() >> f.mant_bits) - f.bias;
}

// The largest magnitude of x[0, n), NaN if any element is (torch.amax propagates NaN): the
// amax every rule starts from. Written for the vectorizer: a running max and a NaN flag.
inline float block_amax(const float* x, int64_t n) {
  float m = 0;
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    nan |= a != a;
    m = a > m ? a : m;
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

// The NaN-keeping max of two amaxes (a block's rows, a tensor's blocks).
inline float max_amax(float a, float b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : (a > b ? a : b);
}

// The stored value for a block whose largest magnitude is `amax` (NaN if any element was NaN).
// te_nvfp4's also needs the tensor's amax: te_nvfp4_block_scale (nvfp4.h); here it throws.
// pow2 (always on for the MX rules) rounds the factor to a power of two so that values shrink:
// a multiply scale down (TE: the mantissa masked; torchao: exp2(floor(log2 v)) in f32, which is
// that floor for every scale a bf16 amax gives, but 2^k for an f32 amax whose v lies a few ulps
// below 2^k), a divide scale up (DeepSeek-V3's UE8M0 `scale_fmt`, as an exact ceiling; its
// kernel's f32 log2 rounds s one ulp above 2^k to 2^k).
float scale_from_amax(ScaleRule rule, float amax, const FloatFormat& element, bool pow2);

// What a quantized value is multiplied by to dequantize it: 1/v in f32 for multiply scales
// (the reciprocal torchao hands torch._scaled_mm), v itself for divide scales.
float descale_of(ScaleRule rule, float v);

// Exact powers of two: the largest <= v and the smallest >= v (v > 0 finite; 0, inf and NaN
// are returned unchanged). f32 subnormals count: pow2_floor(3e-39f) == 2^-128.
float pow2_floor(float v);
float pow2_ceil(float v);

}  // namespace mixprec
