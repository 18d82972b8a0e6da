// matmul, bmm and linear on top of cpu::gemm, with their backward rules. f32 x f32 products
// follow amp::matmul_precision(), read at the forward and kept for its backward.
#include "mixprec/ops/linalg.h"

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/policy.h"
#include "mixprec/autograd/function.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/cpu/reduce_to_shape.h"
#include "mixprec/numerics/convert.h"

namespace mixprec {
namespace {

DType acc_dtype(DType t) {
  return t == DType::f64 ? DType::f64 : DType::f32;
}

void check_float_pair(const char* op, const Tensor& a, const Tensor& b) {
  MIXPREC_CHECK(a.defined() && b.defined(), op, "undefined input");
  MIXPREC_CHECK(a.dtype() == b.dtype(), op,
                std::string("inputs must share a dtype, got ") + dtype_name(a.dtype()) + " and " +
                    dtype_name(b.dtype()) + " (cast one, or use autocast)");
  MIXPREC_CHECK(a.dtype() == DType::f64 || a.dtype() == DType::f32 || a.dtype() == DType::bf16 ||
                    a.dtype() == DType::f16,
                op, std::string("unsupported dtype ") + dtype_name(a.dtype()));
  MIXPREC_CHECK(!a.is_meta() && !b.is_meta(), op, "meta tensors have no data");
}

// The precision an op runs with: the process-wide setting when both operands are f32.
amp::MatmulPrecision f32_precision(const Tensor& a, const Tensor& b) {
  return a.dtype() == DType::f32 && b.dtype() == DType::f32 ? amp::matmul_precision()
                                                            : amp::MatmulPrecision::highest;
}

// An f32 operand (detached, contiguous) as `p` has the GEMM see it: high rounds it to TF32
// (nearest even, kept as f32), medium to bf16 (cpu::gemm widens bf16 exactly and accumulates
// in f32). Other dtypes, and highest, pass through.
Tensor precision_operand(const Tensor& t, amp::MatmulPrecision p) {
  if (t.dtype() != DType::f32 || p == amp::MatmulPrecision::highest) return t;
  if (p == amp::MatmulPrecision::medium) return t.to(DType::bf16);
  Tensor r = Tensor::empty(t.shape(), DType::f32);
  round_to_tf32(t.data<float>(), r.data<float>(), static_cast<std::size_t>(t.numel()));
  return r;
}

// A gradient arriving in another dtype joins f64 math only as f64; f32/bf16/f16 mix freely.
Tensor as_operand(const Tensor& g, DType op_dtype) {
  const bool f64 = g.dtype() == DType::f64 || op_dtype == DType::f64;
  return (f64 ? g.to(op_dtype) : g).contiguous();
}

// C [batch, m, n] (new, dtype `out`) = op(A) · op(B); A, B contiguous [batch, rows, cols].
Tensor batched_product(const Tensor& a, bool ta, const Tensor& b, bool tb, int64_t batch, int64_t m,
                       int64_t n, int64_t k, DType out) {
  Tensor c = Tensor::empty({batch, m, n}, out);
  const int64_t a_cols = ta ? m : k, b_cols = tb ? k : n;
  cpu::gemm(m, n, k, 1.0f, {a.dtype(), a.raw_data(), a_cols, ta, batch > 1 ? m * k : 0},
            {b.dtype(), b.raw_data(), b_cols, tb, batch > 1 ? k * n : 0}, 0.0f,
            {out, c.raw_data(), n, m * n}, batch);
  return c;
}

// matmul with a 2-d b: a is treated as [rows, K].
class MatmulBackward final : public Node {
 public:
  // a, b: the operands as the forward GEMM saw them (rounded under the precision);
  // a_dtype, b_dtype: the inputs' dtypes, which the gradients take.
  MatmulBackward(Tensor a, Tensor b, DType a_dtype, DType b_dtype, amp::MatmulPrecision precision,
                 int64_t batch, int64_t m, int64_t k, int64_t n, bool b_batched)
      : a_(std::move(a)),
        b_(std::move(b)),
        a_dtype_(a_dtype),
        b_dtype_(b_dtype),
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
        ga = batched_product(g, false, b_, true, batch_, m_, k_, n_, a_dtype_);
      if (edges[1].node)  // dB[i] = A[i]ᵀ · dC[i]
        gb = batched_product(a_, true, g, false, batch_, k_, n_, m_, b_dtype_);
    } else {
      const int64_t rows = batch_ * m_;
      if (edges[0].node) ga = batched_product(g, false, b_, true, 1, rows, k_, n_, a_dtype_);
      if (edges[1].node) gb = batched_product(a_, true, g, false, 1, k_, n_, rows, b_dtype_);
    }
    return {ga.defined() ? ga.view(a_shape()) : ga, gb.defined() ? gb.view(b_.shape()) : gb};
  }

