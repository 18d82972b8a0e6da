// add/sub/mul/div with broadcasting and dtype promotion, and scale, with their backward rules.
// Gradients come back in each input's dtype and shape: when an input was broadcast, its
// gradient terms are formed in f32 (f64 for f64) and summed with f32 accumulation before the
// single rounding into the input's dtype.
#include "mixprec/ops/elementwise.h"

#include <string>
#include "mixprec/amp/autocast.h"

#include "mixprec/autograd/function.h"
#include "mixprec/autograd/record_tensor_ops.h"
#include "mixprec/backend/backend.h"

namespace mixprec {
namespace {

const char* op_name(backend::BinaryOp op) {
  switch (op) {
    case backend::BinaryOp::add:
      return "add";
    case backend::BinaryOp::sub:
      return "sub";
    case backend::BinaryOp::mul:
      return "mul";
    case backend::BinaryOp::div:
      return "div";
  }
  return "binary";
}

// The gradient of one input: term(out_dtype) builds g·∂out/∂input at the output's shape in
// out_dtype; it is summed back to the input's shape when the input was broadcast.
template <class Term>
Tensor input_grad(const Shape& out_shape, const Shape& in_shape, DType in_dtype, DType g_dtype,
                  Term&& term) {
  if (in_shape == out_shape) return term(in_dtype);  // one rounding, straight into the input dtype
  const DType acc = backend::compute_dtype({in_dtype, g_dtype});
  return sum_to_shape(term(acc), in_shape).to(in_dtype);
}

class BinaryBackward final : public Node {
 public:
  BinaryBackward(backend::BinaryOp op, Tensor a, Tensor b, const Tensor& a_in, const Tensor& b_in,
                 Shape out_shape)
      : op_(op),
        a_(std::move(a)),
        b_(std::move(b)),
        a_shape_(a_in.shape()),
        b_shape_(b_in.shape()),
        a_dtype_(a_in.dtype()),
        b_dtype_(b_in.dtype()),
        out_shape_(std::move(out_shape)) {}
  const char* name() const override {
    switch (op_) {
      case backend::BinaryOp::add:
        return "AddBackward";
      case backend::BinaryOp::sub:
        return "SubBackward";
      case backend::BinaryOp::mul:
        return "MulBackward";
      case backend::BinaryOp::div:
        return "DivBackward";
    }
    return "BinaryBackward";
  }
  void release_saved() override { a_ = b_ = Tensor(); }

  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor(), Tensor()};
    MIXPREC_CHECK(is_floating(g.dtype()) && g.shape() == out_shape_, name(),
                  "gradient of shape " + shape_to_string(g.shape()) + " (" + dtype_name(g.dtype()) +
                      ") for an output of shape " + shape_to_string(out_shape_));
    const auto& edges = next_edges();
    Tensor ga, gb;
    // add/sub pass g on; sum_to_shape accumulates in f32 whatever g's dtype, so g is widened
    // first only when the input's dtype is wider than g's.
    const auto pass = [&](const Shape& shape, DType dt) {
      if (shape == out_shape_) return g.to(dt);
      const DType acc = backend::compute_dtype({dt, g.dtype()});
      return sum_to_shape(g.dtype() == dt || g.dtype() == acc ? g : g.to(acc), shape).to(dt);
    };
    switch (op_) {
      case backend::BinaryOp::add:
      case backend::BinaryOp::sub:
        if (edges[0].node) ga = pass(a_shape_, a_dtype_);
        if (edges[1].node) {
          gb = pass(b_shape_, b_dtype_);
          if (op_ == backend::BinaryOp::sub)
            gb = backend::current().scale(gb, -1.0, b_dtype_);  // exact
        }
        break;
      case backend::BinaryOp::mul:  // d(a·b) = g·b da + g·a db
        if (edges[0].node)
          ga = input_grad(out_shape_, a_shape_, a_dtype_, g.dtype(), [&](DType dt) {
            return backend::current().binary(backend::BinaryOp::mul, g, b_, out_shape_, dt);
          });
        if (edges[1].node)
          gb = input_grad(out_shape_, b_shape_, b_dtype_, g.dtype(), [&](DType dt) {
            return backend::current().binary(backend::BinaryOp::mul, g, a_, out_shape_, dt);
          });
        break;
      case backend::BinaryOp::div:  // d(a/b) = g/b da - g·a/b² db
        if (edges[0].node)
          ga = input_grad(out_shape_, a_shape_, a_dtype_, g.dtype(), [&](DType dt) {
            return backend::current().binary(backend::BinaryOp::div, g, b_, out_shape_, dt);
          });
        if (edges[1].node)
          gb = input_grad(out_shape_, b_shape_, b_dtype_, g.dtype(),
                          [&](DType dt) { return backend::current().div_grad_b(g, a_, b_, dt); });
        break;
    }
    return {ga, gb};
  }

