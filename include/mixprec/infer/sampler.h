// Text generation from a Transformer: greedy decoding or temperature + top-k + top-p sampling.
//
// Each new token is drawn from the logits of the last position of the context (the last
// model.max_seq_len tokens of prompt + generated so far). With the model's key/value cache
// (Model::decode; the default when the family has one) the prompt runs once and each new
// token costs one position; without it, or once the context is full, each new token costs a
// forward over the whole context. The draw is keyed by
// (seed, position) through Philox, position being the new token's index in the whole
// sequence (prompt first), so a run is reproducible and independent of the thread count.
//
//   amp::AutocastGuard amp(DType::bf16);                  // the caller picks the precision
//   std::vector<int64_t> out = infer::generate(model, prompt, {.temperature = 0.8, .seed = 7});
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "mixprec/models/model.h"

namespace mixprec::infer {

struct SampleOptions {
  int64_t max_new_tokens = 200;  // >= 0
  double temperature = 0.8;      // >= 0 and finite; 0 = greedy (argmax, lowest index on ties)
  int64_t top_k = 40;            // 0 = the full vocabulary; at most vocab_size
  // Nucleus sampling: among the top_k, the fewest likeliest tokens whose probabilities sum to
  // at least top_p (the likeliest always kept); 1 = all of them. In (0, 1].
  double top_p = 1.0;
  uint64_t seed = 0;
  bool use_cache = true;  // the key/value cache, when the model has one
};

// Checks the options against a vocabulary of `vocab_size` tokens; mixprec::Error naming the
// option and its value otherwise.
void validate(const SampleOptions& options, int64_t vocab_size);

// The token drawn from one row of logits (f32, length vocab_size) for the token at
// `position`. Temperature 0 (or top_k 1): argmax, lowest index on ties. Otherwise: the top_k
// largest logits (ties: lower index first), softmax of logit / temperature over them in f64,
// cut to the top_p nucleus, then inverse-CDF with a 53-bit uniform u = philox(seed,
// stream = position). -inf logits
// have probability 0; a NaN or +inf logit, or all -inf, is an Error (a diverged model).
int64_t sample_next(std::span<const float> logits, const SampleOptions& options, uint64_t position);

// The uniform in [0, 1) sample_next draws for (seed, position): Philox4x32-10 at key seed,
// counter (block 0, stream position), words 0 and 1 -> 53 bits.
double sample_uniform(uint64_t seed, uint64_t position);

// Generates up to options.max_new_tokens tokens after `prompt` and returns only the new ones.
// The prompt must be non-empty (a caller wanting "unconditional" text passes a newline,
// token 10 for the byte tokenizer) and hold tokens in [0, vocab_size). Runs under
// NoGradGuard; autocast is the caller's.
std::vector<int64_t> generate(models::Model& model, std::span<const int64_t> prompt,
                              const SampleOptions& options);
// The same tokens, each handed to `on_token` as soon as it is drawn (nothing is kept beyond
// the model's context window, so any count streams in bounded memory).
void generate(models::Model& model, std::span<const int64_t> prompt, const SampleOptions& options,
              const std::function<void(int64_t)>& on_token);

}  // namespace mixprec::infer
