// Losses, as torch.nn.functional spells them. cross_entropy is fused (log-softmax, pick and
// mean in one pass); the others form their elementwise terms in f32 (f64 for f64) and reduce
// them there, rounding once into the result's dtype (promote(input, target)). Under autocast
// all of them run in f32 (their rows in amp/autocast_table.h), and binary_cross_entropy on
// probabilities is refused, as in PyTorch: its logits form is the stable one.
#pragma once

#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// PyTorch's reduction= argument. batchmean (sum / input.size(0)) is kl_div's alone.
enum class Reduction { none, mean, sum, batchmean };

// logits [N, V] (any float dtype), targets i32/i64 [N]; mean over rows whose target is not
// ignore_index of -log_softmax(logits)[n, target[n]]. Result: f32 scalar (f64 for f64 logits);
// 0/0 = NaN when every target is ignored, as in PyTorch. Targets outside [0, V) are errors.
// The logits gradient, (softmax - onehot) * grad_out / n_valid on kept rows and 0 on ignored
// ones, has the logits' dtype.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

// mean of (input - target)²; input and target broadcast (PyTorch warns and does the same).
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
// mean of |input - target|; the gradient at input == target is 0.
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
// Huber-like: 0.5·d²/beta where |d| < beta, |d| - 0.5·beta elsewhere (beta >= 0; 0 is l1).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      Reduction reduction = Reduction::mean, double beta = 1.0);
// input log-probabilities, target probabilities (log-probabilities with log_target):
// t·(log t - input), 0 where t == 0. mean divides by every element (PyTorch's default, which
// it warns about); batchmean by input.size(0), the KL divergence proper.
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean,
              bool log_target = false);
// The logistic loss on logits, stable at any magnitude: weight scales each element and
// pos_weight the positive term (broadcast along the last dim); neither gets a gradient.
// input and target have one shape.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = {}, const Tensor& pos_weight = {},
                                        Reduction reduction = Reduction::mean);
// The same on probabilities in [0, 1] (each log clamped at -100). Refused under autocast.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            Reduction reduction = Reduction::mean);
// input log-probabilities [N, C], [C] or [N, C, d...]; target i64/i32 class indices [N], []
// or [N, d...]. Loss -weight[t]·input[n, t]; ignore_index rows count 0; mean divides by the
// summed weight of the kept targets (NaN when none is kept, as PyTorch).
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                int64_t ignore_index = -100, Reduction reduction = Reduction::mean);
// Σ x1·x2 / (max(‖x1‖, eps)·max(‖x2‖, eps)) along dim, x1 and x2 broadcast. Each norm is
// floored on its own, as PyTorch 1.13 does (its docs' max(‖x1‖·‖x2‖, eps) is older code);
// the floor is outside the gradient, as there.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);

}  // namespace mixprec
