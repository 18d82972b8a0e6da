// sum / mean / max / norm over all elements or one dim, with their backward rules.
#include "mixprec/ops/reduction.h"

#include <algorithm>
#include "mixprec/amp/autocast.h"

#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"
#include "op_checks.h"
#include "reduce_plan.h"

namespace mixprec {
namespace {

using detail::Plan;
using detail::plan_all;
using detail::plan_dim;

// sum and mean: the gradient broadcast back over the reduced dim (divided by n for mean).
class ReduceBackward final : public Node {
 public:
  ReduceBackward(backend::ReduceGeometry g, bool mean, Shape x_shape, DType dtype)
      : g_(g), mean_(mean), x_shape_(std::move(x_shape)), dtype_(dtype) {}
  const char* name() const override { return mean_ ? "MeanBackward" : "SumBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {backend::current().reduce_expand_backward(grads[0], g_, mean_, dtype_).view(x_shape_)};
  }

 private:
  backend::ReduceGeometry g_;
  bool mean_;
  Shape x_shape_;
  DType dtype_;
};

// d|x|/dx = x / |x|, and 0 where |x| == 0 (PyTorch's choice of subgradient).
class NormBackward final : public Node {
 public:
  NormBackward(Tensor x, Tensor norm, backend::ReduceGeometry g, Shape x_shape)
      : x_(std::move(x)), norm_(std::move(norm)), g_(g), x_shape_(std::move(x_shape)) {}
  const char* name() const override { return "NormBackward"; }
  void release_saved() override { x_ = norm_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {backend::current().l2_norm_backward(grads[0], x_, norm_, g_).view(x_shape_)};
  }

 private:
  Tensor x_;     // contiguous input
  Tensor norm_;  // [outer, inner], unrounded f32 (f64 for f64)
  backend::ReduceGeometry g_;
  Shape x_shape_;
};

// The gradient goes to the selected (first maximal) element only.
class MaxBackward final : public Node {
 public:
  MaxBackward(Tensor indices, backend::ReduceGeometry g, Shape x_shape, DType dtype)
      : indices_(std::move(indices)), g_(g), x_shape_(std::move(x_shape)), dtype_(dtype) {}
  const char* name() const override { return "MaxBackward"; }
  void release_saved() override { indices_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {backend::current().max_backward(grads[0], indices_, g_, dtype_).view(x_shape_)};
  }

 private:
  Tensor indices_;  // i64 [outer, inner]
  backend::ReduceGeometry g_;
  Shape x_shape_;
  DType dtype_;
};

Tensor reduce(const Tensor& x, const Plan& p, backend::ReduceOp op) {
  const Tensor xc = x.detach().contiguous();
  const Tensor acc = backend::current().reduce_dim(xc, p.g, op);  // [outer, inner], unrounded
  Tensor y = acc.to(x.dtype()).view(p.out_shape);                 // rounded once
  if (any_requires_grad({&x})) {
    std::shared_ptr<Node> node;
    if (op == backend::ReduceOp::norm)  // saves its own copy: y may share acc's storage
      node = std::make_shared<NormBackward>(xc, acc.dtype() == y.dtype() ? acc.clone() : acc, p.g,
                                            x.shape());
    else
      node = std::make_shared<ReduceBackward>(p.g, op == backend::ReduceOp::mean, x.shape(),
                                              x.dtype());
    connect(*node, {x});
    set_history(y, node);
  }
  return y;
}

// torch.sum of a bool or integer tensor: an i64 result, summed exactly (wrapping on overflow
// as PyTorch's int64 sum does). No gradient: integers have none.
Tensor integer_sum(const Tensor& x, const Plan& p) {
  MIXPREC_CHECK(!x.is_meta(), "sum", "meta tensors have no data");
  const Tensor wide = x.detach().to(DType::i64).contiguous();
  const int64_t* in = wide.data<int64_t>();
  std::vector<int64_t> out(static_cast<std::size_t>(p.g.outer * p.g.inner), 0);
  for (int64_t o = 0; o < p.g.outer; ++o)
    for (int64_t k = 0; k < p.g.n; ++k)
      for (int64_t i = 0; i < p.g.inner; ++i) {
        auto& acc = out[static_cast<std::size_t>(o * p.g.inner + i)];
        acc = static_cast<int64_t>(static_cast<uint64_t>(acc) +
                                   static_cast<uint64_t>(in[(o * p.g.n + k) * p.g.inner + i]));
      }
  return Tensor::from_vector(out, p.out_shape);
}

std::pair<Tensor, Tensor> max_impl(const Tensor& x, const Plan& p) {
  MIXPREC_CHECK(
      p.g.n > 0, "max",
      "cannot take the max over an empty dim (input shape " + shape_to_string(x.shape()) + ")");
  auto [values, indices] = backend::current().max_dim(x.detach().contiguous(), p.g);
  values = values.view(p.out_shape);
  if (any_requires_grad({&x})) {
    // A private copy: the caller may overwrite the returned indices before backward.
    auto node = std::make_shared<MaxBackward>(indices.clone(), p.g, x.shape(), x.dtype());
    connect(*node, {x});
    set_history(values, node);
  }
  return {values, indices.view(p.out_shape)};
}

}  // namespace

Tensor sum(const Tensor& x_in) {
  const auto [x] = amp::autocast_args("sum", x_in);
  if (x.defined() && !is_floating(x.dtype())) return integer_sum(x, plan_all(x));
  check_compute_input("sum", x);
  return reduce(x, plan_all(x), backend::ReduceOp::sum);
}
Tensor sum(const Tensor& x_in, int64_t dim, bool keepdim) {
  const auto [x] = amp::autocast_args("sum", x_in);
  if (x.defined() && !is_floating(x.dtype()))
    return integer_sum(x, plan_dim(x, dim, keepdim, "sum"));
  check_compute_input("sum", x);
  return reduce(x, plan_dim(x, dim, keepdim, "sum"), backend::ReduceOp::sum);
}
Tensor mean(const Tensor& x_in) {
  const auto [x] = amp::autocast_args("mean", x_in);
  check_compute_input("mean", x);
  return reduce(x, plan_all(x), backend::ReduceOp::mean);
}
Tensor mean(const Tensor& x_in, int64_t dim, bool keepdim) {
  const auto [x] = amp::autocast_args("mean", x_in);
  check_compute_input("mean", x);
  return reduce(x, plan_dim(x, dim, keepdim, "mean"), backend::ReduceOp::mean);
}
Tensor norm(const Tensor& x_in) {
  const auto [x] = amp::autocast_args("norm", x_in);
  check_compute_input("norm", x);
  return reduce(x, plan_all(x), backend::ReduceOp::norm);
}
Tensor norm(const Tensor& x_in, int64_t dim, bool keepdim) {
  const auto [x] = amp::autocast_args("norm", x_in);
  check_compute_input("norm", x);
  return reduce(x, plan_dim(x, dim, keepdim, "norm"), backend::ReduceOp::norm);
}

Tensor max(const Tensor& x_in) {
  const auto [x] = amp::autocast_args("max", x_in);
  check_compute_input("max", x);
  return max_impl(x, plan_all(x)).first;
}
std::pair<Tensor, Tensor> max(const Tensor& x_in, int64_t dim, bool keepdim) {
  const auto [x] = amp::autocast_args("max", x_in);
  check_compute_input("max", x);
  return max_impl(x, plan_dim(x, dim, keepdim, "max"));
}

}  // namespace mixprec
