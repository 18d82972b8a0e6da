// softmax / log_softmax along any dim. The last dim is the fast path; another dim is moved
// last (one transposed copy in, one out) and the same kernel runs. Backward recomputes the
// probabilities from the saved input and per-row statistics (backend.h).
#include "mixprec/ops/softmax.h"
#include "op_checks.h"

#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"

namespace mixprec {
namespace {

const char* op_name(bool log) {
  return log ? "log_softmax" : "softmax";
}

// x with `dim` moved last, contiguous (x itself when dim is already last and x contiguous).
Tensor dim_last(const Tensor& x, int64_t dim) {
  const int64_t last = x.ndim() - 1;
  return (dim == last ? x : x.transpose(dim, last)).contiguous();
}

// The inverse of dim_last, as a new contiguous tensor.
Tensor dim_back(const Tensor& t, int64_t dim) {
  const int64_t last = t.ndim() - 1;
  return dim == last ? t : t.transpose(dim, last).contiguous();
}

class SoftmaxBackward final : public Node {
 public:
  SoftmaxBackward(Tensor x, backend::SoftmaxStats stats, int64_t dim, bool log)
      : x_(std::move(x)), stats_(std::move(stats)), dim_(dim), log_(log) {}
  const char* name() const override { return log_ ? "LogSoftmaxBackward" : "SoftmaxBackward"; }
  void release_saved() override { x_ = stats_.max = stats_.log_sum = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    const Tensor dx =
        backend::current().softmax_backward(x_, stats_, dim_last(grads[0], dim_), log_);
    return {dim_back(dx, dim_)};
  }

 private:
  Tensor x_;  // the input with dim moved last, contiguous (as the forward kernel saw it)
  backend::SoftmaxStats stats_;
  int64_t dim_;
  bool log_;
};

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log) {
  const char* op = op_name(log);
  check_compute_input(op, x);
  // A 0-d tensor is one row of one element (dim -1 or 0, as in PyTorch).
  if (x.ndim() == 0) {
    MIXPREC_CHECK(dim == 0 || dim == -1, op,
                  "dim " + std::to_string(dim) + " is out of range for a 0-d tensor");
    return softmax_impl(x.reshape({1}), 0, log).reshape({});
  }
  const int64_t nd = x.ndim();
  MIXPREC_CHECK(
      dim >= -nd && dim < nd, op,
      "dim " + std::to_string(dim) + " is out of range for shape " + shape_to_string(x.shape()));
  if (dim < 0) dim += nd;
  const Tensor xt = dim_last(x.detach(), dim);
  const bool grad = any_requires_grad({&x});
  backend::SoftmaxStats stats;
  Tensor y = dim_back(backend::current().softmax(xt, log, grad ? &stats : nullptr), dim);
  if (grad) {
    auto node = std::make_shared<SoftmaxBackward>(xt, std::move(stats), dim, log);
    connect(*node, {x});
    set_history(y, node);
  }
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x_in, int64_t dim) {
  const auto [x] = amp::autocast_args("softmax", x_in);
  return softmax_impl(x, dim, false);
}

Tensor log_softmax(const Tensor& x_in, int64_t dim) {
  const auto [x] = amp::autocast_args("log_softmax", x_in);
  return softmax_impl(x, dim, true);
}

}  // namespace mixprec
