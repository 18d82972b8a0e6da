// One autograd node over the backend's two-tensor pointwise kernels: it saves both operands
// (broadcast) and asks the backend for both partial derivatives at once.
#include "pair_op.h"

#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"
#include "mixprec/ops/elementwise.h"
#include "op_checks.h"

namespace mixprec::detail {
namespace {

using backend::PairFunction;
using backend::PairOp;

class PairBackward final : public Node {
 public:
  PairBackward(PairFunction f, Tensor x, Tensor t, Tensor pos_weight, const Tensor& x_in,
               const Tensor& t_in)
      : f_(f),
        x_(std::move(x)),
        t_(std::move(t)),
        pos_weight_(std::move(pos_weight)),
        x_shape_(x_in.shape()),
        t_shape_(t_in.shape()),
        x_dtype_(x_in.dtype()),
        t_dtype_(t_in.dtype()) {}
  const char* name() const override {
    return backend::kPairBackwardNames[static_cast<std::size_t>(f_.op)];
  }
  void release_saved() override { x_ = t_ = pos_weight_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor(), Tensor()};
    const auto& edges = next_edges();
    const backend::Backend& be = backend::current();
    auto [gx, gt] = be.pair_backward(f_, x_, t_, pos_weight_, grads[0].contiguous(),
                                     edges[0].node != nullptr, edges[1].node != nullptr);
    // Summed in the dtype the gradient came in (f64 when either input is), rounded once.
    if (gx.defined()) gx = be.reduce_to_shape(gx, x_shape_, std::nullopt).to(x_dtype_);
    if (gt.defined()) gt = be.reduce_to_shape(gt, t_shape_, std::nullopt).to(t_dtype_);
    return {gx, gt};
  }

 private:
  PairFunction f_;
  Tensor x_, t_, pos_weight_;  // broadcast to one shape, contiguous
  Shape x_shape_, t_shape_;
  DType x_dtype_, t_dtype_;
};

}  // namespace

Tensor pair_op(const char* op, const PairFunction& f, const Tensor& x, const Tensor& t,
               const Tensor& pos_weight, bool same_shape) {
  check_compute_input(op, x);
  check_compute_input(op, t);
  if (same_shape)
    MIXPREC_CHECK(x.shape() == t.shape(), op,
                  "target size " + shape_to_string(t.shape()) + " must be the same as input size " +
                      shape_to_string(x.shape()));
  const Shape shape = broadcast_shapes(x.shape(), t.shape());
  const Tensor xb = broadcast_to(x.detach(), shape).contiguous();
  const Tensor tb = broadcast_to(t.detach(), shape).contiguous();
  Tensor pw;
  if (pos_weight.defined()) {
    check_compute_input(op, pos_weight);
    pw = broadcast_to(pos_weight.detach(), shape).contiguous();
  }
  Tensor terms = backend::current().pair_forward(f, xb, tb, pw);
  if (any_requires_grad({&x, &t})) {
    auto node = std::make_shared<PairBackward>(f, xb, tb, pw, x, t);
    connect(*node, {x, t});
    set_history(terms, node);
  }
  return terms;
}

}  // namespace mixprec::detail
