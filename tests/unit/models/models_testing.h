// Small configs and helpers shared by the model tests.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mixprec/amp/policy.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/config/train_config.h"
#include "mixprec/models/parameter_set.h"
#include "mixprec/models/registry.h"
#include "mixprec/models/transformer/transformer.h"
#include "mixprec/models/unit_hooks.h"
#include "mixprec/tensor/tensor.h"
#include "support/op_testing.h"

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
  // deepseek_v3's latent attention (the others ignore [model.mla]): DeepSeek-V3's 512-wide
  // latent and 192-wide heads would dwarf this model.
  c.mla = {.q_lora_rank = 0,
           .kv_lora_rank = 8,
           .qk_nope_head_dim = 4,
           .qk_rope_head_dim = 4,
           .v_head_dim = 6};
  return c;
}

// A tiny Llama 3 whose linears an FP8 recipe converts (dims multiples of 16) and whose
// d_ff = 192 rows cut 128x128 blocks.
inline config::ModelConfig fp8_tiny_config() {
  config::ModelConfig c = tiny_config("llama3");
  c.d_model = 64;
  c.n_heads = 4;
  c.d_ff = 192;
  c.vocab_size = 32;
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

// The model's logits for tokens, without a graph.
inline Tensor logits(Model& m, const Tensor& tokens) {
  NoGradGuard no_grad;
  return m.forward(tokens);
}

// Decoding seq [1, 20] with the key/value cache (an 8-token prompt, then one token at a time)
// gives the whole-sequence forward's logits under the current compute scope: to rounding in
// fp32; in bf16 the same values reach the same kernels, but one query row at a time sums in
// another order.
inline void expect_cached_decoding_matches(Model& m, const Tensor& seq, bool fp32) {
  const Tensor full = logits(m, seq);
  auto state = m.start_decoding(1);
  const double tol = fp32 ? 1e-5 : 2e-2;
  Tensor got = m.decode(seq.slice(1, 0, 8), *state);
  mixprec::testing::expect_close(got, full.slice(1, 0, 8), tol, tol, "prompt");
  for (int64_t t = 8; t < seq.size(1); ++t) {
    got = m.decode(seq.slice(1, t, t + 1).contiguous(), *state);
    mixprec::testing::expect_close(got, full.slice(1, t, t + 1), tol, tol,
                                   "position " + std::to_string(t));
  }
}

// Sets every element of a materialized parameter (master and working copy) from f(i).
template <class F>
void set_values(ParameterSet& p, const std::string& name, F f) {
  NoGradGuard no_grad;  // the master may be the working leaf itself
  Tensor& master = p.at(name).master();
  std::vector<double> v = master.to_doubles();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = f(i, v[i]);
  master.copy_from(Tensor::from_doubles(v, master.shape(), DType::f64));
  p.at(name).refresh();
}

// The model's weights as f64 leaves, for f64 gradchecks of a whole model (a Parameter keeps
// no f64 master): set_unit_hooks(&weights) before the forward.
class F64Weights final : public UnitHooks {
 public:
  explicit F64Weights(const ParameterSet& p) {
    NoGradGuard no_grad;
    for (const auto& [name, param] : p.entries()) {
      Tensor w = param->master().detach().to(DType::f64).clone();
      w.set_requires_grad(true, DType::f64);
      weights_.emplace(name, w);
    }
  }
  const Tensor& weight(std::string_view name) override { return weights_.at(std::string(name)); }
  Tensor enter_unit(const std::string&, const Tensor& x) override { return x; }
  Tensor leave_unit(const std::string&, const Tensor& y) override { return y; }
  void sum_counts_over_ranks(std::vector<int64_t>&) override {}

 private:
  std::map<std::string, Tensor> weights_;
};

}  // namespace mixprec::models::testing
