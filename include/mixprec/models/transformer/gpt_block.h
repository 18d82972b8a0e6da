// One pre-LayerNorm GPT block written with mixprec ops (the Block of nanoGPT / GPT-2):
//   x = x + proj(attention(qkv(ln1(x))));  x = x + fc_out(gelu(fc(ln2(x))))
// Functional: parameters are plain tensors, so tests and benchmarks can build, train and
// time it before the module layer exists.
#pragma once

#include <cstdint>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::models {

struct GptBlockConfig {
  int64_t d_model = 256;
  int64_t n_head = 4;
  int64_t n_layer = 1;  // only scales the residual projections' init (GPT-2)
  double eps = 1e-5;
};

struct GptBlock {
  GptBlockConfig config;
  Tensor ln1_weight, ln1_bias, qkv_weight, qkv_bias, proj_weight, proj_bias;
  Tensor ln2_weight, ln2_bias, fc_weight, fc_bias, fc_out_weight, fc_out_bias;

  // GPT-2 init: linear weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2·n_layer)),
  // biases 0, LayerNorm 1/0; drawn in f64 from `seed` and rounded once into `dtype`.
  static GptBlock init(const GptBlockConfig& config, uint64_t seed, DType dtype = DType::f32);
  std::vector<Tensor*> parameters();
  // x [B, T, d_model] -> [B, T, d_model]; causal attention over T.
  Tensor forward(const Tensor& x) const;
};

}  // namespace mixprec::models
