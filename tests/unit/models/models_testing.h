// Small configs and helpers shared by the model tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "mixprec/amp/policy.h"
#include "mixprec/config/train_config.h"
#include "mixprec/models/registry.h"
#include "mixprec/models/transformer/transformer.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::models::testing {

inline config::ModelConfig tiny_config(const char* kind) {
  config::ModelConfig c;
  c.kind = kind;
  c.vocab_size = 16;
  c.d_model = 16;
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_ff = 24;
  c.max_seq_len = 12;
  c.moe.n_experts = 4;
  c.moe.top_k = 2;
  c.qk_norm = std::string_view(kind) == "qwen3";  // a rule of the family, off for the others
  return c;
}

// The decoder a family makes of `c` (checked by make_model), by value: the gpt, llama3 and moe
// families' models are Transformers.
inline Transformer transformer(const config::ModelConfig& c) {
  const std::unique_ptr<Model> model = make_model(c);
  return std::move(dynamic_cast<Transformer&>(*model));
}

inline amp::MixedPrecisionPolicy fp32_policy() {
  return amp::preset("fp32");
}

// [B, T] i64 tokens: (b * 7 + t * 3 + salt) % vocab
inline Tensor token_grid(int64_t B, int64_t T, int64_t vocab, int64_t salt = 0) {
  std::vector<int64_t> v;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) v.push_back((b * 7 + t * 3 + salt) % vocab);
  return Tensor::from_vector(v, {B, T});
}

}  // namespace mixprec::models::testing
