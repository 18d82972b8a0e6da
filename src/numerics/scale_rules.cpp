#include "mixprec/numerics/scale_rules.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/numerics/e8m0.h"

namespace mixprec {

static_assert(std::size(kScaleRules) == static_cast<std::size_t>(ScaleRule::te_nvfp4) + 1);

ScaleRule parse_scale_rule(std::string_view name, std::string_view where) {
  std::string valid;
  for (const ScaleRuleInfo& r : kScaleRules) {
    if (name == r.name) return r.rule;
    valid += valid.empty() ? r.name : std::string(", ") + r.name;
  }
  throw Error(std::string(where),
              "unknown scale rule '" + std::string(name) + "'; valid: " + valid);
}

float pow2_floor(float v) {
  if (!(v > 0) || !std::isfinite(v)) return v;
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  if (bits >= 0x00800000u) return std::bit_cast<float>(bits & 0xFF800000u);   // mask the mantissa
  return std::bit_cast<float>(uint32_t{1} << (31 - std::countl_zero(bits)));  // subnormal
}

float pow2_ceil(float v) {
  const float down = pow2_floor(v);
  return down == v ? v : down * 2.0f;  // 2·FLT_MAX's floor (2^127) is 2^128 = inf: v > 2^127
}

namespace {

// The E8M0 scale (e8m0.h) of a block: the OCP MX floor of the amax less the element's emax,
// 2^-127 at the least (a zero or subnormal amax lands there).
float mx_floor(float amax, const FloatFormat& element) {
  if (!std::isfinite(amax)) return NAN;
  const int e = e8m0_floor(std::fabs(amax)) - max_exponent(element);
  return e8m0_to_f32(static_cast<uint8_t>(std::max(e, 0)));
}

// amax·(1/max) in f32, rounded up to a power of two within 2^-127 .. 2^127.
float mx_rceil(float amax, const FloatFormat& element) {
  const float descale = amax * (1.0f / static_cast<float>(max_finite(element)));
  if (!std::isfinite(descale)) return NAN;
  return e8m0_to_f32(e8m0_ceil(std::fabs(descale)));
}

}  // namespace

float scale_from_amax(ScaleRule rule, float amax, const FloatFormat& element, bool pow2) {
  const double max = max_finite(element);
  float v = 0;
  switch (rule) {
    case ScaleRule::torchao:
      // std::max keeps a NaN amax (it is the first argument), as torch.clamp does.
      v = static_cast<float>(max / std::max(static_cast<double>(amax), 1e-12));
      // torchao's own rounding, in f32: log2 of a v a few ulps below 2^k rounds to k, so such
      // a v becomes 2^k (and the block's max saturates), never with a bf16 amax.
      return pow2 ? std::exp2(std::floor(std::log2(v))) : v;
    case ScaleRule::te:
      if (amax == 0 || !std::isfinite(amax)) return 1.0f;
      v = static_cast<float>(max) / amax;
      if (std::isinf(v)) v = FLT_MAX;
      return pow2 ? pow2_floor(v) : v;
    case ScaleRule::deepseek:
      v = (std::isnan(amax) ? amax : std::max(amax, 1e-4f)) / static_cast<float>(max);
      return pow2 ? pow2_ceil(v) : v;
    case ScaleRule::mx_floor:
      return mx_floor(amax, element);
    case ScaleRule::mx_rceil:
      return mx_rceil(amax, element);
    case ScaleRule::te_nvfp4:
      throw Error("scale_from_amax", "te_nvfp4 block scales need the tensor's amax too (nvfp4.h)");
  }
  return NAN;
}

float descale_of(ScaleRule rule, float v) {
  return scale_rule_info(rule).form == ScaleForm::multiply ? 1.0f / v : v;
}

}  // namespace mixprec
