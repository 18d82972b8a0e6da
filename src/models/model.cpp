// What every model family shares (model.h).
#include "mixprec/models/model.h"

#include <algorithm>

#include "mixprec/core/error.h"

namespace mixprec::models {

Tensor Model::decode(const Tensor& /*tokens*/, DecodeState& /*state*/) {
  throw Error("Model::decode", "model.kind = " + config_.kind + " has no incremental decoding");
}

std::size_t ActivationEstimate::total() const {
  return batch + saved() + std::max(forward_transient, loss_backward_transient);
}

}  // namespace mixprec::models
