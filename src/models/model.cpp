// What every model family shares (model.h).
#include "mixprec/models/model.h"

#include <algorithm>

namespace mixprec::models {

std::size_t ActivationEstimate::total() const {
  return batch + saved() + std::max(forward_transient, loss_backward_transient);
}

}  // namespace mixprec::models
