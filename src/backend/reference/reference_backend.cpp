// The `reference` entry of the backend table.
#include "reference_kernels.h"

namespace mixprec::backend {
namespace {

Backend make_reference_backend() {
  namespace r = reference;
  Backend b;
  b.name = "reference";
  b.gemm = r::gemm;
  b.set_whole_products = [](bool) { return false; };  // one thread: nothing to split
  b.quantize = r::quantize;
  b.scaled_gemm = r::scaled_gemm;
  b.binary = r::binary;
  b.div_grad_b = r::div_grad_b;
  b.scale = r::scale;
  b.activation_forward = r::activation_forward;
  b.pointwise_forward = r::pointwise_forward;
  b.pointwise_backward = r::pointwise_backward;
  b.line_forward = r::line_forward;
  b.line_backward = r::line_backward;
  b.pair_forward = r::pair_forward;
  b.pair_backward = r::pair_backward;
  b.activation_backward = r::activation_backward;
  b.swiglu_forward = r::swiglu_forward;
  b.swiglu_backward = r::swiglu_backward;
  b.dropout_forward = r::dropout_forward;
  b.dropout_backward = r::dropout_backward;
  b.reduce_dim = r::reduce_dim;
  b.reduce_expand_backward = r::reduce_expand_backward;
  b.l2_norm_backward = r::l2_norm_backward;
  b.max_dim = r::max_dim;
  b.max_backward = r::max_backward;
  b.reduce_to_shape = r::reduce_to_shape;
  b.norm_forward = r::norm_forward;
  b.norm_backward = r::norm_backward;
  b.softmax = r::softmax;
  b.softmax_backward = r::softmax_backward;
  b.attention_forward = r::attention_forward;
  b.attention_backward = r::attention_backward;
  b.rope_rotate = r::rope_rotate;
  b.embedding_forward = r::embedding_forward;
  b.embedding_backward = r::embedding_backward;
  b.cross_entropy_forward = r::cross_entropy_forward;
  b.cross_entropy_backward = r::cross_entropy_backward;
  b.gather = r::gather;
  b.scatter_add = r::scatter_add;
  b.index_add = r::index_add;
  b.index_select_scaled = r::index_select_scaled;
  b.topk = r::topk;
  b.topk_backward = r::topk_backward;
  b.concat = r::concat;
  b.moe_dispatch = r::moe_dispatch;
  b.moe_dispatch_backward = r::moe_dispatch_backward;
  b.moe_combine = r::moe_combine;
  b.moe_combine_backward = r::moe_combine_backward;
  b.accumulate_into = r::accumulate_into;
  b.add_same_shape = r::add_same_shape;
  b.unscale_and_check = r::unscale_and_check;
  b.first_nonfinite = r::first_nonfinite;
  b.clamp_in_place = r::clamp_in_place;
  b.grad_numerics = r::grad_numerics;
  b.square_sum = r::square_sum;
  b.update = r::update;
  // One way to multiply: widened to f64.
  b.bf16_kernels = [] { return std::vector<std::string>{"reference"}; };
  b.current_bf16_kernel = [] { return std::string("reference"); };
  b.use_bf16_kernel = [](std::string_view name, const std::string& where) {
    MIXPREC_CHECK(name == "reference", where,
                  "the bf16 kernel '" + std::string(name) +
                      "' is not available on the reference backend; it has reference");
  };
  b.time_bf16_kernels = [](int) { return std::vector<Bf16KernelTiming>{}; };
  return b;
}

}  // namespace

const Backend& reference_backend() {
  static const Backend b = make_reference_backend();
  return b;
}

}  // namespace mixprec::backend
