// Gradient clipping: by global norm (torch.nn.utils.clip_grad_norm_ semantics, L2 only) and by
// value (torch.nn.utils.clip_grad_value_, Keras's clipvalue, tf.clip_by_value). The norm of all
// gradients together is accumulated in f64 over fixed chunks added in a fixed order, so it does
// not depend on the thread count; gradients may be f32, bf16 or f16.
#pragma once

#include "mixprec/optim/parameter.h"

namespace mixprec::optim {

// sqrt(sum over every gradient element of (g * inv_scale)^2); parameters without a gradient
// are skipped. inf or NaN when a gradient holds one (or the sum overflows f64).
double grad_norm(const ParamList& params, float inv_scale = 1.0f);

// The factor clipping applies: max_norm / (total_norm + 1e-6) when that is below 1, else 1
// (PyTorch's epsilon). A trainer may fold it into the optimizer's inv_scale instead of
// rewriting the gradients.
float clip_coefficient(double total_norm, double max_norm);

// Computes the global norm and, when it is finite and above max_norm, multiplies every
// gradient in place by clip_coefficient (computed in f32, rounded once to the gradient's
// dtype). Returns the norm before clipping; a non-finite norm is returned with the gradients
// untouched (the step is to be skipped). max_norm must be > 0.
double clip_grad_norm(const ParamList& params, double max_norm);
// The scaling half of clip_grad_norm, for a caller that already has the gradients' global norm
// (the trainer's numerics monitor reads every gradient anyway): one pass fewer. Returns `norm`.
double clip_grads_to_norm(const ParamList& params, double norm, double max_norm);

// Clamps every gradient element into [-clip_value, clip_value] in place (the bound rounded
// once into the gradient's dtype). As torch.clamp, NaN stays NaN but ±inf become ±clip_value:
// clip unscaled gradients after the non-finite test (GradScaler::unscale() records it, and
// step() then skips), never before, or an overflow turns into a finite step. clip_value must
// be finite and > 0.
void clip_grad_value(const ParamList& params, double clip_value);

}  // namespace mixprec::optim