 private:
  backend::BinaryOp op_;
  Tensor a_, b_;  // detached inputs, saved only when a gradient needs them
  Shape a_shape_, b_shape_;
  DType a_dtype_, b_dtype_;
  Shape out_shape_;
};

Tensor binary_op(backend::BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  MIXPREC_CHECK(a.defined() && b.defined(), name, "undefined input");
  MIXPREC_CHECK(!a.is_meta() && !b.is_meta(), name, "meta tensors have no data");
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
  const DType out_dtype = promote(a.dtype(), b.dtype());
  MIXPREC_CHECK(is_computable(out_dtype), name,
                std::string("no arithmetic for ") + dtype_name(a.dtype()) + " and " +
                    dtype_name(b.dtype()) + " (result dtype " + dtype_name(out_dtype) +
                    "; convert to f64, f32, bf16 or f16 first)");
  // Integer operands join as the result dtype (they carry no gradient).
  const Tensor ad = is_floating(a.dtype()) ? a.detach() : a.detach().to(out_dtype);
  const Tensor bd = is_floating(b.dtype()) ? b.detach() : b.detach().to(out_dtype);
  Tensor out = backend::current().binary(op, ad, bd, shape, out_dtype);
  if (any_requires_grad({&a, &b})) {
    const bool a_grad = a.requires_grad(), b_grad = b.requires_grad();
    // mul: da needs b, db needs a. div: da needs b, db needs a and b.
    const bool save_a = (op == backend::BinaryOp::mul || op == backend::BinaryOp::div) && b_grad;
    const bool save_b = (op == backend::BinaryOp::mul && a_grad) || op == backend::BinaryOp::div;
    auto node = std::make_shared<BinaryBackward>(op, save_a ? ad : Tensor(), save_b ? bd : Tensor(),
                                                 a, b, shape);
    connect(*node, {a, b});
    set_history(out, node);
  }
  return out;
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t nd = std::max(a.size(), b.size());
  Shape out(nd, 1);
  for (std::size_t i = 0; i < nd; ++i) {
    // Dims aligned at the end: dim nd-1-i of out pairs with dim size-1-i of each input.
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    MIXPREC_CHECK(da == db || da == 1 || db == 1, "broadcast_shapes",
                  "shapes " + shape_to_string(a) + " and " + shape_to_string(b) +
                      " do not broadcast (dim " + std::to_string(da) + " vs " + std::to_string(db) +
                      ")");
    out[nd - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

Tensor add(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = amp::autocast_args("add", a_in, b_in);
  return binary_op(backend::BinaryOp::add, a, b);
}
Tensor sub(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = amp::autocast_args("sub", a_in, b_in);
  return binary_op(backend::BinaryOp::sub, a, b);
}
Tensor mul(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = amp::autocast_args("mul", a_in, b_in);
  return binary_op(backend::BinaryOp::mul, a, b);
}
Tensor div(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = amp::autocast_args("div", a_in, b_in);
  return binary_op(backend::BinaryOp::div, a, b);
}

Tensor scale(const Tensor& x_in, double s) {
  const auto [x] = amp::autocast_args("scale", x_in);
  backend::check_floating("scale", x, "input");
  MIXPREC_CHECK(is_computable(x.dtype()), "scale",
                std::string("no arithmetic for ") + dtype_name(x.dtype()));
  return scaled(x, s);
}

}  // namespace mixprec
