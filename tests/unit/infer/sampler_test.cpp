// Sampling: greedy against the model's own forward (argmax in f64, step by step), sampled
// frequencies against a top-k softmax computed here in f64 (chi-square), determinism,
// context cropping and option errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/infer/sampler.h"
#include "mixprec/models/transformer/transformer.h"
#include "support/op_testing.h"
#include "unit/models/models_testing.h"

namespace mixprec::infer {
namespace {

using mixprec::testing::error_of;
using mixprec::testing::with_threads;
using models::testing::tiny_config;

// The default top_k (40) is more than the tiny vocabularies here hold.
constexpr SampleOptions kFullVocabulary{.top_k = 0};

models::Transformer tiny_model(const char* kind, uint64_t seed = 3) {
  models::Transformer m = models::testing::transformer(tiny_config(kind));
  m.materialize(seed, amp::preset("fp32"));
  return m;
}

// The last row of forward(context), in f64.
std::vector<double> last_logits(models::Transformer& m, const std::vector<int64_t>& context) {
  NoGradGuard no_grad;
  const auto T = static_cast<int64_t>(context.size());
  const std::vector<double> all = m.forward(Tensor::from_vector(context, {1, T})).to_doubles();
  const int64_t V = m.config().vocab_size;
  return {all.end() - V, all.end()};
}

int64_t argmax_f64(const std::vector<double>& v) {
  int64_t best = 0;
  for (int64_t i = 1; i < static_cast<int64_t>(v.size()); ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

// softmax(logit / T) over the top_k largest (ties: lower index), 0 elsewhere; all f64.
std::vector<double> reference_probabilities(const std::vector<double>& logits, double T,
                                            int64_t top_k) {
  const auto V = static_cast<int64_t>(logits.size());
  std::vector<int64_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), int64_t{0});
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  const int64_t k = top_k == 0 ? V : top_k;
  std::vector<double> p(logits.size(), 0.0);
  double z = 0;
  for (int64_t j = 0; j < k; ++j) z += std::exp(logits[idx[j]] / T);
  for (int64_t j = 0; j < k; ++j) p[idx[j]] = std::exp(logits[idx[j]] / T) / z;
  return p;
}

// Pearson's statistic over the cells with p > 0; expects no draw where p == 0 and the
// statistic below the 1 - 1e-4 quantile of chi-square (Wilson-Hilferty approximation).
void expect_matches(const std::vector<int64_t>& counts, const std::vector<double>& p,
                    const std::string& what) {
  const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
  double stat = 0;
  int cells = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0) << what << ": token " << i << " is outside the top-k";
      continue;
    }
    const double expected = n * p[i];
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++cells;
  }
  const double df = cells - 1, z = 3.719;
  const double bound = df * std::pow(1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df)), 3);
  EXPECT_LT(stat, bound) << what << ": chi-square " << stat << " with " << df << " dof";
}

TEST(SampleNext, GreedyIsArgmaxWithLowestIndexOnTies) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 2.5f};
  for (uint64_t seed : {0u, 1u, 99u}) {
    EXPECT_EQ(sample_next(logits, {.temperature = 0.0, .top_k = 0, .seed = seed}, 4), 1);
    EXPECT_EQ(sample_next(logits, {.temperature = 1.5, .top_k = 1, .seed = seed}, 4), 1);
  }
  const std::vector<float> negative_infinity = {-INFINITY, -INFINITY, -5.0f};
  EXPECT_EQ(sample_next(negative_infinity, {.temperature = 0.0, .top_k = 0}, 0), 2);
  EXPECT_EQ(sample_next(negative_infinity, {.temperature = 1.0, .top_k = 0}, 0), 2);
}

TEST(SampleNext, FrequenciesMatchTopKSoftmaxAtTemperature) {
  const std::vector<double> logits = {0.3, -1.2, 2.0, 1.1, 1.1, -0.4, 0.9, -3.0, 1.7, 0.0};
  // The sampler reads f32, so the reference starts from the same f32 values.
  const std::vector<float> row(logits.begin(), logits.end());
  const std::vector<double> as_f32(row.begin(), row.end());
  struct Case {
    double temperature;
    int64_t top_k;
  };
  for (const Case c : {Case{1.0, 0}, Case{0.7, 5}, Case{2.5, 3}, Case{0.35, 4}}) {
    const std::string what =
        "T=" + std::to_string(c.temperature) + " top_k=" + std::to_string(c.top_k);
    std::vector<int64_t> counts(logits.size(), 0);
    const int64_t draws = 40000;
    // Varying both the seed and the position: each is part of the key.
    for (int64_t i = 0; i < draws; ++i) {
      const SampleOptions o{
          .temperature = c.temperature, .top_k = c.top_k, .seed = static_cast<uint64_t>(i % 200)};
      ++counts[sample_next(row, o, static_cast<uint64_t>(i / 200))];
    }
    expect_matches(counts, reference_probabilities(as_f32, c.temperature, c.top_k), what);
  }
}

