// RoPE scaling frequencies: llama3 and yarn inverse frequencies and attention factors against
// Hugging Face's formulas evaluated in f64 (tests/reference/make_rope_fixtures.py), the
// unscaled frequencies, yarn_get_mscale, and the validation messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/ops/rope_scaling.h"
#include "reference/fixtures/rope_scaling_fixtures.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using testing::error_of;

// A fixture case as the config layer would hand it over: absent keys keep HF's defaults.
RopeScaling scaling_of(const rope_fixtures::Case& c) {
  RopeScaling s;
  s.type =
      std::string(c.rope_type) == "llama3" ? RopeScaling::Type::llama3 : RopeScaling::Type::yarn;
  s.factor = c.factor;
  s.original_max_position_embeddings = c.original_max_position_embeddings;
  if (s.type == RopeScaling::Type::llama3) {
    s.low_freq_factor = c.low_freq_factor;
    s.high_freq_factor = c.high_freq_factor;
    return s;
  }
  if (c.has_beta_fast) s.beta_fast = c.beta_fast;
  if (c.has_beta_slow) s.beta_slow = c.beta_slow;
  if (c.has_mscale) s.mscale = c.mscale;
  if (c.has_mscale_all_dim) s.mscale_all_dim = c.mscale_all_dim;
  if (c.has_attention_factor) s.attention_factor = c.attention_factor;
  s.truncate = c.truncate;
  return s;
}

double rel(double a, double b) {
  return std::fabs(a - b) / std::fabs(b);
}

TEST(RopeScaling, MatchesHuggingFaceFormulasInF64) {
  for (const rope_fixtures::Case& c : rope_fixtures::kCases) {
    SCOPED_TRACE(c.name);
    const RopeScaling s = scaling_of(c);
    const std::vector<double> inv = rope_inverse_frequencies(c.head_dim, c.rope_theta, s);
    ASSERT_EQ(static_cast<int64_t>(inv.size()), c.head_dim / 2);
    double worst = 0;
    for (size_t i = 0; i < inv.size(); ++i) {
      EXPECT_LE(rel(inv[i], c.expected_inv_freq[i]), 1e-12) << "inv_freq[" << i << "]";
      worst = std::max(worst, rel(inv[i], c.expected_inv_freq[i]));
    }
    const double att = rope_attention_factor(s);
    EXPECT_LE(rel(att, c.expected_attention_factor), 1e-12);
    std::printf("  %-32s max rel diff inv_freq %.3g, attention_factor %.3g\n", c.name, worst,
                rel(att, c.expected_attention_factor));
    const RopeFrequencies f = rope_frequencies(c.head_dim, c.rope_theta, s);
    EXPECT_EQ(f.inv_freq, inv);
    EXPECT_EQ(f.attention_factor, att);
  }
}

// Properties the fixtures imply, stated directly: which frequencies each rule touches.
TEST(RopeScaling, Llama3KeepsHighScalesLowBlendsBetween) {
  RopeScaling s;
  s.type = RopeScaling::Type::llama3;
  s.factor = 8, s.low_freq_factor = 1, s.high_freq_factor = 4;
  s.original_max_position_embeddings = 8192;
  const std::vector<double> plain = rope_inverse_frequencies(128, 500000, {});
  const std::vector<double> scaled = rope_inverse_frequencies(128, 500000, s);
  int kept = 0, divided = 0, blended = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / plain[i];
    if (wavelen < 8192.0 / 4) {
      ++kept;
      EXPECT_EQ(scaled[i], plain[i]) << i;
    } else if (wavelen > 8192.0) {
      ++divided;
      EXPECT_EQ(scaled[i], plain[i] / 8) << i;
    } else {
      ++blended;
      EXPECT_GT(scaled[i], plain[i] / 8) << i;
      EXPECT_LT(scaled[i], plain[i]) << i;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
}

TEST(RopeScaling, YarnTruncateAndAttentionFactorRules) {
  RopeScaling s;  // DeepSeek-V3
  s.type = RopeScaling::Type::yarn;
  s.factor = 40, s.mscale = 1, s.mscale_all_dim = 1;
  s.original_max_position_embeddings = 4096;
  const std::vector<double> truncated = rope_inverse_frequencies(64, 10000, s);
  s.truncate = false;
  EXPECT_NE(rope_inverse_frequencies(64, 10000, s), truncated);
  // mscale == mscale_all_dim: the cos/sin factor is 1 (DeepSeek-V3 moves it to the softmax).
  EXPECT_EQ(rope_attention_factor(s), 1.0);
  s.mscale_all_dim = 0;  // one of them absent: 0.1·ln(factor) + 1
  EXPECT_DOUBLE_EQ(rope_attention_factor(s), 0.1 * std::log(40.0) + 1);
  s.attention_factor = 0.75;  // given: wins
  EXPECT_EQ(rope_attention_factor(s), 0.75);
  s.attention_factor.reset();
  s.factor = 1;  // no extension: yarn_get_mscale(1) = 1
  EXPECT_EQ(rope_attention_factor(s), 1.0);
  // llama3 and none never scale cos/sin.
  EXPECT_EQ(rope_attention_factor({}), 1.0);
}

TEST(RopeScaling, YarnGetMscale) {
  for (const rope_fixtures::MscalePoint& p : rope_fixtures::kMscalePoints)
    EXPECT_LE(std::fabs(yarn_get_mscale(p.scale, p.mscale) - p.expected), 1e-15 * p.expected)
        << p.scale << " " << p.mscale;
  EXPECT_EQ(yarn_get_mscale(40.0), yarn_get_mscale(40.0, 1.0));
}

// Unscaled frequencies are the expression the kernels always used, to the bit.
TEST(RopeScaling, NoneIsThePlainFrequencies) {
  const std::pair<int64_t, double> heads[] = {{128, 500000.0}, {16, 10000.0}, {2, 3.5}, {64, 1e6}};
  for (const auto& [dh, theta] : heads) {
    const RopeFrequencies f = rope_frequencies(dh, theta);
    ASSERT_EQ(static_cast<int64_t>(f.inv_freq.size()), dh / 2);
    for (int64_t i = 0; i < dh / 2; ++i)
      EXPECT_EQ(f.inv_freq[static_cast<size_t>(i)],
                1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dh)));
    EXPECT_EQ(f.attention_factor, 1.0);
  }
}

