// nll_loss as PyTorch defines it, built from gather (the picked log-probabilities of the kept
// rows), a product with their weights and a sum, all in f32 (f64 for f64): its gradient is
// gather's, -weight[t]·g at each target and 0 elsewhere.
#include <cmath>
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/indexing.h"
#include "mixprec/ops/loss.h"
#include "mixprec/ops/reduction.h"
#include "op_checks.h"

namespace mixprec {

Tensor nll_loss(const Tensor& input_in, const Tensor& target, const Tensor& weight_in,
                int64_t ignore_index, Reduction reduction) {
  const char* op = "nll_loss";
  const auto [input, weight] = amp::autocast_args("nll_loss", input_in, weight_in);
  check_compute_input(op, input);
  check_not_batchmean(op, reduction == Reduction::batchmean);
  MIXPREC_CHECK(target.defined() && (target.dtype() == DType::i64 || target.dtype() == DType::i32),
                op, "target must be an i64 or i32 tensor of class indices");
  MIXPREC_CHECK(input.ndim() >= 1, op, "input must have a class dim, got a 0-d tensor");
  // [rows, C] with the class dim last; the target as one index per row.
  const int64_t classes = input.ndim() == 1 ? input.size(0) : input.size(1);
  Shape want_target = input.shape();
  want_target.erase(want_target.begin() + (input.ndim() == 1 ? 0 : 1));
  MIXPREC_CHECK(target.shape() == want_target, op,
                "target shape " + shape_to_string(target.shape()) + " does not fit input shape " +
                    shape_to_string(input.shape()) + " (expected " + shape_to_string(want_target) +
                    ")");
  Tensor rows = input;
  if (input.ndim() > 2) {
    std::vector<int64_t> perm{0};
    for (int64_t d = 2; d < input.ndim(); ++d) perm.push_back(d);
    perm.push_back(1);
    rows = input.permute(perm);
  }
  rows = rows.reshape({-1, classes});
  const int64_t n = rows.size(0);
  if (weight.defined()) {
    check_compute_input(op, weight);
    MIXPREC_CHECK(weight.ndim() == 1 && weight.size(0) == classes, op,
                  "weight must have one element per class (" + std::to_string(classes) + "), got " +
                      shape_to_string(weight.shape()));
  }
  const std::vector<double> t = target.to_doubles();
  const std::vector<double> w = weight.defined() ? weight.to_doubles() : std::vector<double>();
  // The kept rows only: an ignored row contributes nothing, not 0·x (x may be -inf there).
  std::vector<double> kept_row, flat_index, kept_weight;
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto c = static_cast<int64_t>(t[static_cast<size_t>(i)]);
    if (c == ignore_index) continue;
    MIXPREC_CHECK(c >= 0 && c < classes, op,
                  "target " + std::to_string(c) + " at position " + std::to_string(i) +
                      " is out of bounds for " + std::to_string(classes) + " classes");
    kept_row.push_back(static_cast<double>(i));
    flat_index.push_back(static_cast<double>(i * classes + c));
    kept_weight.push_back(w.empty() ? 1.0 : w[static_cast<size_t>(c)]);
    total += kept_weight.back();
  }
  const auto kept = static_cast<int64_t>(kept_row.size());
  const DType acc = input.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const Tensor picked =
      gather(rows.reshape({n * classes}), 0, Tensor::from_doubles(flat_index, {kept}, DType::i64));
  // w·x per kept row (the weights are exact in acc: f32/bf16/f16/f64 values).
  const Tensor terms = mul(picked, Tensor::from_doubles(kept_weight, {kept}, acc));
  switch (reduction) {
    case Reduction::none: {
      const Tensor rows_out = scatter_add(
          Tensor::zeros({n}, acc), 0, Tensor::from_doubles(kept_row, {kept}, DType::i64), terms);
      return scale(rows_out, -1.0).view(target.shape()).to(input.dtype());
    }
    case Reduction::sum:
      return scale(sum(terms), -1.0).to(input.dtype());
    case Reduction::mean:
    case Reduction::batchmean:
      break;
  }
  if (kept == 0)  // 0/0 as PyTorch: NaN, with a zero gradient (not NaN) to the input
    return add(scale(sum(terms), 0.0), Tensor::full({}, NAN, acc)).to(input.dtype());
  return div(scale(sum(terms), -1.0), Tensor::full({}, total, acc)).to(input.dtype());
}

}  // namespace mixprec
