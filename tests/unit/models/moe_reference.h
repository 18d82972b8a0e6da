// Helpers for the MoE layer's tests: random f64 weights and an f64 reference for one expert,
// written with loops over plain doubles (independent of the ops under test).
#pragma once

#include <cmath>
#include <vector>

#include "mixprec/models/transformer/moe.h"
#include "support/op_testing.h"

namespace mixprec::models::moe_reference {

inline MoeWeights random_weights(int64_t E, int64_t d, int64_t ff, MlpKind kind, uint64_t seed,
                                 bool requires_grad = false) {
  auto make = [&](Shape s, uint64_t sd) {
    return requires_grad ? testing::grad_input(s, sd, 0.7) : testing::randn(s, DType::f64, sd, 0.7);
  };
  MoeWeights w;
  w.router = make({E, d}, seed);
  for (int64_t e = 0; e < E; ++e) {
    FeedForwardWeights f;
    const auto s = seed + 10 * static_cast<uint64_t>(e + 1);
    if (kind == MlpKind::swiglu) f.w_gate = make({ff, d}, s + 1);
    f.w_up = make({ff, d}, s + 2);
    f.w_down = make({d, ff}, s + 3);
    w.experts.push_back(f);
  }
  return w;
}

using Matrix = std::vector<std::vector<double>>;

inline Matrix rows_of(const Tensor& t) {
  const std::vector<double> v = t.to_doubles();
  Matrix m(static_cast<size_t>(t.size(0)), std::vector<double>(static_cast<size_t>(t.size(1))));
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = 0; j < m[i].size(); ++j) m[i][j] = v[i * m[i].size() + j];
  return m;
}

inline std::vector<double> matvec(const Matrix& w, const std::vector<double>& x) {
  std::vector<double> y(w.size(), 0.0);
  for (size_t i = 0; i < w.size(); ++i)
    for (size_t j = 0; j < x.size(); ++j) y[i] += w[i][j] * x[j];
  return y;
}

inline std::vector<double> expert_ref(const FeedForwardWeights& f, MlpKind kind,
                                      const std::vector<double>& x) {
  std::vector<double> up = matvec(rows_of(f.w_up), x), h(up.size());
  if (kind == MlpKind::swiglu) {
    const std::vector<double> g = matvec(rows_of(f.w_gate), x);
    for (size_t i = 0; i < h.size(); ++i) h[i] = g[i] / (1 + std::exp(-g[i])) * up[i];
  } else {
    for (size_t i = 0; i < h.size(); ++i)
      h[i] = 0.5 * up[i] * (1 + std::erf(up[i] / std::sqrt(2.0)));
  }
  return matvec(rows_of(f.w_down), h);
}

inline Tensor to_tensor(const Matrix& m) {
  std::vector<double> flat;
  for (const auto& r : m) flat.insert(flat.end(), r.begin(), r.end());
  return Tensor::from_doubles(
      flat, {static_cast<int64_t>(m.size()), static_cast<int64_t>(m[0].size())}, DType::f64);
}

}  // namespace mixprec::models::moe_reference