TEST(RopeScaling, ValidationNamesTheConfigKey) {
  RopeScaling llama;
  llama.type = RopeScaling::Type::llama3;
  llama.factor = 8, llama.original_max_position_embeddings = 8192;
  RopeScaling yarn;
  yarn.type = RopeScaling::Type::yarn;
  yarn.factor = 4, yarn.original_max_position_embeddings = 32768;
  EXPECT_NO_THROW(validate_rope_scaling(llama));
  EXPECT_NO_THROW(validate_rope_scaling(yarn));
  EXPECT_NO_THROW(validate_rope_scaling({}));

  auto message = [](RopeScaling s, auto&& change) {
    change(s);
    return error_of([&] { validate_rope_scaling(s); });
  };
  EXPECT_EQ(message(yarn, [](RopeScaling& s) { s.factor = 0; }),
            "[model.rope_scaling] factor = 0 must be >= 1 and finite");
  EXPECT_EQ(message(llama, [](RopeScaling& s) { s.factor = 0.5; }),
            "[model.rope_scaling] factor = 0.5 must be >= 1 and finite");
  EXPECT_EQ(message(yarn, [](RopeScaling& s) { s.original_max_position_embeddings = 0; }),
            "[model.rope_scaling] original_max_position_embeddings = 0 must be > 0");
  EXPECT_EQ(message(llama, [](RopeScaling& s) { s.high_freq_factor = 1; }),
            "[model.rope_scaling] high_freq_factor = 1 must be > low_freq_factor = 1 and finite");
  EXPECT_EQ(message(yarn, [](RopeScaling& s) { s.beta_fast = 0.5; }),
            "[model.rope_scaling] beta_fast = 0.5 must be >= beta_slow = 1 and finite");
  EXPECT_EQ(message(llama, [](RopeScaling& s) { s.attention_factor = 1.2; }),
            "[model.rope_scaling] attention_factor = 1.2 applies to rope_type \"yarn\" only");
  // One line per key: the message names it.
  const std::pair<const char*, void (*)(RopeScaling&)> yarn_keys[] = {
      {"factor", [](RopeScaling& s) { s.factor = NAN; }},
      {"factor", [](RopeScaling& s) { s.factor = INFINITY; }},
      {"beta_slow", [](RopeScaling& s) { s.beta_slow = 0; }},
      {"beta_fast", [](RopeScaling& s) { s.beta_fast = NAN; }},
      {"mscale", [](RopeScaling& s) { s.mscale = -1; }},
      {"mscale_all_dim", [](RopeScaling& s) { s.mscale_all_dim = INFINITY; }},
      {"attention_factor", [](RopeScaling& s) { s.attention_factor = 0.0; }},
      {"attention_factor", [](RopeScaling& s) { s.attention_factor = NAN; }},
  };
  for (const auto& [key, change] : yarn_keys) {
    const std::string m = message(yarn, change);
    EXPECT_EQ(m.rfind(std::string("[model.rope_scaling] ") + key + " = ", 0), 0u) << m;
  }
  const std::pair<const char*, void (*)(RopeScaling&)> llama_keys[] = {
      {"low_freq_factor", [](RopeScaling& s) { s.low_freq_factor = 0; }},
      {"high_freq_factor", [](RopeScaling& s) { s.high_freq_factor = NAN; }},
      {"original_max_position_embeddings",
       [](RopeScaling& s) { s.original_max_position_embeddings = -5; }},
  };
  for (const auto& [key, change] : llama_keys) {
    const std::string m = message(llama, change);
    EXPECT_EQ(m.rfind(std::string("[model.rope_scaling] ") + key + " = ", 0), 0u) << m;
  }
  // Every entry point validates; the head size and base are the model's.
  RopeScaling bad = yarn;
  bad.factor = 0;
  EXPECT_THROW(rope_inverse_frequencies(64, 10000, bad), Error);
  EXPECT_THROW(rope_attention_factor(bad), Error);
  EXPECT_THROW(rope_frequencies(64, 10000, bad), Error);
  EXPECT_THROW(rope_inverse_frequencies(7, 10000, yarn), Error);
  EXPECT_THROW(rope_inverse_frequencies(0, 10000, yarn), Error);
  EXPECT_THROW(rope_inverse_frequencies(64, 0, yarn), Error);
  EXPECT_THROW(rope_inverse_frequencies(64, NAN, {}), Error);
}

}  // namespace
}  // namespace mixprec
