// Autoregressive generation: with the model's key/value cache, the prompt once and then one
// position per new token; without it (or once the context is full and the window slides), one
// forward over the (cropped) context per new token.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/core/error.h"
#include "mixprec/infer/sampler.h"

namespace mixprec::infer {

void generate(models::Model& model, std::span<const int64_t> prompt, const SampleOptions& options,
              const std::function<void(int64_t)>& on_token) {
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
  // The model never sees more than the last `context` tokens: only those are kept (cut in
  // bulk, so each token is moved O(1) times), and `length` counts the whole sequence.
  std::vector<int64_t> recent(prompt.begin(), prompt.end());
  auto length = static_cast<int64_t>(prompt.size());
  std::unique_ptr<models::DecodeState> cache =
      options.use_cache ? model.start_decoding(1) : nullptr;
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    Tensor logits;  // [1, T, V]
    if (cache && length <= context) {
      // The positions the cache lacks: the prompt at first, then the last token (nothing has
      // been cut yet: length <= context).
      const std::vector<int64_t> fresh(recent.begin() + cache->length(), recent.end());
      logits =
          model.decode(Tensor::from_vector(fresh, {1, static_cast<int64_t>(fresh.size())}), *cache);
    } else {
      // The model sees at most max_seq_len tokens: the most recent ones (every position moves,
      // so a cache would not hold).
      const auto T = std::min(length, context);
      const std::vector<int64_t> window(recent.end() - T, recent.end());
      logits = model.forward(Tensor::from_vector(window, {1, T}));
    }
    const Tensor last =
        logits.select(0, 0).select(0, logits.size(1) - 1).to(DType::f32).contiguous();  // [V]
    const int64_t token = sample_next({last.data<float>(), static_cast<std::size_t>(vocab)},
                                      options, static_cast<uint64_t>(length));
    recent.push_back(token);
    ++length;
    if (static_cast<int64_t>(recent.size()) > 2 * context)
      recent.erase(recent.begin(), recent.end() - context);
    on_token(token);
  }
}

std::vector<int64_t> generate(models::Model& model, std::span<const int64_t> prompt,
                              const SampleOptions& options) {
  std::vector<int64_t> generated;
  generate(model, prompt, options, [&](int64_t token) { generated.push_back(token); });
  return generated;
}

}  // namespace mixprec::infer
