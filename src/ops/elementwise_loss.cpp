// The losses made of one term per element (mse, l1, smooth_l1, kl_div, binary cross-entropy
// on logits and on probabilities): the terms from pair_op in f32 (f64 for f64), the
// reduction in the same dtype, one rounding at the end.
#include <cmath>
#include <string>

#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/backend/backend.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/loss.h"
#include "mixprec/ops/reduction.h"
#include "op_checks.h"
#include "pair_op.h"

namespace mixprec {
namespace {

using backend::PairFunction;
using backend::PairOp;
using detail::pair_op;

// weight·terms reduced, then rounded once into `dtype`. The parts are ops of their own, run
// on f32 terms: autocast would not change them.
Tensor reduce_terms(const char* op, Tensor terms, const Tensor& weight, Reduction reduction,
                    DType dtype, int64_t batch) {
  if (weight.defined()) {
    check_compute_input(op, weight);
    MIXPREC_CHECK(weight.ndim() <= terms.ndim() &&
                      broadcast_shapes(weight.shape(), terms.shape()) == terms.shape(),
                  op,
                  "weight of shape " + shape_to_string(weight.shape()) +
                      " does not broadcast to the loss's " + shape_to_string(terms.shape()));
    terms = mul(terms, weight.detach());
  }
  switch (reduction) {
    case Reduction::none:
      return terms.to(dtype);
    case Reduction::sum:
      return sum(terms).to(dtype);
    case Reduction::mean:
      return mean(terms).to(dtype);
    case Reduction::batchmean:  // sum / input.size(0), as torch's kl_div
      return div(sum(terms), Tensor::full({}, static_cast<double>(batch), terms.dtype())).to(dtype);
  }
  return terms;
}

Tensor elementwise_loss(const char* op, const PairFunction& f, const Tensor& x, const Tensor& t,
                        Reduction r, const Tensor& weight = {}, const Tensor& pos_weight = {},
                        bool same_shape = false) {
  const Tensor terms = pair_op(op, f, x, t, pos_weight, same_shape);
  return reduce_terms(op, terms, weight, r, promote(x.dtype(), t.dtype()),
                      x.ndim() == 0 ? 1 : x.size(0));
}

}  // namespace

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const auto [input, target] = amp::autocast_args("mse_loss", input_in, target_in);
  check_not_batchmean("mse_loss", reduction == Reduction::batchmean);
  return elementwise_loss("mse_loss", {PairOp::mse}, input, target, reduction);
}

Tensor l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const auto [input, target] = amp::autocast_args("l1_loss", input_in, target_in);
  check_not_batchmean("l1_loss", reduction == Reduction::batchmean);
  return elementwise_loss("l1_loss", {PairOp::l1}, input, target, reduction);
}

Tensor smooth_l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction,
                      double beta) {
  MIXPREC_CHECK(beta >= 0 && std::isfinite(beta), "smooth_l1_loss",
                "beta must be finite and >= 0, got " + std::to_string(beta));
  const auto [input, target] = amp::autocast_args("smooth_l1_loss", input_in, target_in);
  check_not_batchmean("smooth_l1_loss", reduction == Reduction::batchmean);
  return elementwise_loss("smooth_l1_loss", {PairOp::smooth_l1, beta}, input, target, reduction);
}

Tensor kl_div(const Tensor& input_in, const Tensor& target_in, Reduction reduction,
              bool log_target) {
  const auto [input, target] = amp::autocast_args("kl_div", input_in, target_in);
  const PairOp term = log_target ? PairOp::kl_div_log_target : PairOp::kl_div;
  return elementwise_loss("kl_div", {term}, input, target, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input_in, const Tensor& target_in,
                                        const Tensor& weight_in, const Tensor& pos_weight_in,
                                        Reduction reduction) {
  const auto [input, target, weight, pos_weight] = amp::autocast_args(
      "binary_cross_entropy_with_logits", input_in, target_in, weight_in, pos_weight_in);
  const char* op = "binary_cross_entropy_with_logits";
  check_not_batchmean(op, reduction == Reduction::batchmean);
  return elementwise_loss(op, {PairOp::bce_logits}, input, target, reduction, weight, pos_weight,
                          /*same_shape=*/true);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            Reduction reduction) {
  const char* op = "binary_cross_entropy";
  MIXPREC_CHECK(!amp::autocast_enabled(), op,
                "is unsafe to autocast: the log of a probability rounded to bf16/f16 loses what "
                "the loss measures. Use binary_cross_entropy_with_logits on the logits (the "
                "sigmoid and the loss in one stable op), or leave autocast around this loss");
  check_not_batchmean(op, reduction == Reduction::batchmean);
  check_compute_input(op, input);
  for (double p : input.detach().to_doubles())
    MIXPREC_CHECK(p >= 0 && p <= 1, op,
                  "all elements of input should be between 0 and 1, found " + std::to_string(p));
  return elementwise_loss(op, {PairOp::bce}, input, target, reduction, weight, {},
                          /*same_shape=*/true);
}

}  // namespace mixprec
