// The `cpu` entry of the backend table: the fast kernels of this folder, each at its best ISA
// for this CPU (the kernels' own switches force narrower paths in tests).
#include "mixprec/backend/backend.h"
#include "mixprec/cpu/accumulate.h"
#include "mixprec/cpu/activation.h"
#include "mixprec/cpu/attention.h"
#include "mixprec/cpu/bf16_kernel.h"
#include "mixprec/cpu/cross_entropy.h"
#include "mixprec/cpu/elementwise.h"
#include "mixprec/cpu/embedding.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/cpu/grad_scan.h"
#include "mixprec/cpu/indexing.h"
#include "mixprec/cpu/line_ops.h"
#include "mixprec/cpu/moe_rows.h"
#include "mixprec/cpu/normalization.h"
#include "mixprec/cpu/pointwise.h"
#include "mixprec/cpu/quantize.h"
#include "mixprec/cpu/reduce_to_shape.h"
#include "mixprec/cpu/reduction.h"
#include "mixprec/cpu/rope.h"
#include "mixprec/cpu/softmax.h"
#include "mixprec/cpu/update_pass.h"

namespace mixprec::backend {
namespace {

Backend make_cpu_backend() {
  Backend b;
  b.name = "cpu";
  b.gemm = [](int64_t m, int64_t n, int64_t k, float alpha, const GemmOperand& a,
              const GemmOperand& bm, float beta, const GemmOutput& c,
              int64_t batch) { cpu::gemm(m, n, k, alpha, a, bm, beta, c, batch); };
  b.set_whole_products = cpu::set_whole_products;
  b.quantize = cpu::quantize;
  b.scaled_gemm = cpu::scaled_gemm;
  b.binary = [](BinaryOp op, const Tensor& x, const Tensor& y, const Shape& shape, DType out) {
    return cpu::binary(op, x, y, shape, out);
  };
  b.div_grad_b = [](const Tensor& g, const Tensor& x, const Tensor& y, DType out) {
    return cpu::div_grad_b(g, x, y, out);
  };
  b.scale = [](const Tensor& x, double s, DType out) { return cpu::scale(x, s, out); };
  b.pointwise_forward = cpu::pointwise_forward;
  b.pointwise_backward = cpu::pointwise_backward;
  b.line_forward = cpu::line_forward;
  b.line_backward = cpu::line_backward;
  b.pair_forward = cpu::pair_forward;
  b.pair_backward = cpu::pair_backward;
  b.activation_forward = [](Activation act, const Tensor& x) {
    return cpu::activation_forward(act, x);
  };
  b.activation_backward = [](Activation act, const Tensor& x, const Tensor& g) {
    return cpu::activation_backward(act, x, g);
  };
  b.swiglu_forward = [](const Tensor& gate, const Tensor& up) {
    return cpu::swiglu_forward(gate, up);
  };
  b.swiglu_backward = [](const Tensor& gate, const Tensor& up, const Tensor& g, bool wg, bool wu) {
    return cpu::swiglu_backward(gate, up, g, wg, wu);
  };
  b.dropout_forward = [](const Tensor& x, double p, uint64_t seed, uint64_t stream) {
    return cpu::dropout_forward(x, p, seed, stream);
  };
  b.dropout_backward = [](const Tensor& g, double p, uint64_t seed, uint64_t stream, DType out) {
    return cpu::dropout_backward(g, p, seed, stream, out);
  };
  b.reduce_dim = cpu::reduce_dim;
  b.reduce_expand_backward = cpu::reduce_expand_backward;
  b.l2_norm_backward = [](const Tensor& grad, const Tensor& x, const Tensor& norm,
                          ReduceGeometry g) { return cpu::norm_backward(grad, x, norm, g); };
  b.max_dim = cpu::max_dim;
  b.max_backward = cpu::max_backward;
  b.reduce_to_shape = cpu::reduce_to_shape;
  b.norm_forward = cpu::norm_forward;
  b.norm_backward = [](const Tensor& dy, const Tensor& x, const Tensor& w, const NormStats& stats,
                       bool center, bool dx, bool dw,
                       bool db) { return cpu::norm_backward(dy, x, w, stats, center, dx, dw, db); };
  b.softmax = cpu::softmax_lastdim;
  b.softmax_backward = cpu::softmax_lastdim_backward;
  b.attention_forward = cpu::attention_forward;
  b.attention_backward = cpu::attention_backward;
  b.rope_rotate = cpu::rope_rotate;
  b.embedding_forward = cpu::embedding_forward;
  b.embedding_backward = cpu::embedding_backward;
  b.cross_entropy_forward = cpu::cross_entropy_forward;
  b.cross_entropy_backward = cpu::cross_entropy_backward;
  b.gather = cpu::gather;
  b.scatter_add = cpu::scatter_add;
  b.index_add = [](const Tensor& x, ReduceGeometry g, const Tensor& index, const Tensor& source,
                   double alpha, const char* op) {
    cpu::check_index_range(index, g.n, op);
    return cpu::index_add(x, g, index, source, alpha);
  };
  b.index_select_scaled = [](const Tensor& grad, ReduceGeometry g, const Tensor& index,
                             double alpha, DType dtype, const char* op) {
    cpu::check_index_range(index, g.n, op);
    return cpu::index_select_scaled(grad, g, index, alpha, dtype);
  };
  b.topk = cpu::topk;
  b.topk_backward = cpu::topk_backward;
  b.concat = cpu::concat;
  b.moe_dispatch = cpu::moe_dispatch;
  b.moe_dispatch_backward = cpu::moe_dispatch_backward;
  b.moe_combine = cpu::moe_combine;
  b.moe_combine_backward = cpu::moe_combine_backward;
  b.accumulate_into = cpu::accumulate_into;
  b.add_same_shape = cpu::add_same_shape;
  b.unscale_and_check = [](std::span<const Tensor> gs, float inv_scale) {
    return cpu::unscale_and_check(gs, inv_scale);
  };
  b.first_nonfinite = cpu::first_nonfinite;
  b.clamp_in_place = cpu::clamp_in_place;
  b.grad_numerics = [](std::span<const Tensor> gs, double scale, double under, double over) {
    return cpu::grad_numerics(gs, scale, under, over);
  };
  b.square_sum = cpu::square_sum;
  b.update = cpu::update_pass;
  b.bf16_kernels = cpu::available_bf16_kernels;
  b.current_bf16_kernel = cpu::current_bf16_kernel;
  b.use_bf16_kernel = cpu::use_bf16_kernel;
  b.time_bf16_kernels = cpu::time_bf16_kernels;
  return b;
}

}  // namespace

const Backend& cpu_backend() {
  static const Backend b = make_cpu_backend();
  return b;
}

}  // namespace mixprec::backend
