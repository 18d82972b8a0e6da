// matmul, bmm and linear on top of the backend's gemm, with their backward rules. f32 x f32
// products follow amp::matmul_precision(), read at the forward and kept for its backward.
#include "mixprec/ops/linalg.h"

#include "linear_parts.h"
#include "linear_product.h"
#include "mixprec/amp/autocast.h"
#include "mixprec/amp/policy.h"
#include "mixprec/autograd/function.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/autograd/saved_ops.h"
#include "mixprec/backend/backend.h"
#include "mixprec/numerics/convert.h"

namespace mixprec {
namespace {

using detail::as_operand;
using detail::batched_product;
using detail::check_float_pair;
using detail::f32_precision;
using detail::precision_operand;

// matmul with a 2-d b: a is treated as [rows, K].
class MatmulBackward final : public Node {
 public:
  // a, b: the operands as the forward GEMM saw them (rounded under the precision);
  // a_dtype, b_dtype: the inputs' dtypes; ga_dtype, gb_dtype: the gradients' (the inputs'
  // own, or the accumulation dtype for an operand broadcast before the product, whose
  // gradient is summed and rounded once later).
  MatmulBackward(Tensor a, Tensor b, DType a_dtype, DType b_dtype, DType ga_dtype, DType gb_dtype,
                 amp::MatmulPrecision precision, int64_t batch, int64_t m, int64_t k, int64_t n,
                 bool b_batched)
      : a_(std::move(a)),
        b_(std::move(b)),
        a_dtype_(a_dtype),
        b_dtype_(b_dtype),
        ga_dtype_(ga_dtype),
        gb_dtype_(gb_dtype),
        precision_(precision),
        batch_(batch),
        m_(m),
        k_(k),
        n_(n),
        b_batched_(b_batched) {}
  const char* name() const override { return "MatmulBackward"; }
  void release_saved() override { a_ = b_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const Tensor g = precision_operand(as_operand(grads[0], a_dtype_), precision_);
    Tensor ga, gb;
    const auto& edges = next_edges();
    if (b_batched_) {
      if (edges[0].node)  // dA[i] = dC[i] · B[i]ᵀ
        ga = batched_product(g, false, b_, true, batch_, m_, k_, n_, ga_dtype_);
      if (edges[1].node)  // dB[i] = A[i]ᵀ · dC[i]
        gb = batched_product(a_, true, g, false, batch_, k_, n_, m_, gb_dtype_);
    } else {
      const int64_t rows = batch_ * m_;
      if (edges[0].node) ga = batched_product(g, false, b_, true, 1, rows, k_, n_, ga_dtype_);
      if (edges[1].node) gb = batched_product(a_, true, g, false, 1, k_, n_, rows, gb_dtype_);
    }
    return {ga.defined() ? ga.view(a_shape()) : ga, gb.defined() ? gb.view(b_.shape()) : gb};
  }

 private:
  Shape a_shape() const { return a_.shape(); }
  Tensor a_, b_;
  DType a_dtype_, b_dtype_, ga_dtype_, gb_dtype_;
  amp::MatmulPrecision precision_;
  int64_t batch_, m_, k_, n_;
  bool b_batched_;
};

}  // namespace

// matmul after autocast (bmm's hook has run when bmm calls it).
Tensor detail::matmul_product(const Tensor& a, const Tensor& b, bool wide_grad_a,
                              bool wide_grad_b) {
  check_float_pair("matmul", a, b);
  MIXPREC_CHECK(a.ndim() >= 2 && b.ndim() >= 2, "matmul",
                "needs at least 2-d inputs, got " + shape_to_string(a.shape()) + " and " +
                    shape_to_string(b.shape()));
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  MIXPREC_CHECK(
      b.size(-2) == k, "matmul",
      "inner dims differ: " + shape_to_string(a.shape()) + " @ " + shape_to_string(b.shape()));
  const bool b_batched = b.ndim() > 2;
  if (b_batched)
    MIXPREC_CHECK(b.ndim() == a.ndim() && Shape(a.shape().begin(), a.shape().end() - 2) ==
                                              Shape(b.shape().begin(), b.shape().end() - 2),
                  "matmul",
                  "batched operands need equal leading dims: " + shape_to_string(a.shape()) +
                      " @ " + shape_to_string(b.shape()));
  const int64_t lead =
      a.ndim() > 2 ? shape_numel(Shape(a.shape().begin(), a.shape().end() - 2)) : 1;
  const amp::MatmulPrecision precision = f32_precision(a, b);
  const Tensor ac = precision_operand(a.detach().contiguous(), precision);
  const Tensor bc = precision_operand(b.detach().contiguous(), precision);
  Tensor c = b_batched ? batched_product(ac, false, bc, false, lead, m, n, k, a.dtype())
                       : batched_product(ac, false, bc, false, 1, lead * m, n, k, a.dtype());
  Shape out_shape = a.shape();
  out_shape.back() = n;
  c = c.view(out_shape);
  if (any_requires_grad({&a, &b})) {
    const DType ga = wide_grad_a ? acc_dtype(a.dtype()) : a.dtype();
    const DType gb = wide_grad_b ? acc_dtype(b.dtype()) : b.dtype();
    auto node = std::make_shared<MatmulBackward>(ac, bc, a.dtype(), b.dtype(), ga, gb, precision,
                                                 lead, m, k, n, b_batched);
    connect(*node, {a, b});
    set_history(c, node);
  }
  return c;
}

Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = amp::autocast_args("bmm", a_in, b_in);
  check_float_pair("bmm", a, b);
  MIXPREC_CHECK(a.ndim() == 3 && b.ndim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1),
                "bmm",
                "expects [B,M,K] @ [B,K,N], got " + shape_to_string(a.shape()) + " @ " +
                    shape_to_string(b.shape()));
  return detail::matmul_product(a, b);
}

namespace {

class LinearBackward final : public Node {
 public:
  explicit LinearBackward(detail::LinearProduct p) : p_(std::move(p)) {}
  const char* name() const override { return "LinearBackward"; }
  void release_saved() override { p_.release(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const auto& edges = next_edges();
    const detail::LinearProduct::Grads g = p_.start_backward(
        grads[0], edges[0].node != nullptr, edges[1].node != nullptr, edges[2].node != nullptr);
    if (g.dx.defined()) p_.grad_x(g);
    if (g.dw.defined()) p_.grad_w(g);
    return {g.dx, g.dw, g.db};
  }

 private:
  detail::LinearProduct p_;
};

}  // namespace

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const auto [x, weight, bias] = amp::autocast_args("linear", x_in, weight_in, bias_in);
  detail::LinearProduct p =
      detail::LinearProduct::prepare("linear", x, weight, bias, amp::RecipeSite::linear);
  // Only a product with a backward saves anything (not evaluation, not a checkpoint's forward).
  if (GradMode::is_enabled() && any_requires_grad({&x, &weight, &bias})) p.cast_input_for_saving();
  // A selective checkpoint's recompute may hand back the product its forward kept.
  const SavedOp saved("linear");
  Tensor y;
  if (saved.recalled()) {
    y = saved.output(0);
  } else {
    y = p.make_output();
    p.forward(y);
    saved.keep({y});
  }
  p.drop_high_precision_input();
  if (any_requires_grad({&x, &weight, &bias})) {
    auto node = std::make_shared<LinearBackward>(std::move(p));
    connect(*node, {x, weight, bias});  // an undefined bias gets a null edge
    set_history(y, node);
  }
  return y;
}

}  // namespace mixprec
