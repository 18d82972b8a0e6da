#include "mixprec/models/transformer/gpt_block.h"

#include <cmath>

#include "mixprec/ops.h"
#include "mixprec/tensor/generator.h"

namespace mixprec::models {

GptBlock GptBlock::init(const GptBlockConfig& c, uint64_t seed, DType dtype) {
  MIXPREC_CHECK(c.d_model > 0 && c.n_head > 0 && c.d_model % c.n_head == 0, "GptBlock",
                "d_model " + std::to_string(c.d_model) + " must be a positive multiple of n_head " +
                    std::to_string(c.n_head));
  Generator gen(seed);
  const int64_t d = c.d_model;
  const double resid_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  GptBlock b;
  b.config = c;
  b.ln1_weight = Tensor::ones({d}, dtype);
  b.ln1_bias = Tensor::zeros({d}, dtype);
  b.qkv_weight = Tensor::normal({3 * d, d}, 0, 0.02, gen, dtype);
  b.qkv_bias = Tensor::zeros({3 * d}, dtype);
  b.proj_weight = Tensor::normal({d, d}, 0, resid_std, gen, dtype);
  b.proj_bias = Tensor::zeros({d}, dtype);
  b.ln2_weight = Tensor::ones({d}, dtype);
  b.ln2_bias = Tensor::zeros({d}, dtype);
  b.fc_weight = Tensor::normal({4 * d, d}, 0, 0.02, gen, dtype);
  b.fc_bias = Tensor::zeros({4 * d}, dtype);
  b.fc_out_weight = Tensor::normal({d, 4 * d}, 0, resid_std, gen, dtype);
  b.fc_out_bias = Tensor::zeros({d}, dtype);
  return b;
}

std::vector<Tensor*> GptBlock::parameters() {
  return {&ln1_weight, &ln1_bias, &qkv_weight, &qkv_bias, &proj_weight,   &proj_bias,
          &ln2_weight, &ln2_bias, &fc_weight,  &fc_bias,  &fc_out_weight, &fc_out_bias};
}

Tensor GptBlock::forward(const Tensor& x) const {
  MIXPREC_CHECK(x.ndim() == 3 && x.size(2) == config.d_model, "GptBlock",
                "expects x [B, T, " + std::to_string(config.d_model) + "], got " +
                    shape_to_string(x.shape()));
  const int64_t B = x.size(0), T = x.size(1), d = config.d_model, H = config.n_head;
  // qkv [B, T, 3, H, Dh] -> q, k, v [B, H, T, Dh] (strided views)
  const Tensor qkv = linear(layernorm(x, ln1_weight, ln1_bias, config.eps), qkv_weight, qkv_bias)
                         .view({B, T, 3, H, d / H});
  auto head_major = [&](int64_t i) { return qkv.select(2, i).permute({0, 2, 1, 3}); };
  const Tensor attn = scaled_dot_product_attention(head_major(0), head_major(1), head_major(2));
  Tensor h = add(x, linear(attn.transpose(1, 2).reshape({B, T, d}), proj_weight, proj_bias));
  const Tensor mlp =
      linear(gelu(linear(layernorm(h, ln2_weight, ln2_bias, config.eps), fc_weight, fc_bias)),
             fc_out_weight, fc_out_bias);
  return add(h, mlp);
}

}  // namespace mixprec::models