TEST(SampleNext, TopKBoundaryTieKeepsTheLowerIndex) {
  // Tokens 1 and 3 tie for second place; top_k = 2 keeps token 1 only.
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f, 1.0f};
  std::vector<int64_t> counts(4, 0);
  for (uint64_t s = 0; s < 2000; ++s)
    ++counts[sample_next(logits, {.temperature = 1.0, .top_k = 2, .seed = s}, 0)];
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_GT(counts[1], 0);
}

TEST(SampleNext, UniformIsInUnitIntervalAndKeyedBySeedAndPosition) {
  double sum = 0;
  for (uint64_t i = 0; i < 10000; ++i) {
    const double u = sample_uniform(7, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.015);  // 5 sigma of a uniform mean
  EXPECT_NE(sample_uniform(7, 3), sample_uniform(8, 3));
  EXPECT_NE(sample_uniform(7, 3), sample_uniform(7, 4));
  EXPECT_EQ(sample_uniform(7, 3), sample_uniform(7, 3));
}

TEST(SampleNext, RejectsDivergedLogitsAndBadOptions) {
  EXPECT_NE(error_of([] {
              sample_next(std::vector<float>{0.f, NAN}, kFullVocabulary, 0);
            }).find("token 1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              sample_next(std::vector<float>{INFINITY, 0.f}, kFullVocabulary, 0);
            }).find("inf"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { sample_next(std::vector<float>{-INFINITY}, kFullVocabulary, 0); }).find("-inf"),
      std::string::npos);
  EXPECT_NE(error_of([] { sample_next(std::vector<float>{}, kFullVocabulary, 0); }), "");
  EXPECT_NE(error_of([] {
              sample_next(std::vector<float>{0.f, 1.f}, {.top_k = 3}, 0);
            }).find("top_k = 3"),
            std::string::npos);
}

TEST(Generate, GreedyIsArgmaxOfTheModelsOwnForwardStepByStep) {
  for (const char* kind : {"gpt", "moe"}) {
    models::Transformer m = tiny_model(kind);
    const std::vector<int64_t> prompt = {1, 5, 9};
    const std::vector<int64_t> got =
        generate(m, prompt, {.max_new_tokens = 6, .temperature = 0.0, .top_k = 0, .seed = 11});
    std::vector<int64_t> sequence = prompt, expected;
    for (int step = 0; step < 6; ++step) {
      expected.push_back(argmax_f64(last_logits(m, sequence)));
      sequence.push_back(expected.back());
    }
    EXPECT_EQ(got, expected) << kind;
    // top_k = 1 is greedy whatever the temperature and seed.
    EXPECT_EQ(generate(m, prompt, {.max_new_tokens = 6, .temperature = 1.7, .top_k = 1, .seed = 5}),
              expected)
        << kind;
  }
}

TEST(Generate, SampledFrequenciesMatchTheModelsTopKSoftmax) {
  models::Transformer m = tiny_model("gpt", 8);
  const std::vector<int64_t> prompt = {3, 14, 1, 5};
  const double T = 0.45;  // sharpens the near-uniform logits of a fresh model
  const int64_t top_k = 6;
  const std::vector<double> p = reference_probabilities(last_logits(m, prompt), T, top_k);
  std::vector<int64_t> counts(16, 0);
  for (uint64_t seed = 0; seed < 4000; ++seed) {
    const std::vector<int64_t> t =
        generate(m, prompt, {.max_new_tokens = 1, .temperature = T, .top_k = top_k, .seed = seed});
    ASSERT_EQ(t.size(), 1u);
    ++counts[t[0]];
  }
  expect_matches(counts, p, "model logits");
}

