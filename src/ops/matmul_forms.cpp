// The spellings of the matrix product PyTorch code uses (matmul with 1-d and broadcast
// operands, mm, mv, dot), each reduced to the one product in linalg.cpp; and addmm /
// baddbmm, whose GEMM accumulates on top of beta·input so the sum is rounded once.
#include <string>

#include "linear_parts.h"
#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/linalg.h"

namespace mixprec {
namespace {

using detail::matmul_product;

std::string shapes(const Tensor& a, const Tensor& b) {
  return shape_to_string(a.shape()) + " and " + shape_to_string(b.shape());
}

Shape leading(const Tensor& t) {
  return Shape(t.shape().begin(), t.shape().end() - 2);
}

// Both operands at least 2-d: batch dims broadcast (b 2-d, or b's batch all ones, needs no copy).
Tensor broadcast_matmul(const Tensor& a, const Tensor& b) {
  const int64_t k = a.size(-1);
  MIXPREC_CHECK(b.size(-2) == k, "matmul", "inner dims differ: " + shapes(a, b));
  const Shape batch_a = leading(a), batch_b = leading(b);
  if (shape_numel(batch_b) == 1 && batch_b.size() <= batch_a.size())
    return matmul_product(a, b.reshape({k, b.size(-1)}));
  if (batch_a == batch_b) return matmul_product(a, b);
  Shape batch = broadcast_shapes(batch_a, batch_b);
  Shape sa = batch, sb = batch;
  sa.insert(sa.end(), {a.size(-2), k});
  sb.insert(sb.end(), {k, b.size(-1)});
  return matmul_product(broadcast_to(a, sa), broadcast_to(b, sb), sa != a.shape(), sb != b.shape());
}

Tensor matmul_any_rank(const Tensor& a, const Tensor& b) {
  detail::check_float_pair("matmul", a, b);
  MIXPREC_CHECK(a.ndim() >= 1 && b.ndim() >= 1, "matmul",
                "both operands need at least 1 dim, got " + shapes(a, b));
  if (a.ndim() == 1 && b.ndim() == 1) {
    MIXPREC_CHECK(a.size(0) == b.size(0), "matmul", "1-d operands differ in size: " + shapes(a, b));
    return matmul_product(a.reshape({1, a.size(0)}), b.reshape({b.size(0), 1})).view({});
  }
  if (b.ndim() == 1) {
    MIXPREC_CHECK(a.size(-1) == b.size(0), "matmul", "inner dims differ: " + shapes(a, b));
    return matmul_product(a, b.reshape({b.size(0), 1})).squeeze(-1);
  }
  if (a.ndim() == 1) return broadcast_matmul(a.reshape({1, a.size(0)}), b).squeeze(-2);
  return broadcast_matmul(a, b);
}

// beta·input + alpha·(b1 @ b2) over `batch` products of [n, m] @ [m, p].
class AddProductBackward final : public Node {
 public:
  AddProductBackward(Tensor b1, Tensor b2, DType dtype, amp::MatmulPrecision precision,
                     Shape input_shape, DType input_dtype, double beta, double alpha, int64_t batch,
                     int64_t n, int64_t m, int64_t p)
      : b1_(std::move(b1)),
        b2_(std::move(b2)),
        dtype_(dtype),
        precision_(precision),
        input_shape_(std::move(input_shape)),
        input_dtype_(input_dtype),
        beta_(beta),
        alpha_(alpha),
        batch_(batch),
        n_(n),
        m_(m),
        p_(p) {}
  const char* name() const override { return "AddProductBackward"; }
  void release_saved() override { b1_ = b2_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor()};
    const auto& edges = next_edges();
    const DType dt = dtype_;  // the operands' own dtype (b1_ may be their TF32/bf16 rounding)
    const Tensor g = detail::precision_operand(detail::as_operand(grads[0], dt), precision_);
    Tensor gi, g1, g2;
    if (edges[0].node) {  // beta·g summed to input's shape, one rounding
      const Tensor summed =
          backend::current().reduce_to_shape(g, input_shape_, detail::acc_dtype(input_dtype_));
      gi = backend::current().scale(summed, beta_, input_dtype_);
    }
    const auto alpha = static_cast<float>(alpha_);
    if (edges[1].node)
      g1 = detail::batched_product(g, false, b2_, true, batch_, n_, m_, p_, dt, alpha)
               .view(b1_.shape());
    if (edges[2].node)
      g2 = detail::batched_product(b1_, true, g, false, batch_, m_, p_, n_, dt, alpha)
               .view(b2_.shape());
    return {gi, g1, g2};
  }

