#include "mixprec/models/feed_forward.h"

#include <string>

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

}  // namespace mixprec::models
