// Numerically stable softmax and log-softmax along one dim (max subtracted, f32 math).
#pragma once

#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

}  // namespace mixprec
