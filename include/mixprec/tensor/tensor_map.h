// Named tensors: a checkpoint's entries, an optimizer's or a scaler's state. One type for all
// of them, so state moves between optim, amp and io without conversion.
#pragma once

#include <map>
#include <string>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

using TensorMap = std::map<std::string, Tensor>;

}  // namespace mixprec
