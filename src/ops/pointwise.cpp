// exp, log, ..., softplus, pow: one autograd node over the backend's pointwise kernels, which
// saves the input (the backward recomputes f'(x) from it).
#include "mixprec/ops/pointwise.h"

#include <cmath>
#include <string>

#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"
#include "mixprec/core/error.h"
#include "pair_op.h"

namespace mixprec {
namespace {

using backend::Pointwise;
using backend::PointwiseOp;

class PointwiseBackward final : public Node {
 public:
  PointwiseBackward(const Pointwise& f, Tensor x) : f_(f), x_(std::move(x)) {}
  const char* name() const override {
    return backend::kPointwiseNames[static_cast<std::size_t>(f_.op)].backward;
  }
  void release_saved() override { x_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {backend::current().pointwise_backward(f_, x_, grads[0])};
  }

 private:
  Pointwise f_;
  Tensor x_;  // detached input
};

Tensor pointwise(const Pointwise& f, const Tensor& x) {
  const char* name = backend::pointwise_name(f.op);
  backend::check_floating(name, x, "input");
  backend::check_compute_dtype(name, x.dtype());
  const Tensor xd = x.detach();
  Tensor y = backend::current().pointwise_forward(f, xd);
  if (any_requires_grad({&x})) {
    auto node = std::make_shared<PointwiseBackward>(f, xd);
    connect(*node, {x});
    set_history(y, node);
  }
  return y;
}

// The op under its own autocast row, named by the same table as its kernel.
template <PointwiseOp Op>
Tensor cast_and_run(const Tensor& x_in, Pointwise f = {Op}) {
  static constexpr amp::AutocastOpId kRow{backend::pointwise_name(Op)};
  const auto [x] = amp::autocast_args(kRow, x_in);
  return pointwise(f, x);
}

}  // namespace

Tensor exp(const Tensor& x_in) {
  return cast_and_run<PointwiseOp::exp>(x_in);
}
Tensor log(const Tensor& x_in) {
  return cast_and_run<PointwiseOp::log>(x_in);
}
Tensor log1p(const Tensor& x_in) {
  return cast_and_run<PointwiseOp::log1p>(x_in);
}
Tensor expm1(const Tensor& x_in) {
  return cast_and_run<PointwiseOp::expm1>(x_in);
}
Tensor sqrt(const Tensor& x_in) {
  return cast_and_run<PointwiseOp::sqrt>(x_in);
}
Tensor rsqrt(const Tensor& x_in) {
  return cast_and_run<PointwiseOp::rsqrt>(x_in);
}
Tensor reciprocal(const Tensor& x_in) {
  return cast_and_run<PointwiseOp::reciprocal>(x_in);
}
Tensor tanh(const Tensor& x_in) {
  return cast_and_run<PointwiseOp::tanh>(x_in);
}
Tensor softplus(const Tensor& x_in, double beta, double threshold) {
  MIXPREC_CHECK(beta != 0 && std::isfinite(beta) && !std::isnan(threshold), "softplus",
                "beta must be finite and non-zero and threshold a number, got beta " +
                    std::to_string(beta) + ", threshold " + std::to_string(threshold));
  Pointwise f{PointwiseOp::softplus};
  f.beta = beta;
  f.threshold = threshold;
  return cast_and_run<PointwiseOp::softplus>(x_in, f);
}
Tensor pow(const Tensor& x_in, double exponent) {
  MIXPREC_CHECK(!std::isnan(exponent), "pow", "the exponent is NaN");
  Pointwise f{PointwiseOp::pow};
  f.exponent = exponent;
  return cast_and_run<PointwiseOp::pow>(x_in, f);
}

Tensor pow(const Tensor& x_in, const Tensor& exponent_in) {
  const auto [x, exponent] = amp::autocast_args("pow", x_in, exponent_in);
  backend::check_floating("pow", x, "input");
  backend::check_floating("pow", exponent, "exponent");
  return detail::pair_op("pow", {backend::PairOp::pow}, x, exponent, Tensor(), false)
      .to(promote(x.dtype(), exponent.dtype()));
}

}  // namespace mixprec
