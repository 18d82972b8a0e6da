// The length of a tensor's last dim, 1 for a scalar: the rows softmax and the norms work on.
#pragma once

#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

inline int64_t last_dim(const Tensor& x) {
  return x.ndim() == 0 ? 1 : x.size(-1);
}

}  // namespace mixprec::cpu
