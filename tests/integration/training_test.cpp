// End to end: a 2-layer MLP and a 1-block transformer language model trained by plain SGD for
// a few hundred steps, with every tensor stored in f32 and again in bf16 (weights updated in
// f32 math and rounded back). The loss must fall well below its starting value.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "mixprec/models/transformer/gpt_block.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

// p -= lr * p.grad in f32 (f64 for f64), rounded once into p's dtype; clears the gradient.
void sgd_step(const std::vector<Tensor*>& params, double lr) {
  NoGradGuard no_grad;
  for (Tensor* p : params) {
    ASSERT_TRUE(p->grad().defined());
    const Tensor updated = sub(p->to(DType::f32), scale(p->grad().to(DType::f32), lr));
    p->copy_from(updated);
    p->set_grad(Tensor());
  }
}

double mean_of(const std::vector<double>& v, size_t from, size_t to) {
  return std::accumulate(v.begin() + static_cast<int64_t>(from),
                         v.begin() + static_cast<int64_t>(to), 0.0) /
         static_cast<double>(to - from);
}

// Classifies 16-d points by which of 4 fixed random directions they align with best.
std::vector<double> train_mlp(DType dt, int steps) {
  Generator gen(5);
  const int64_t n = 256, din = 16, hidden = 64, classes = 4;
  const Tensor x = Tensor::normal({n, din}, 0, 1, gen, DType::f64);
  const Tensor dirs = Tensor::normal({classes, din}, 0, 1, gen, DType::f64);
  const std::vector<double> scores = matmul(x, dirs.transpose(0, 1).contiguous()).to_doubles();
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double* row = scores.data() + i * classes;
    labels[static_cast<size_t>(i)] = std::max_element(row, row + classes) - row;
  }
  const Tensor targets = Tensor::from_vector(labels);
  const Tensor xs = x.to(dt);
  Tensor w1 = Tensor::normal({hidden, din}, 0, 1 / std::sqrt(16.0), gen, dt).set_requires_grad();
  Tensor b1 = Tensor::zeros({hidden}, dt).set_requires_grad();
  Tensor w2 = Tensor::normal({classes, hidden}, 0, 1 / 8.0, gen, dt).set_requires_grad();
  Tensor b2 = Tensor::zeros({classes}, dt).set_requires_grad();
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    Tensor loss = cross_entropy(linear(gelu(linear(xs, w1, b1)), w2, b2), targets);
    losses.push_back(loss.item());
    loss.backward();
    sgd_step({&w1, &b1, &w2, &b2}, 0.5);
  }
  return losses;
}

TEST(Training, TwoLayerMlpLossFallsInF32AndBf16) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::vector<double> losses = train_mlp(dt, 300);
    const double first = mean_of(losses, 0, 5), last = mean_of(losses, 290, 300);
    EXPECT_NEAR(first, std::log(4.0), 0.3) << dtype_name(dt);
    EXPECT_LT(last, 0.3 * first) << dtype_name(dt) << ": " << first << " -> " << last;
    for (double l : losses) ASSERT_TRUE(std::isfinite(l)) << dtype_name(dt);
  }
}

// Next-token prediction on sequences that count up by a per-sequence stride modulo V: the
// model must read the previous tokens (attention) to know the stride.
std::vector<double> train_transformer(DType dt, int steps) {
  const int64_t V = 32, T = 16, B = 8, d = 32;
  models::GptBlock block = models::GptBlock::init({d, 2, 1, 1e-5}, 11, dt);
  Generator gen(12);
  Tensor wte = Tensor::normal({V, d}, 0, 0.3, gen, dt).set_requires_grad();
  Tensor wpe = Tensor::normal({T, d}, 0, 0.1, gen, dt).set_requires_grad();
  Tensor lnf_w = Tensor::ones({d}, dt).set_requires_grad();
  Tensor lnf_b = Tensor::zeros({d}, dt).set_requires_grad();
  Tensor head = Tensor::normal({V, d}, 0, 0.1, gen, dt).set_requires_grad();
  std::vector<Tensor*> params = block.parameters();
  for (Tensor* p : params) p->set_requires_grad();
  params.insert(params.end(), {&wte, &wpe, &lnf_w, &lnf_b, &head});
  std::vector<int64_t> pos(static_cast<size_t>(T));
  std::iota(pos.begin(), pos.end(), 0);
  const Tensor positions = Tensor::from_vector(pos);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    std::vector<int64_t> ids, next;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t start = (s * 7 + b * 5) % V, stride = 1 + (s + b) % 3;
      for (int64_t t = 0; t < T; ++t) {
        ids.push_back((start + stride * t) % V);
        next.push_back((start + stride * (t + 1)) % V);
      }
    }
    const Tensor x =
        add(embedding(Tensor::from_vector(ids, {B, T}), wte), embedding(positions, wpe));
    const Tensor h = layernorm(block.forward(x), lnf_w, lnf_b, 1e-5);
    Tensor loss = cross_entropy(linear(h, head).reshape({B * T, V}), Tensor::from_vector(next));
    losses.push_back(loss.item());
    loss.backward();
    sgd_step(params, 0.3);
  }
  return losses;
}

TEST(Training, OneBlockTransformerLossFallsInF32AndBf16) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::vector<double> losses = train_transformer(dt, 300);
    const double first = mean_of(losses, 0, 5), last = mean_of(losses, 290, 300);
    EXPECT_NEAR(first, std::log(32.0), 0.5) << dtype_name(dt);
    EXPECT_LT(last, 0.5 * first) << dtype_name(dt) << ": " << first << " -> " << last;
    for (double l : losses) ASSERT_TRUE(std::isfinite(l)) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace mixprec
