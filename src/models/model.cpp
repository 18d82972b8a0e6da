// What every model family shares (model.h).
#include "mixprec/models/model.h"

#include <algorithm>

#include "mixprec/core/error.h"

namespace mixprec::models {

Tensor Model::decode(const Tensor& /*tokens*/, DecodeState& /*state*/) {
  throw Error("Model::decode", "model.kind = " + config_.kind + " has no incremental decoding");
}

std::size_t ActivationEstimate::blocks_saved(int64_t n) const {
  std::size_t bytes = 0;
  for (int64_t l = 0; l < n; ++l) bytes += checkpointed(l) ? checkpointed_saved : block_saved;
  return bytes;
}

std::size_t ActivationEstimate::total() const {
  return batch + saved() +
         std::max({forward_transient, loss_backward_transient, recompute_transient()});
}

}  // namespace mixprec::models
