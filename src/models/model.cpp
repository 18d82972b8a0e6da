// What every model family shares (model.h).
#include "mixprec/models/model.h"

#include <algorithm>

#include "mixprec/core/error.h"

namespace mixprec::models {

const Tensor& LossParts::term(std::string_view name) const {
  std::string names;
  for (const auto& [n, t] : terms) {
    if (n == name) return t;
    names += (names.empty() ? "" : ", ") + n;
  }
  throw Error("LossParts::term", "no auxiliary loss '" + std::string(name) + "' (the family has " +
                                     (names.empty() ? "none" : names) + ")");
}

Tensor Model::decode(const Tensor& /*tokens*/, DecodeState& /*state*/) {
  throw Error("Model::decode", "model.kind = " + config_.kind + " has no incremental decoding");
}

std::size_t ActivationEstimate::blocks_saved(int64_t n) const {
  // Blocks k-1, 2k-1, ... are checkpointed: n / k of the first n. In closed form, as the
  // planner's walk asks for every prefix (quadratic in the blocks otherwise).
  const int64_t kept = checkpoint_every > 0 ? n / checkpoint_every : 0;
  return static_cast<std::size_t>(kept) * checkpointed_saved +
         static_cast<std::size_t>(n - kept) * block_saved;
}

std::size_t ActivationEstimate::total() const {
  return batch + saved() +
         std::max({forward_transient, loss_backward_transient, recompute_transient()});
}

}  // namespace mixprec::models
