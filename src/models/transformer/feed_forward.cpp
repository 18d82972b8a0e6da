#include "mixprec/models/transformer/feed_forward.h"

#include <string>

#include "mixprec/amp/autocast.h"
#include "mixprec/ops.h"

namespace mixprec::models {

MlpKind parse_mlp_kind(std::string_view name) {
  if (name == "swiglu") return MlpKind::swiglu;
  MIXPREC_CHECK(name == "gelu", "parse_mlp_kind",
                "mlp '" + std::string(name) + "' is not one of swiglu, gelu");
  return MlpKind::gelu;
}

Tensor feed_forward(const Tensor& x, const FeedForwardWeights& w, MlpKind kind) {
  const Tensor up = linear(x, w.w_up, w.b_up);
  const Tensor hidden =
      kind == MlpKind::swiglu ? swiglu(linear(x, w.w_gate, w.b_gate), up) : gelu(up);
  return linear(hidden, w.w_down, w.b_down);
}

std::vector<Tensor> feed_forward_grouped(const std::vector<Tensor>& xs,
                                         const std::vector<FeedForwardWeights>& ws, MlpKind kind,
                                         const std::vector<std::string>& scopes) {
  const std::size_t n = xs.size();
  MIXPREC_CHECK(ws.size() == n && scopes.size() == n, "feed_forward_grouped",
                std::to_string(n) + " inputs need as many weight sets and scopes");
  // Up (and gate) projections of every group in one grouped pass: [gate..., up...] for SwiGLU.
  std::vector<Tensor> in, weights, biases;
  std::vector<std::string> names;
  const bool gated = kind == MlpKind::swiglu;
  for (int pass = gated ? 0 : 1; pass < 2; ++pass)
    for (std::size_t g = 0; g < n; ++g) {
      in.push_back(xs[g]);
      weights.push_back(pass == 0 ? ws[g].w_gate : ws[g].w_up);
      biases.push_back(pass == 0 ? ws[g].b_gate : ws[g].b_up);
      names.push_back(scopes[g]);
    }
  const std::vector<Tensor> projected = grouped_linear(in, weights, biases, names);
  std::vector<Tensor> hidden(n), down(n), down_bias(n);
  for (std::size_t g = 0; g < n; ++g) {
    const amp::ModuleScope scope(scopes[g]);
    hidden[g] = gated ? swiglu(projected[g], projected[n + g]) : gelu(projected[g]);
    down[g] = ws[g].w_down;
    down_bias[g] = ws[g].b_down;
  }
  return grouped_linear(hidden, down, down_bias, scopes);
}

}  // namespace mixprec::models
