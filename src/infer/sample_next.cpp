// One token from one row of logits: greedy, or temperature + top-k sampling with a Philox
// uniform keyed by (seed, position).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/infer/sampler.h"
#include "mixprec/numerics/philox.h"

namespace mixprec::infer {
namespace {

std::string show(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// NaN or +inf means the model diverged: no distribution to sample from. -inf is a token
// the model rules out.
void check_logits(std::span<const float> logits) {
  MIXPREC_CHECK(!logits.empty(), "infer::sample_next", "empty logits row");
  bool any_finite = false;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    MIXPREC_CHECK(!std::isnan(v) && v != INFINITY, "infer::sample_next",
                  "logit of token " + std::to_string(i) + " is " + show(v));
    any_finite = any_finite || std::isfinite(v);
  }
  MIXPREC_CHECK(any_finite, "infer::sample_next", "every logit is -inf");
}

int64_t argmax(std::span<const float> logits) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;  // strict: the lowest index wins ties
  return static_cast<int64_t>(best);
}

}  // namespace

void validate(const SampleOptions& options, int64_t vocab_size) {
  MIXPREC_CHECK(options.max_new_tokens >= 0, "infer::SampleOptions",
                "max_new_tokens = " + std::to_string(options.max_new_tokens) + " must be >= 0");
  MIXPREC_CHECK(std::isfinite(options.temperature) && options.temperature >= 0,
                "infer::SampleOptions",
                "temperature = " + show(options.temperature) + " must be finite and >= 0");
  MIXPREC_CHECK(options.top_p > 0 && options.top_p <= 1, "infer::SampleOptions",
                "top_p = " + show(options.top_p) + " must be in (0, 1]");
  MIXPREC_CHECK(options.top_k >= 0 && options.top_k <= vocab_size, "infer::SampleOptions",
                "top_k = " + std::to_string(options.top_k) + " must be in [0, vocab_size = " +
                    std::to_string(vocab_size) + "] (0 = the full vocabulary)");
}

double sample_uniform(uint64_t seed, uint64_t position) {
  const PhiloxBlock block = philox_block(seed, position, 0);
  const uint64_t bits = (uint64_t{block[0]} << 21) | (uint64_t{block[1]} >> 11);  // 53 bits
  return static_cast<double>(bits) * 0x1p-53;
}

int64_t sample_next(std::span<const float> logits, const SampleOptions& options,
                    uint64_t position) {
  const auto vocab = static_cast<int64_t>(logits.size());
  validate(options, vocab);
  check_logits(logits);
  if (options.temperature == 0 || options.top_k == 1) return argmax(logits);

  // The k largest logits, largest first; equal logits keep index order, so the candidate
  // set and the CDF order are fixed by the values alone.
  const int64_t k = options.top_k == 0 ? vocab : options.top_k;
  std::vector<int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });

  // softmax(logit / T) over the candidates, in f64 relative to the largest (exp <= 1).
  const double top = logits[order[0]];
  std::vector<double> weight(static_cast<std::size_t>(k));
  double total = 0;
  for (int64_t j = 0; j < k; ++j) {
    weight[j] = std::exp((static_cast<double>(logits[order[j]]) - top) / options.temperature);
    total += weight[j];
  }
  if (options.top_p < 1) {
    // The nucleus: candidates in order until their mass reaches top_p; the rest get weight 0.
    double kept = 0;
    for (int64_t j = 0; j < k; ++j) {
      if (kept >= options.top_p * total) {
        weight[j] = 0;
        continue;
      }
      kept += weight[j];
    }
    total = kept;
  }
  const double target = sample_uniform(options.seed, position) * total;
  double cumulative = 0;
  int64_t chosen = 0;  // the largest logit has weight 1 > 0
  for (int64_t j = 0; j < k; ++j) {
    if (weight[j] == 0) continue;
    chosen = j;
    cumulative += weight[j];
    if (target < cumulative) break;  // rounding past the end keeps the last positive weight
  }
  return order[chosen];
}

}  // namespace mixprec::infer
