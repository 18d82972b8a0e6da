// Autoregressive generation: with the model's key/value cache, the prompt once and then one
// position per new token; without it (or once the context is full and the window slides), one
// forward over the (cropped) context per new token.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/core/error.h"
#include "mixprec/infer/sampler.h"

namespace mixprec::infer {

std::vector<int64_t> generate(models::Model& model, std::span<const int64_t> prompt,
                              const SampleOptions& options) {
  const int64_t vocab = model.config().vocab_size;
  const int64_t context = model.config().max_seq_len;
  validate(options, vocab);
  MIXPREC_CHECK(!prompt.empty(), "infer::generate",
                "the prompt is empty: pass at least one token (e.g. a newline, token 10)");
  for (std::size_t i = 0; i < prompt.size(); ++i)
    MIXPREC_CHECK(prompt[i] >= 0 && prompt[i] < vocab, "infer::generate",
                  "prompt token " + std::to_string(i) + " = " + std::to_string(prompt[i]) +
                      " is outside the vocabulary [0, " + std::to_string(vocab) + ")");

  NoGradGuard no_grad;
  std::vector<int64_t> sequence(prompt.begin(), prompt.end());
  std::vector<int64_t> generated;
  generated.reserve(static_cast<std::size_t>(options.max_new_tokens));
  std::unique_ptr<models::DecodeState> cache =
      options.use_cache ? model.start_decoding(1) : nullptr;
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    const auto n = static_cast<int64_t>(sequence.size());
    Tensor logits;  // [1, T, V]
    if (cache && n <= context) {
      // The positions the cache lacks: the prompt at first, then the last token.
      const std::vector<int64_t> fresh(sequence.begin() + cache->length(), sequence.end());
      logits =
          model.decode(Tensor::from_vector(fresh, {1, static_cast<int64_t>(fresh.size())}), *cache);
    } else {
      // The model sees at most max_seq_len tokens: the most recent ones (every position moves,
      // so a cache would not hold).
      const auto T = std::min(n, context);
      const std::vector<int64_t> window(sequence.end() - T, sequence.end());
      logits = model.forward(Tensor::from_vector(window, {1, T}));
    }
    const Tensor last =
        logits.select(0, 0).select(0, logits.size(1) - 1).to(DType::f32).contiguous();  // [V]
    const int64_t token = sample_next({last.data<float>(), static_cast<std::size_t>(vocab)},
                                      options, sequence.size());
    sequence.push_back(token);
    generated.push_back(token);
  }
  return generated;
}

}  // namespace mixprec::infer