TEST(Generate, CropsTheContextToMaxSeqLenFromTheLeft) {
  models::Transformer m = tiny_model("gpt");
  std::vector<int64_t> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back((i * 5 + 2) % 16);  // 20 > max_seq_len 12
  const SampleOptions greedy{.max_new_tokens = 5, .temperature = 0.0, .top_k = 0};
  const SampleOptions sampled{.max_new_tokens = 5, .temperature = 1.0, .top_k = 0, .seed = 4};
  for (const SampleOptions& o : {greedy, sampled}) {
    std::vector<int64_t> sequence = prompt, expected;
    for (int step = 0; step < 5; ++step) {
      const std::vector<int64_t> window(sequence.end() - 12, sequence.end());
      const std::vector<double> row = last_logits(m, window);
      const std::vector<float> row_f32(row.begin(), row.end());
      expected.push_back(o.temperature == 0 ? argmax_f64(row)
                                            : sample_next(row_f32, o, sequence.size()));
      sequence.push_back(expected.back());
    }
    EXPECT_EQ(generate(m, prompt, o), expected) << "temperature " << o.temperature;
  }
}

TEST(Generate, SameSeedSameTokensOnAnyThreadCount) {
  models::Transformer m = tiny_model("moe");
  const std::vector<int64_t> prompt = {10, 4};
  const SampleOptions o{.max_new_tokens = 15, .temperature = 1.0, .top_k = 8, .seed = 21};
  const std::vector<int64_t> one = with_threads(1, [&] { return generate(m, prompt, o); });
  const std::vector<int64_t> two = with_threads(2, [&] { return generate(m, prompt, o); });
  EXPECT_EQ(one, two);
  EXPECT_EQ(generate(m, prompt, o), one);
  SampleOptions other = o;
  other.seed = 22;
  EXPECT_NE(generate(m, prompt, other), one);  // 15 draws from ~8 tokens: equal by chance ~0
  for (int64_t t : one) EXPECT_TRUE(t >= 0 && t < 16);
}

TEST(Generate, GreedyUnderBf16AutocastMatchesItsForward) {
  models::Transformer m = tiny_model("gpt");
  amp::AutocastGuard autocast(DType::bf16);
  const std::vector<int64_t> prompt = {2, 7, 7};
  const std::vector<int64_t> got =
      generate(m, prompt, {.max_new_tokens = 4, .temperature = 0.0, .top_k = 0});
  std::vector<int64_t> sequence = prompt, expected;
  for (int step = 0; step < 4; ++step) {
    expected.push_back(argmax_f64(last_logits(m, sequence)));
    sequence.push_back(expected.back());
  }
  EXPECT_EQ(got, expected);
}

TEST(Generate, ZeroNewTokensIsEmpty) {
  models::Transformer m = tiny_model("gpt");
  EXPECT_TRUE(generate(m, std::vector<int64_t>{1}, {.max_new_tokens = 0, .top_k = 0}).empty());
}

TEST(Generate, RejectsBadOptionsAndPrompts) {
  models::Transformer m = tiny_model("gpt");
  const std::vector<int64_t> ok = {1, 2};
  auto error = [&](std::vector<int64_t> prompt, SampleOptions o) {
    return error_of([&] { generate(m, prompt, o); });
  };
  EXPECT_NE(error(ok, {.temperature = -0.5}).find("temperature = -0.5"), std::string::npos);
  EXPECT_NE(error(ok, {.temperature = NAN}).find("temperature = nan"), std::string::npos);
  EXPECT_NE(error(ok, {.top_k = 17}).find("top_k = 17"), std::string::npos);
  EXPECT_NE(error(ok, {.top_k = -1}).find("top_k = -1"), std::string::npos);
  EXPECT_NE(error(ok, {.max_new_tokens = -3}).find("max_new_tokens = -3"), std::string::npos);
  EXPECT_NE(error({}, kFullVocabulary).find("prompt is empty"), std::string::npos);
  EXPECT_NE(error({1, 16}, kFullVocabulary).find("prompt token 1 = 16"), std::string::npos);
  EXPECT_NE(error({-1}, kFullVocabulary).find("prompt token 0 = -1"), std::string::npos);
  EXPECT_EQ(error(ok, {.max_new_tokens = 1, .top_k = 16}), "");  // top_k == vocab is fine
  EXPECT_NE(error(ok, {.max_new_tokens = 1}).find("top_k = 40"), std::string::npos);  // default
}

}  // namespace
}  // namespace mixprec::infer
