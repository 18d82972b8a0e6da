// RoPE frequency scaling for long context, as Hugging Face transformers (modeling_rope_utils.py,
// v4.56+) and torchtitan compute it: the per-pair inverse frequencies and the factor that
// multiplies cos and sin. Field names follow the `rope_scaling` keys of a config.json.
//
//   llama3 (Llama 3.1+): wavelength 2π/f of each default frequency f = theta^(-2i/Dh);
//     above original_max_position_embeddings / low_freq_factor: f / factor; below
//     original_max_position_embeddings / high_freq_factor: f; in between
//     (1 - s)·f/factor + s·f with s = (original / wavelength - low_freq_factor) /
//     (high_freq_factor - low_freq_factor). Attention factor 1.
//   yarn (Qwen long context, DeepSeek-V3, GPT-OSS): f blended between f/factor
//     (interpolation) and f (extrapolation) by a linear ramp over pair index i from `low` to
//     `high`, the pair indices whose wavelength turns beta_fast and beta_slow times over
//     original_max_position_embeddings positions: d(r) = Dh·ln(original / (2π·r)) /
//     (2·ln theta); low = d(beta_fast), high = d(beta_slow), floored / ceiled when
//     `truncate`, then low = max(low, 0), high = min(high, Dh - 1) (HF's bound, not Dh/2 - 1),
//     high += 0.001 if they meet. ramp = clamp((i - low) / (high - low), 0, 1);
//     f' = f/factor·ramp + f·(1 - ramp). Attention factor: attention_factor if given, else
//     yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim) when both are
//     nonzero, else yarn_get_mscale(factor, 1).
//
// Everything in f64 (transformers computes these in f32).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mixprec {

// config.json's `rope_scaling`. Defaults are HF's for the optional keys; `factor` and (for
// llama3) low/high_freq_factor and original_max_position_embeddings are required keys there.
struct RopeScaling {
  enum class Type { none, llama3, yarn };  // rope_type "default" (or no rope_scaling), ...
  Type type = Type::none;
  double factor = 1.0;  // "factor": context extension ratio, >= 1
  // llama3 only: "low_freq_factor" > 0, "high_freq_factor" > low_freq_factor.
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // "original_max_position_embeddings": the pre-scaling context length, > 0. Required here;
  // HF's yarn falls back to the model's max_position_embeddings when the key is absent.
  int64_t original_max_position_embeddings = 0;
  // yarn only. HF reads `beta_fast or 32`, `beta_slow or 1` (so 0 means the default too).
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  // yarn only: "mscale", "mscale_all_dim"; 0 = absent (HF treats 0 and absent alike).
  double mscale = 0.0;
  double mscale_all_dim = 0.0;
  std::optional<double> attention_factor;  // yarn only: "attention_factor", overrides the mscales
  bool truncate = true;                    // yarn only: "truncate" (HF >= 4.55; GPT-OSS: false)
};

// The rotation's parameters for one head size: inv_freq[i] for the pair (i, i + Dh/2) and
// the multiplier of cos and sin. Built once (per model), passed to rope() by reference.
struct RopeFrequencies {
  std::vector<double> inv_freq;
  double attention_factor = 1.0;
};

// The first broken rule: the key as config.json spells it, its value and the rule ("must be
// >= 1 and finite"). Keys of the other type are not looked at, except that attention_factor
// is rejected outside yarn. nullopt: valid.
struct RopeScalingProblem {
  const char* key;
  double value;
  std::string rule;
};
std::optional<RopeScalingProblem> rope_scaling_problem(const RopeScaling& scaling);
// Throws mixprec::Error where "model.rope_scaling" with that problem, e.g.
// "[model.rope_scaling] factor = 0 must be >= 1 and finite".
void validate_rope_scaling(const RopeScaling& scaling);

// head_dim / 2 inverse frequencies for the rotated head size `head_dim` (even, > 0; for
// DeepSeek-V3 the qk_rope_head_dim) and base `theta` (finite, > 0). Type::none gives
// 1 / theta^(2i/head_dim), the bits rope(x, theta) has always used. Validates `scaling`.
std::vector<double> rope_inverse_frequencies(int64_t head_dim, double theta,
                                             const RopeScaling& scaling);
// The factor multiplying cos and sin: 1 for none and llama3, the yarn rule above for yarn.
double rope_attention_factor(const RopeScaling& scaling);
// Both of the above.
RopeFrequencies rope_frequencies(int64_t head_dim, double theta, const RopeScaling& scaling = {});

// YaRN's magnitude correction 0.1·mscale·ln(scale) + 1, and 1 for scale <= 1. DeepSeek-V3's
// attention multiplies its softmax scale by yarn_get_mscale(factor, mscale_all_dim)².
double yarn_get_mscale(double scale, double mscale = 1.0);

}  // namespace mixprec
