// prod, cumsum, logsumexp and the p-norms: one autograd node over the backend's line kernels,
// which saves the input and the unrounded result.
#include <cmath>
#include <limits>
#include <string>

#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"
#include "mixprec/ops/reduction.h"
#include "op_checks.h"
#include "reduce_plan.h"

namespace mixprec {
namespace {

using backend::LineFunction;
using backend::LineOp;
using detail::Plan;

class LineBackward final : public Node {
 public:
  LineBackward(LineFunction f, Tensor x, Tensor result, backend::ReduceGeometry g, Shape x_shape,
               DType dtype)
      : f_(f),
        x_(std::move(x)),
        result_(std::move(result)),
        g_(g),
        x_shape_(std::move(x_shape)),
        dtype_(dtype) {}
  const char* name() const override {
    return backend::kLineBackwardNames[static_cast<std::size_t>(f_.op)];
  }
  void release_saved() override { x_ = result_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    const Shape grad_shape =
        f_.op == LineOp::cumsum ? Shape{g_.outer, g_.n, g_.inner} : Shape{g_.outer, g_.inner};
    const Tensor grad = grads[0].contiguous().view(grad_shape);
    return {backend::current().line_backward(f_, x_, result_, grad, g_, dtype_).view(x_shape_)};
  }

 private:
  LineFunction f_;
  Tensor x_;       // contiguous input
  Tensor result_;  // [outer, inner], unrounded (undefined for cumsum)
  backend::ReduceGeometry g_;
  Shape x_shape_;
  DType dtype_;
};

Tensor run_line(const LineFunction& f, const Tensor& x, const Plan& p) {
  const Tensor xc = x.detach().contiguous();
  const Tensor acc = backend::current().line_forward(f, xc, p.g);
  Tensor y = acc.to(x.dtype()).view(p.out_shape);  // rounded once
  if (any_requires_grad({&x})) {
    const bool keep = f.op != LineOp::cumsum;
    // A private copy when y shares acc's storage (an f32 input): the caller may write to y.
    const Tensor saved = !keep ? Tensor() : (acc.raw_data() == y.raw_data() ? acc.clone() : acc);
    auto node = std::make_shared<LineBackward>(f, xc, saved, p.g, x.shape(), x.dtype());
    connect(*node, {x});
    set_history(y, node);
  }
  return y;
}

LineFunction norm_function(double p, const Tensor& x, const Plan& plan) {
  MIXPREC_CHECK(p >= 1 || p == std::numeric_limits<double>::infinity(), "norm",
                "p must be a finite number >= 1 or inf, got " + std::to_string(p));
  if (std::isinf(p)) {
    MIXPREC_CHECK(plan.g.n > 0 || x.numel() > 0, "norm",
                  "cannot compute the inf norm of an empty tensor (shape " +
                      shape_to_string(x.shape()) + ")");
    MIXPREC_CHECK(
        plan.g.n > 0, "norm",
        "cannot compute the inf norm over an empty dim (shape " + shape_to_string(x.shape()) + ")");
    return {LineOp::inf_norm};
  }
  return {LineOp::pnorm, p};
}

}  // namespace

Tensor vector_norm(const Tensor& x_in, double p) {
  if (p == 2) return norm(x_in);
  const auto [x] = amp::autocast_args("norm", x_in);
  check_compute_input("norm", x);
  const Plan plan = detail::plan_all(x);
  return run_line(norm_function(p, x, plan), x, plan);
}
Tensor vector_norm(const Tensor& x_in, double p, int64_t dim, bool keepdim) {
  if (p == 2) return norm(x_in, dim, keepdim);
  const auto [x] = amp::autocast_args("norm", x_in);
  check_compute_input("norm", x);
  const Plan plan = detail::plan_dim(x, dim, keepdim, "norm");
  return run_line(norm_function(p, x, plan), x, plan);
}

Tensor prod(const Tensor& x_in) {
  const auto [x] = amp::autocast_args("prod", x_in);
  check_compute_input("prod", x);
  return run_line({LineOp::prod}, x, detail::plan_all(x));
}
Tensor prod(const Tensor& x_in, int64_t dim, bool keepdim) {
  const auto [x] = amp::autocast_args("prod", x_in);
  check_compute_input("prod", x);
  return run_line({LineOp::prod}, x, detail::plan_dim(x, dim, keepdim, "prod"));
}

Tensor cumsum(const Tensor& x_in, int64_t dim) {
  const auto [x] = amp::autocast_args("cumsum", x_in);
  check_compute_input("cumsum", x);
  Plan plan = detail::plan_dim(x, dim, /*keepdim=*/true, "cumsum");
  plan.out_shape = x.shape();
  return run_line({LineOp::cumsum}, x, plan);
}

Tensor logsumexp(const Tensor& x_in, int64_t dim, bool keepdim) {
  const auto [x] = amp::autocast_args("logsumexp", x_in);
  check_compute_input("logsumexp", x);
  return run_line({LineOp::logsumexp}, x, detail::plan_dim(x, dim, keepdim, "logsumexp"));
}

}  // namespace mixprec
