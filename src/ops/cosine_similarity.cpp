// cosine_similarity as PyTorch 1.13 computes it: each input divided by its own norm (floored
// at eps outside the gradient), then the sum of products along dim, all in f32 (f64 for f64).
#include <string>

#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/loss.h"
#include "mixprec/ops/pointwise.h"
#include "mixprec/ops/reduction.h"
#include "op_checks.h"

namespace mixprec {
namespace {

// Passes the gradient through unchanged: the floor is applied in place, outside autograd.
class FloorBackward final : public Node {
 public:
  const char* name() const override { return "ClampMinBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override { return {grads[0]}; }
};

// max(s, floor) on the values, the identity for the gradient (s contiguous f32 or f64).
Tensor floor_outside_gradient(const Tensor& s, double floor) {
  Tensor out = s.detach().clone();
  if (out.dtype() == DType::f64) {
    double* v = out.data<double>();
    for (int64_t i = 0; i < out.numel(); ++i) v[i] = std::max(v[i], floor);
  } else {
    float* v = out.data<float>();
    for (int64_t i = 0; i < out.numel(); ++i) v[i] = std::max(v[i], static_cast<float>(floor));
  }
  if (any_requires_grad({&s})) {
    auto node = std::make_shared<FloorBackward>();
    connect(*node, {s});
    set_history(out, node);
  }
  return out;
}

}  // namespace

Tensor cosine_similarity(const Tensor& x1_in, const Tensor& x2_in, int64_t dim, double eps) {
  const char* op = "cosine_similarity";
  const auto [x1, x2] = amp::autocast_args("cosine_similarity", x1_in, x2_in);
  check_compute_input(op, x1);
  check_compute_input(op, x2);
  MIXPREC_CHECK(eps >= 0, op, "eps must be >= 0, got " + std::to_string(eps));
  const Shape shape = broadcast_shapes(x1.shape(), x2.shape());
  const DType out_dtype = promote(x1.dtype(), x2.dtype());
  const DType acc = out_dtype == DType::f64 ? DType::f64 : DType::f32;
  // Widened before the broadcast: a broadcast input's gradient is summed in acc, rounded once.
  const Tensor a = broadcast_to(x1.to(acc), shape), b = broadcast_to(x2.to(acc), shape);
  const amp::AutocastGuard inner(DType::bf16, /*enabled=*/false);  // f32 already, as cast
  const Tensor na = sqrt(floor_outside_gradient(sum(mul(a, a), dim, true), eps * eps));
  const Tensor nb = sqrt(floor_outside_gradient(sum(mul(b, b), dim, true), eps * eps));
  return sum(mul(div(a, na), div(b, nb)), dim).to(out_dtype);
}

}  // namespace mixprec
