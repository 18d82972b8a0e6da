// rmsnorm and layernorm: input checks and autograd wiring around the norm kernels.
// Backward reuses the saved per-row mean/rstd instead of recomputing them.
#include "mixprec/ops/normalization.h"
#include "op_checks.h"

#include <cmath>
#include "mixprec/amp/autocast.h"

#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"

namespace mixprec {
namespace {

class NormalizationBackward final : public Node {
 public:
  // x: the input as the kernel saw it, or a narrower tensor holding exactly its values
  // (widened back to x_dtype in backward).
  NormalizationBackward(Tensor x, DType x_dtype, Tensor weight, backend::NormStats stats,
                        bool center)
      : x_(std::move(x)),
        x_dtype_(x_dtype),
        weight_(std::move(weight)),
        stats_(std::move(stats)),
        center_(center) {}
  const char* name() const override { return center_ ? "LayerNormBackward" : "RmsNormBackward"; }
  void release_saved() override { x_ = weight_ = stats_.mean = stats_.rstd = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const auto& edges = next_edges();  // x, weight, bias
    std::vector<Tensor> out(edges.size());
    if (!grads[0].defined()) return out;
    const bool need_db = edges[2].node != nullptr;
    const Tensor x = x_.dtype() == x_dtype_ ? x_ : x_.to(x_dtype_);  // exact widening
    backend::NormGrads g = backend::current().norm_backward(grads[0], x, weight_, stats_, center_,
                                                            edges[0].node != nullptr,
                                                            edges[1].node != nullptr, need_db);
    out[0] = g.dx;
    out[1] = g.dweight;
    if (need_db) out[2] = g.dbias;
    return out;
  }

 private:
  Tensor x_;  // contiguous input, or its exact narrower original
  DType x_dtype_;
  Tensor weight_;  // may be undefined
  backend::NormStats stats_;
  bool center_;
};

void check_param(const char* op, const char* what, const Tensor& p, const Tensor& x) {
  if (!p.defined()) return;
  MIXPREC_CHECK(p.dtype() == x.dtype(), op,
                std::string(what) + " dtype " + dtype_name(p.dtype()) +
                    " differs from input dtype " + dtype_name(x.dtype()) +
                    " (cast one, or use autocast)");
  MIXPREC_CHECK(p.ndim() == 1 && p.size(0) == x.size(-1), op,
                std::string(what) + " shape " + shape_to_string(p.shape()) + " must be [" +
                    std::to_string(x.size(-1)) + "] for input " + shape_to_string(x.shape()));
  MIXPREC_CHECK(!p.is_meta(), op, std::string(what) + " is a meta tensor (no data)");
}

// x_orig: the input before autocast. When autocast widened it (bf16/f16 -> f32, exact), the
// backward keeps x_orig instead of the f32 copy: the same values in half the bytes (a
// pre-norm transformer saves one such input per norm).
Tensor norm(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
            bool center, const Tensor& x_orig) {
  check_compute_input(op, x);
  MIXPREC_CHECK(x.ndim() >= 1, op, "input must have at least one dim, got a 0-d tensor");
  MIXPREC_CHECK(std::isfinite(eps) && eps >= 0, op,
                "eps must be finite and >= 0, got " + std::to_string(eps));
  check_param(op, "weight", weight, x);
  check_param(op, "bias", bias, x);
  const Tensor xc = x.detach().contiguous();
  const Tensor wc = weight.defined() ? weight.detach().contiguous() : Tensor();
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  backend::NormStats stats;
  Tensor y = backend::current().norm_forward(xc, wc, bc, eps, center, stats);
  if (any_requires_grad({&x, &weight, &bias})) {
    const bool widened =
        x_orig.dtype() != x.dtype() && x.dtype() == DType::f32 && is_narrow_compute(x_orig.dtype());
    auto node = std::make_shared<NormalizationBackward>(widened ? x_orig.detach().contiguous() : xc,
                                                        x.dtype(), wc, std::move(stats), center);
    connect(*node, {x, weight, bias});  // rmsnorm's undefined bias gets a null edge
    set_history(y, node);
  }
  return y;
}

}  // namespace

Tensor rmsnorm(const Tensor& x_in, const Tensor& weight_in, double eps) {
  const auto [x, weight] = amp::autocast_args("rmsnorm", x_in, weight_in);
  return norm("rmsnorm", x, weight, Tensor(), eps, false, x_in);
}

Tensor layernorm(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, double eps) {
  const auto [x, weight, bias] = amp::autocast_args("layernorm", x_in, weight_in, bias_in);
  return norm("layernorm", x, weight, bias, eps, true, x_in);
}

}  // namespace mixprec
