// Fused cross-entropy from logits: log-softmax, pick and mean in one pass, f32 internally.
#pragma once

#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// logits [N, V] (any float dtype), targets i32/i64 [N]; mean over rows whose target is not
// ignore_index of -log_softmax(logits)[n, target[n]]. Result: f32 scalar (f64 for f64 logits);
// 0/0 = NaN when every target is ignored, as in PyTorch. Targets outside [0, V) are errors.
// The logits gradient, (softmax - onehot) * grad_out / n_valid on kept rows and 0 on ignored
// ones, has the logits' dtype.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

}  // namespace mixprec
