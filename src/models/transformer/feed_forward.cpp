#include "mixprec/models/transformer/feed_forward.h"

#include <string>

#include "mixprec/amp/autocast.h"
#include "mixprec/ops.h"

namespace mixprec::models {

MlpKind parse_mlp_kind(std::string_view name) {
  if (name == "swiglu") return MlpKind::swiglu;
  if (name == "gelu_tanh") return MlpKind::gelu_tanh;
  MIXPREC_CHECK(name == "gelu", "parse_mlp_kind",
                "mlp '" + std::string(name) + "' is not one of swiglu, gelu, gelu_tanh");
  return MlpKind::gelu;
}

namespace {

// Each projection under its weight's name, so module filters (fp32_modules, a recipe's
// filter_fqns) can pick it out: "blocks.0.mlp.w_up".
Tensor named_linear(const char* name, const Tensor& x, const Tensor& w, const Tensor& b) {
  const amp::ModuleScope scope(name);
  return linear(x, w, b);
}

Tensor ungated(const Tensor& up, MlpKind kind) {
  return kind == MlpKind::gelu_tanh ? gelu_tanh(up) : gelu(up);
}

}  // namespace

Tensor feed_forward(const Tensor& x, const FeedForwardWeights& w, MlpKind kind) {
  const Tensor up = named_linear("w_up", x, w.w_up, w.b_up);
  const Tensor hidden = kind == MlpKind::swiglu
                            ? swiglu(named_linear("w_gate", x, w.w_gate, w.b_gate), up)
                            : ungated(up, kind);
  return named_linear("w_down", hidden, w.w_down, w.b_down);
}

std::vector<Tensor> feed_forward_grouped(const std::vector<Tensor>& xs,
                                         const std::vector<FeedForwardWeights>& ws, MlpKind kind,
                                         const std::vector<std::string>& scopes) {
  const std::size_t n = xs.size();
  std::size_t groups = 0;
  for (const FeedForwardWeights& w : ws) groups += static_cast<std::size_t>(w.groups());
  MIXPREC_CHECK(groups == n && scopes.size() == n, "feed_forward_grouped",
                std::to_string(n) + " inputs need as many groups in the weight sets (got " +
                    std::to_string(groups) + ") and scopes (got " + std::to_string(scopes.size()) +
                    ")");
  // Up (and gate) projections of every group in one grouped pass: [gate..., up...] for SwiGLU.
  std::vector<Tensor> in;
  std::vector<GroupedWeight> up;
  std::vector<std::string> names;
  const bool gated = kind == MlpKind::swiglu;
  // Each projection under its weight's name, as feed_forward's: "experts.3.w_up".
  const auto named = [&](const char* weight) {
    std::vector<std::string> out;
    for (const std::string& s : scopes) out.push_back(s + "." + weight);
    return out;
  };
  for (int pass = gated ? 0 : 1; pass < 2; ++pass) {
    in.insert(in.end(), xs.begin(), xs.end());
    const std::vector<std::string> pass_names = named(pass == 0 ? "w_gate" : "w_up");
    names.insert(names.end(), pass_names.begin(), pass_names.end());
    for (const FeedForwardWeights& w : ws)
      up.push_back(pass == 0 ? GroupedWeight{w.w_gate, w.b_gate} : GroupedWeight{w.w_up, w.b_up});
  }
  const std::vector<Tensor> projected = grouped_linear(in, up, names);
  std::vector<Tensor> hidden(n);
  for (std::size_t g = 0; g < n; ++g) {
    const amp::ModuleScope scope(scopes[g]);
    hidden[g] = gated ? swiglu(projected[g], projected[n + g]) : ungated(projected[g], kind);
  }
  std::vector<GroupedWeight> down;
  for (const FeedForwardWeights& w : ws) down.push_back({w.w_down, w.b_down});
  return grouped_linear(hidden, down, named("w_down"));
}

}  // namespace mixprec::models
