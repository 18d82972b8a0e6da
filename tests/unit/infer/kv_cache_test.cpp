// The key/value cache: decoding position by position gives the logits of the whole-sequence
// forward (every family: RoPE with GQA, learned positions, MoE), generation emits the same
// tokens with and without it, past the context too; top-p keeps the nucleus.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mixprec/amp/compute_scope.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/infer/sampler.h"
#include "mixprec/models/registry.h"
#include "support/op_testing.h"
#include "unit/models/models_testing.h"

namespace mixprec::infer {
namespace {

using mixprec::testing::error_of;
using models::testing::tiny_config;

std::vector<config::ModelConfig> families() {
  config::ModelConfig llama = tiny_config("llama3");
  llama.n_heads = 4;
  llama.n_kv_heads = 2;
  llama.d_model = 32;
  llama.max_seq_len = 40;
  llama.rope_theta = 500000.0;
  llama.tie_embeddings = false;
  config::ModelConfig gpt = tiny_config("gpt");
  gpt.norm = "layernorm";
  gpt.mlp = "gelu";
  gpt.positions = "learned";
  gpt.bias = true;
  gpt.max_seq_len = 40;
  config::ModelConfig moe = tiny_config("moe");
  moe.max_seq_len = 40;
  return {llama, gpt, moe};
}

std::vector<int64_t> tokens_of(int64_t n, int64_t vocab) {
  std::vector<int64_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back((i * 5 + 3) % vocab);
  return t;
}

TEST(KvCache, DecodingGivesTheForwardsLogitsPositionByPosition) {
  for (const config::ModelConfig& c : families()) {
    SCOPED_TRACE(c.kind);
    const auto m = models::make_model(c);
    m->materialize(3, amp::preset("fp32"));
    const std::vector<int64_t> seq = tokens_of(30, c.vocab_size);
    NoGradGuard no_grad;
    const Tensor full = m->forward(Tensor::from_vector(seq, {1, 30}));  // [1, 30, V]
    auto state = m->start_decoding(1);
    ASSERT_NE(state, nullptr);
    // The prompt (12 positions) at once, then one position at a time.
    const std::vector<int64_t> prompt(seq.begin(), seq.begin() + 12);
    Tensor got = m->decode(Tensor::from_vector(prompt, {1, 12}), *state);
    mixprec::testing::expect_close(got, full.slice(1, 0, 12), 1e-6, 1e-5, "prompt");
    for (int64_t p = 12; p < 30; ++p) {
      got = m->decode(Tensor::from_vector(std::vector<int64_t>{seq[p]}, {1, 1}), *state);
      mixprec::testing::expect_close(got, full.slice(1, p, p + 1), 1e-6, 1e-5,
                                     "position " + std::to_string(p));
    }
    EXPECT_EQ(state->length(), 30);
  }
}

TEST(KvCache, GenerationEmitsTheSameTokensWithAndWithoutIt) {
  for (const config::ModelConfig& c : families()) {
    for (const char* precision : {"fp32", "bf16-mixed"}) {
      SCOPED_TRACE(c.kind + " " + precision);
      const auto m = models::make_model(c);
      m->materialize(4, amp::preset(precision));
      amp::ComputeScope scope(amp::preset(precision));
      // 60 new tokens after 6: past max_seq_len 40, where the window starts to slide.
      SampleOptions o{
          .max_new_tokens = 60, .temperature = 0.9, .top_k = 0, .top_p = 0.9, .seed = 11};
      const std::vector<int64_t> prompt = tokens_of(6, c.vocab_size);
      const std::vector<int64_t> cached = generate(*m, prompt, o);
      o.use_cache = false;
      EXPECT_EQ(cached, generate(*m, prompt, o));
    }
  }
}

TEST(KvCache, DecodeRefusesWhatItCannotDo) {
  const config::ModelConfig c = families()[0];
  const auto m = models::make_model(c);
  m->materialize(5, amp::preset("fp32"));
  auto state = m->start_decoding(1);
  m->decode(Tensor::from_vector(tokens_of(4, c.vocab_size), {1, 4}), *state);
  EXPECT_NE(error_of([&] {
              m->decode(Tensor::from_vector(tokens_of(2, c.vocab_size), {1, 2}), *state);
            }).find("one token at a time"),
            std::string::npos);
  auto fresh = m->start_decoding(1);
  EXPECT_NE(error_of([&] {
              m->decode(Tensor::from_vector(tokens_of(41, c.vocab_size), {1, 41}), *fresh);
            }).find("exceed model.max_seq_len = 40"),
            std::string::npos);
}

TEST(TopP, KeepsTheFewestLikeliestTokensHoldingP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 (temperature 1): top_p 0.7 keeps the first two.
  const std::vector<float> logits{std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  SampleOptions o{.temperature = 1.0, .top_k = 0, .top_p = 0.7};
  std::vector<int> seen(4, 0);
  for (uint64_t pos = 0; pos < 2000; ++pos)
    ++seen[static_cast<std::size_t>(sample_next(logits, o, pos))];
  EXPECT_EQ(seen[0] + seen[2], 0);
  // Renormalised over the nucleus: 0.5 / 0.8 and 0.3 / 0.8.
  EXPECT_NEAR(seen[1] / 2000.0, 0.625, 0.04);
  EXPECT_NEAR(seen[3] / 2000.0, 0.375, 0.04);
  // p at the edge of a token's mass: 0.79 and 0.8 keep exactly the two, 0.81 three.
  for (double p : {0.79, 0.8}) {
    o.top_p = p;
    for (uint64_t pos = 0; pos < 2000; ++pos) {
      const int64_t t = sample_next(logits, o, pos);
      ASSERT_TRUE(t == 1 || t == 3) << p << " drew " << t;
    }
  }
  o.top_p = 0.81;
  bool third = false;
  for (uint64_t pos = 0; pos < 2000; ++pos) third = third || sample_next(logits, o, pos) == 0;
  EXPECT_TRUE(third);
  o.top_p = 0.0;
  EXPECT_NE(error_of([&] { sample_next(logits, o, 0); }).find("top_p = 0 must be in (0, 1]"),
            std::string::npos);
}

}  // namespace
}  // namespace mixprec::infer
