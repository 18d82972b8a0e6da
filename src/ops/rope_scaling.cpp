// llama3 and yarn inverse frequencies and attention factors (formulas in rope_scaling.h).
// Expressions keep transformers' order of operations, so the f64 results match its formulas
// evaluated in f64 to the last bit or so (tests/reference/make_rope_fixtures.py).
#include "mixprec/ops/rope_scaling.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numbers>
#include <string>

#include "mixprec/core/error.h"

namespace mixprec {
namespace {

constexpr const char* kRopeScaling = "model.rope_scaling";

// Shortest text that reads back as v: "0", "0.5", "1e+300", "inf".
std::string num(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// 1 / theta^(2i/Dh), with the exponent formed as PyTorch's arange(0, Dh, 2) / Dh is.
double default_inv_freq(int64_t i, int64_t head_dim, double theta) {
  return 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
}

std::vector<double> llama3(int64_t head_dim, double theta, const RopeScaling& s) {
  const double original = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = original / s.low_freq_factor;
  const double high_freq_wavelen = original / s.high_freq_factor;
  std::vector<double> out(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double f = default_inv_freq(i, head_dim, theta);
    const double wavelen = 2 * std::numbers::pi / f;
    double g = f;  // short wavelengths (< original / high_freq_factor): kept
    if (wavelen > low_freq_wavelen) {
      g = f / s.factor;  // long ones: interpolated
    } else if (!(wavelen < high_freq_wavelen)) {
      // The band between, ends included: from f/factor to f as original / wavelen goes from
      // low_freq_factor to high_freq_factor.
      const double smooth =
          (original / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      g = (1 - smooth) * f / s.factor + smooth * f;
    }
    out[static_cast<size_t>(i)] = g;
  }
  return out;
}

std::vector<double> yarn(int64_t head_dim, double theta, const RopeScaling& s) {
  const double dim = static_cast<double>(head_dim);
  const double original = static_cast<double>(s.original_max_position_embeddings);
  // The (fractional) pair index whose wavelength turns `rotations` times over `original`.
  auto correction_dim = [&](double rotations) {
    return dim * std::log(original / (rotations * 2 * std::numbers::pi)) / (2 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // keeps the ramp finite
  std::vector<double> out(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double pos_freq = std::pow(theta, static_cast<double>(2 * i) / dim);
    const double extrapolation = 1.0 / pos_freq, interpolation = 1.0 / (s.factor * pos_freq);
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double keep = 1 - ramp;  // share of the unscaled frequency
    out[static_cast<size_t>(i)] = interpolation * (1 - keep) + extrapolation * keep;
  }
  return out;
}

}  // namespace

double yarn_get_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

std::optional<RopeScalingProblem> rope_scaling_problem(const RopeScaling& s) {
  // The first broken rule, in key order.
  std::optional<RopeScalingProblem> found;
  auto require = [&](bool ok, const char* key, double value, const std::string& rule) {
    if (!ok && !found) found = RopeScalingProblem{key, value, "must be " + rule};
  };
  if (s.attention_factor && s.type != RopeScaling::Type::yarn)
    return RopeScalingProblem{"attention_factor", *s.attention_factor,
                              "applies to rope_type \"yarn\" only"};
  if (s.type == RopeScaling::Type::none) return found;
  require(std::isfinite(s.factor) && s.factor >= 1, "factor", s.factor, ">= 1 and finite");
  require(s.original_max_position_embeddings > 0, "original_max_position_embeddings",
          static_cast<double>(s.original_max_position_embeddings), "> 0");
  if (s.type == RopeScaling::Type::llama3) {
    require(std::isfinite(s.low_freq_factor) && s.low_freq_factor > 0, "low_freq_factor",
            s.low_freq_factor, "> 0 and finite");
    require(std::isfinite(s.high_freq_factor) && s.high_freq_factor > s.low_freq_factor,
            "high_freq_factor", s.high_freq_factor,
            "> low_freq_factor = " + num(s.low_freq_factor) + " and finite");
    return found;
  }
  require(std::isfinite(s.beta_slow) && s.beta_slow > 0, "beta_slow", s.beta_slow,
          "> 0 and finite");
  require(std::isfinite(s.beta_fast) && s.beta_fast >= s.beta_slow, "beta_fast", s.beta_fast,
          ">= beta_slow = " + num(s.beta_slow) + " and finite");
  require(std::isfinite(s.mscale) && s.mscale >= 0, "mscale", s.mscale, ">= 0 and finite");
  require(std::isfinite(s.mscale_all_dim) && s.mscale_all_dim >= 0, "mscale_all_dim",
          s.mscale_all_dim, ">= 0 and finite");
  if (s.attention_factor)
    require(std::isfinite(*s.attention_factor) && *s.attention_factor > 0, "attention_factor",
            *s.attention_factor, "> 0 and finite");
  return found;
}

void validate_rope_scaling(const RopeScaling& s) {
  if (const auto p = rope_scaling_problem(s))
    throw Error(kRopeScaling, std::string(p->key) + " = " + num(p->value) + " " + p->rule);
}

std::vector<double> rope_inverse_frequencies(int64_t head_dim, double theta,
                                             const RopeScaling& scaling) {
  MIXPREC_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope",
                "head_dim must be even and > 0, got " + std::to_string(head_dim));
  MIXPREC_CHECK(std::isfinite(theta) && theta > 0.0, "rope",
                "theta must be positive and finite, got " + num(theta));
  validate_rope_scaling(scaling);
  switch (scaling.type) {
    case RopeScaling::Type::llama3:
      return llama3(head_dim, theta, scaling);
    case RopeScaling::Type::yarn:
      return yarn(head_dim, theta, scaling);
    case RopeScaling::Type::none:
      break;
  }
  std::vector<double> out(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i)
    out[static_cast<size_t>(i)] = default_inv_freq(i, head_dim, theta);
  return out;
}

double rope_attention_factor(const RopeScaling& s) {
  validate_rope_scaling(s);
  if (s.type != RopeScaling::Type::yarn) return 1.0;
  if (s.attention_factor) return *s.attention_factor;
  if (s.mscale != 0 && s.mscale_all_dim != 0)
    return yarn_get_mscale(s.factor, s.mscale) / yarn_get_mscale(s.factor, s.mscale_all_dim);
  return yarn_get_mscale(s.factor);
}

RopeFrequencies rope_frequencies(int64_t head_dim, double theta, const RopeScaling& scaling) {
  return {rope_inverse_frequencies(head_dim, theta, scaling), rope_attention_factor(scaling)};
}

}  // namespace mixprec
