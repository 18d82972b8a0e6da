// Autoregressive generation: one forward over the (cropped) context per new token.
#include <algorithm>
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
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    // The model sees at most max_seq_len tokens: the most recent ones.
    const auto T = std::min(static_cast<int64_t>(sequence.size()), context);
    const std::vector<int64_t> window(sequence.end() - T, sequence.end());
    const Tensor logits = model.forward(Tensor::from_vector(window, {1, T}));  // [1, T, V]
    const Tensor last = logits.select(0, 0).select(0, T - 1).to(DType::f32).contiguous();  // [V]
    const int64_t token = sample_next({last.data<float>(), static_cast<std::size_t>(vocab)},
                                      options, sequence.size());
    sequence.push_back(token);
    generated.push_back(token);
  }
  return generated;
}

}  // namespace mixprec::infer