 private:
  Shape a_shape() const { return a_.shape(); }
  Tensor a_, b_;
  DType a_dtype_, b_dtype_;
  amp::MatmulPrecision precision_;
  int64_t batch_, m_, k_, n_;
  bool b_batched_;
};

// matmul after autocast (bmm's hook has run when bmm calls it).
Tensor matmul_impl(const Tensor& a, const Tensor& b) {
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
    auto node = std::make_shared<MatmulBackward>(ac, bc, a.dtype(), b.dtype(), precision, lead, m,
                                                 k, n, b_batched);
    connect(*node, {a, b});
    set_history(c, node);
  }
  return c;
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = amp::autocast_args("matmul", a_in, b_in);
  return matmul_impl(a, b);
}

Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = amp::autocast_args("bmm", a_in, b_in);
  check_float_pair("bmm", a, b);
  MIXPREC_CHECK(a.ndim() == 3 && b.ndim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1),
                "bmm",
                "expects [B,M,K] @ [B,K,N], got " + shape_to_string(a.shape()) + " @ " +
                    shape_to_string(b.shape()));
  return matmul_impl(a, b);
}

namespace {

class LinearBackward final : public Node {
 public:
  // x2d, w: the operands as the forward GEMM saw them; x_dtype: the input's dtype.
  LinearBackward(Tensor x2d, Tensor w, Shape x_shape, DType x_dtype, amp::MatmulPrecision precision)
      : x_(std::move(x2d)),
        w_(std::move(w)),
        x_shape_(std::move(x_shape)),
        x_dtype_(x_dtype),
        precision_(precision) {}
  const char* name() const override { return "LinearBackward"; }
  void release_saved() override { x_ = w_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const int64_t rows = x_.size(0), in = x_.size(1), out = w_.size(0);
    const Tensor g = as_operand(grads[0], x_dtype_).view({rows, out});
    const Tensor gp = precision_operand(g, precision_);  // dY as the matmuls see it
    const auto& edges = next_edges();
    Tensor gx, gw, gb;
    // dX [rows, In] = dY [rows, Out] · W [Out, In]
    if (edges[0].node)
      gx = batched_product(gp, false, w_, false, 1, rows, in, out, x_dtype_).view(x_shape_);
    // dW [Out, In] = dYᵀ · X, kept in f32: a weight gradient is never rounded to bf16/f16.
    if (edges[1].node)
      gw = batched_product(gp, true, x_, false, 1, out, in, rows, acc_dtype(w_.dtype()))
               .view({out, in});
    // db [Out] = column sums of dY, f32 accumulation and result.
    if (edges[2].node) gb = cpu::reduce_to_shape(g, {out}, acc_dtype(g.dtype()));
    return {gx, gw, gb};
  }

 private:
  Tensor x_, w_;
  Shape x_shape_;
  DType x_dtype_;
  amp::MatmulPrecision precision_;
};

}  // namespace

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const auto [x, weight, bias] = amp::autocast_args("linear", x_in, weight_in, bias_in);
  check_float_pair("linear", x, weight);
  MIXPREC_CHECK(weight.ndim() == 2 && x.ndim() >= 1 && x.size(-1) == weight.size(1), "linear",
                "x " + shape_to_string(x.shape()) + " and weight " +
                    shape_to_string(weight.shape()) +
                    " do not match: expected x [..., In] and "
                    "weight [Out, In]");
  const int64_t in = weight.size(1), out = weight.size(0);
  if (bias.defined())
    MIXPREC_CHECK(bias.dtype() == x.dtype() && bias.ndim() == 1 && bias.size(0) == out, "linear",
                  "bias must be [" + std::to_string(out) + "] of " + dtype_name(x.dtype()) +
                      ", got " + shape_to_string(bias.shape()) + " of " + dtype_name(bias.dtype()));
  const int64_t rows = in == 0 ? shape_numel(x.shape()) : x.numel() / in;
  const amp::MatmulPrecision precision = f32_precision(x, weight);
  const Tensor x2 = precision_operand(x.detach().contiguous().view({rows, in}), precision);
  const Tensor w = precision_operand(weight.detach().contiguous(), precision);
  Tensor y = Tensor::empty({rows, out}, x.dtype());
  const Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();  // not rounded
  cpu::gemm(rows, out, in, 1.0f, {x2.dtype(), x2.raw_data(), in},
            {w.dtype(), w.raw_data(), in, true}, 0.0f,
            {x.dtype(), y.raw_data(), out, 0, b.defined() ? b.raw_data() : nullptr});
  Shape y_shape = x.shape();
  y_shape.back() = out;
  y = y.view(y_shape);
  if (any_requires_grad({&x, &weight, &bias})) {
    auto node = std::make_shared<LinearBackward>(x2, w, x.shape(), x.dtype(), precision);
    connect(*node, {x, weight, bias});  // an undefined bias gets a null edge
    set_history(y, node);
  }
  return y;
}

}  // namespace mixprec
