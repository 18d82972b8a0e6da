// The routing plan and the router's logits (moe_routing.h).
#include "mixprec/ops/moe_routing.h"

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/policy.h"
#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"
#include "mixprec/ops/linalg.h"

namespace mixprec {
namespace {

// Router logits xr · wrᵀ [N, E] with f32 operands, reading x's narrow original: dX and dW as
// linear's, dX rounded once into x's dtype (what the autocast cast's backward does).
class RouterLogitsBackward final : public Node {
 public:
  RouterLogitsBackward(Tensor x, Tensor w) : x_(std::move(x)), w_(std::move(w)) {}
  const char* name() const override { return "RouterLogitsBackward"; }
  void release_saved() override { x_ = w_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor(), Tensor()};
    const Tensor g = grads[0].to(DType::f32).contiguous();  // [N, E]
    const int64_t n = x_.size(0), d = x_.size(1), e = w_.size(0);
    Tensor dx, dw;
    if (next_edges()[0].node) {  // dX [N, d] = dL [N, E] · W [E, d]
      dx = Tensor::empty({n, d}, x_.dtype());
      backend::current().gemm(n, d, e, 1.0f, {DType::f32, g.raw_data(), e},
                              {DType::f32, w_.raw_data(), d}, 0.0f, {x_.dtype(), dx.raw_data(), d},
                              1);
    }
    if (next_edges()[1].node) {  // dW [E, d] = dLᵀ · X
      dw = Tensor::empty({e, d}, DType::f32);
      backend::current().gemm(e, d, n, 1.0f, {DType::f32, g.raw_data(), e, true},
                              {x_.dtype(), x_.raw_data(), d}, 0.0f, {DType::f32, dw.raw_data(), d},
                              1);
    }
    return {dx, dw};
  }

 private:
  Tensor x_;  // [N, d] bf16/f16, contiguous
  Tensor w_;  // [E, d] f32, contiguous
};

}  // namespace

Tensor router_logits(const Tensor& x, const Tensor& xr, const Tensor& wr) {
  const bool narrow_x = is_narrow_compute(x.dtype());
  if (!narrow_x || xr.dtype() != DType::f32 || wr.dtype() != DType::f32 ||
      amp::matmul_precision() != amp::MatmulPrecision::highest || wr.ndim() != 2 || x.ndim() != 2 ||
      wr.size(1) != x.size(1))
    return linear(xr, wr);
  const Tensor xc = x.detach().contiguous(), wc = wr.detach().contiguous();
  const int64_t n = xc.size(0), d = xc.size(1), e = wc.size(0);
  Tensor logits = Tensor::empty({n, e}, DType::f32);
  backend::current().gemm(n, e, d, 1.0f, {xc.dtype(), xc.raw_data(), d},
                          {DType::f32, wc.raw_data(), d, true}, 0.0f,
                          {DType::f32, logits.raw_data(), e}, 1);
  if (any_requires_grad({&x, &wr})) {
    auto node = std::make_shared<RouterLogitsBackward>(xc, wc);
    connect(*node, {x, wr});
    set_history(logits, node);
  }
  return logits;
}

int64_t expert_capacity(int64_t tokens, int64_t top_k, int64_t n_experts, double capacity_factor) {
  MIXPREC_CHECK(capacity_factor >= 0 && std::isfinite(capacity_factor), "expert_capacity",
                "capacity_factor " + std::to_string(capacity_factor) + " must be >= 0");
  if (capacity_factor == 0) return tokens * top_k;
  return static_cast<int64_t>(std::ceil(capacity_factor * static_cast<double>(tokens * top_k) /
                                        static_cast<double>(n_experts)));
}

RoutingPlan plan_routing(const Tensor& expert_ids, int64_t n_experts, double capacity_factor) {
  MIXPREC_CHECK(expert_ids.ndim() == 2 && expert_ids.dtype() == DType::i64, "plan_routing",
                "expects i64 expert ids [N, k], got " + shape_to_string(expert_ids.shape()) + " " +
                    dtype_name(expert_ids.dtype()));
  const int64_t n = expert_ids.size(0), k = expert_ids.size(1);
  const Tensor ids = expert_ids.contiguous();
  const int64_t* e_of = ids.data<int64_t>();
  RoutingPlan plan;
  plan.tokens.resize(static_cast<std::size_t>(n_experts));
  plan.slots.resize(static_cast<std::size_t>(n_experts));
  MoeLayerStats& st = plan.stats;
  st.routed.assign(static_cast<std::size_t>(n_experts), 0);
  st.kept.assign(static_cast<std::size_t>(n_experts), 0);
  st.capacity = expert_capacity(n, k, n_experts, capacity_factor);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = e_of[t * k + j];
      MIXPREC_CHECK(
          e >= 0 && e < n_experts, "plan_routing",
          "expert id " + std::to_string(e) + " outside [0, " + std::to_string(n_experts) + ")");
      const auto ue = static_cast<std::size_t>(e);
      ++st.routed[ue];
      if (st.kept[ue] >= st.capacity) {
        ++st.dropped;
        continue;
      }
      ++st.kept[ue];
      plan.tokens[ue].push_back(t);
      plan.slots[ue].push_back(t * k + j);
    }
  }
  return plan;
}

}  // namespace mixprec