 private:
  Tensor b1_, b2_;  // contiguous operands, as the forward GEMM read them
  DType dtype_;
  amp::MatmulPrecision precision_;
  Shape input_shape_;
  DType input_dtype_;
  double beta_, alpha_;
  int64_t batch_, n_, m_, p_;
};

Tensor add_product(const char* op, const Tensor& input, const Tensor& b1, const Tensor& b2,
                   double beta, double alpha, bool batched) {
  detail::check_float_pair(op, b1, b2);
  detail::check_float_pair(op, input, b1);
  const int rank = batched ? 3 : 2;
  MIXPREC_CHECK(b1.ndim() == rank && b2.ndim() == rank, op,
                std::string("expects ") + (batched ? "[B,N,M] @ [B,M,P]" : "[N,M] @ [M,P]") +
                    ", got " + shapes(b1, b2));
  const int64_t batch = batched ? b1.size(0) : 1, n = b1.size(-2), m = b1.size(-1), p = b2.size(-1);
  MIXPREC_CHECK(b2.size(-2) == m && (!batched || b2.size(0) == batch), op,
                "operand shapes do not chain: " + shapes(b1, b2));
  Shape out_shape = batched ? Shape{batch, n, p} : Shape{n, p};
  MIXPREC_CHECK(input.ndim() <= rank && broadcast_shapes(input.shape(), out_shape) == out_shape, op,
                "input of shape " + shape_to_string(input.shape()) + " does not broadcast to " +
                    shape_to_string(out_shape));
  const DType dt = b1.dtype(), acc = detail::acc_dtype(dt);
  // C starts as input (widened once into the accumulation dtype); the GEMM scales it by beta.
  // With beta = 0 the GEMM never reads C, so it is left unwritten.
  Tensor c = Tensor::empty(out_shape, acc);
  if (beta != 0) c.copy_from(broadcast_to(input.detach(), out_shape));
  const amp::MatmulPrecision precision = detail::f32_precision(b1, b2);
  const Tensor a1 = detail::precision_operand(b1.detach().contiguous(), precision);
  const Tensor a2 = detail::precision_operand(b2.detach().contiguous(), precision);
  backend::current().gemm(n, p, m, static_cast<float>(alpha),
                          {a1.dtype(), a1.raw_data(), m, false, batch > 1 ? n * m : 0},
                          {a2.dtype(), a2.raw_data(), p, false, batch > 1 ? m * p : 0},
                          static_cast<float>(beta), {acc, c.raw_data(), p, n * p}, batch);
  Tensor out = c.to(dt);
  if (any_requires_grad({&input, &b1, &b2})) {
    auto node = std::make_shared<AddProductBackward>(a1, a2, dt, precision, input.shape(),
                                                     input.dtype(), beta, alpha, batch, n, m, p);
    connect(*node, {input, b1, b2});
    set_history(out, node);
  }
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = amp::autocast_args("matmul", a_in, b_in);
  return matmul_any_rank(a, b);
}

Tensor mm(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = amp::autocast_args("mm", a_in, b_in);
  detail::check_float_pair("mm", a, b);
  MIXPREC_CHECK(a.ndim() == 2 && b.ndim() == 2 && a.size(1) == b.size(0), "mm",
                "expects [M,K] @ [K,N], got " + shapes(a, b));
  return matmul_product(a, b);
}

Tensor mv(const Tensor& a_in, const Tensor& v_in) {
  const auto [a, v] = amp::autocast_args("mv", a_in, v_in);
  detail::check_float_pair("mv", a, v);
  MIXPREC_CHECK(a.ndim() == 2 && v.ndim() == 1 && a.size(1) == v.size(0), "mv",
                "expects [M,K] @ [K], got " + shapes(a, v));
  return matmul_product(a, v.reshape({v.size(0), 1})).view({a.size(0)});
}

Tensor dot(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = amp::autocast_args("dot", a_in, b_in);
  detail::check_float_pair("dot", a, b);
  MIXPREC_CHECK(a.ndim() == 1 && b.ndim() == 1 && a.size(0) == b.size(0), "dot",
                "expects two 1-d tensors of one size, got " + shapes(a, b));
  return matmul_product(a.reshape({1, a.size(0)}), b.reshape({b.size(0), 1})).view({});
}

Tensor addmm(const Tensor& input_in, const Tensor& m1_in, const Tensor& m2_in, double beta,
             double alpha) {
  const auto [input, m1, m2] = amp::autocast_args("addmm", input_in, m1_in, m2_in);
  return add_product("addmm", input, m1, m2, beta, alpha, false);
}

Tensor baddbmm(const Tensor& input_in, const Tensor& b1_in, const Tensor& b2_in, double beta,
               double alpha) {
  const auto [input, b1, b2] = amp::autocast_args("baddbmm", input_in, b1_in, b2_in);
  return add_product("baddbmm", input, b1, b2, beta, alpha, true);
}

}  // namespace mixprec
