// Installs autograd's recording of Tensor views, copies and casts into the tensor layer
// (tensor/history_hooks.h). Called wherever a tensor starts to carry history; cheap after the
// first call.
#pragma once

namespace mixprec::detail {

void ensure_history_hooks();

}  // namespace mixprec::detail
