// The mixture-of-experts layer: routing (f32 router, top-k gates, capacity plan), losses and
// the forward that dispatches tokens to the experts (moe_dispatch.h) and combines them.
#include "mixprec/models/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/policy.h"
#include "mixprec/autograd/function.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/ops.h"
#include "mixprec/parallel.h"
#include "moe_dispatch.h"

namespace mixprec::models {
namespace {

using detail::combine_rows;
using detail::dispatch_rows;
using detail::token_slots;
using detail::TokenSlots;

constexpr const char* kWhere = "moe_forward";

struct Routing {
  Tensor logits, probs, gates, expert_ids;  // [N, E], [N, E], [N, k], [N, k]
};

// Router logits, probabilities and renormalised top-k gates, all in f32 (f64 stays f64).
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
      cpu::gemm(n, d, e, 1.0f, {DType::f32, g.raw_data(), e}, {DType::f32, w_.raw_data(), d}, 0.0f,
                {x_.dtype(), dx.raw_data(), d});
    }
    if (next_edges()[1].node) {  // dW [E, d] = dLᵀ · X
      dw = Tensor::empty({e, d}, DType::f32);
      cpu::gemm(e, d, n, 1.0f, {DType::f32, g.raw_data(), e, true}, {x_.dtype(), x_.raw_data(), d},
                0.0f, {DType::f32, dw.raw_data(), d});
    }
    return {dx, dw};
  }

 private:
  Tensor x_;  // [N, d] bf16/f16, contiguous
  Tensor w_;  // [E, d] f32, contiguous
};

// xr, wr: the router's operands after the "moe_router" hook. When the hook widened a bf16/f16
// x to f32 (exact), the GEMM reads x itself (widened inside the kernel, same products and
// sums) and backward keeps it rather than an f32 copy: half the bytes per MoE layer.
Tensor router_logits(const Tensor& x, const Tensor& xr, const Tensor& wr) {
  const bool narrow_x = x.dtype() == DType::bf16 || x.dtype() == DType::f16;
  if (!narrow_x || xr.dtype() != DType::f32 || wr.dtype() != DType::f32 ||
      amp::matmul_precision() != amp::MatmulPrecision::highest || wr.ndim() != 2 || x.ndim() != 2 ||
      wr.size(1) != x.size(1))
    return linear(xr, wr);
  const Tensor xc = x.detach().contiguous(), wc = wr.detach().contiguous();
  const int64_t n = xc.size(0), d = xc.size(1), e = wc.size(0);
  Tensor logits = Tensor::empty({n, e}, DType::f32);
  cpu::gemm(n, e, d, 1.0f, {xc.dtype(), xc.raw_data(), d}, {DType::f32, wc.raw_data(), d, true},
            0.0f, {DType::f32, logits.raw_data(), e});
  if (any_requires_grad({&x, &wr})) {
    auto node = std::make_shared<RouterLogitsBackward>(xc, wc);
    connect(*node, {x, wr});
    set_history(logits, node);
  }
  return logits;
}

Routing route(const Tensor& x, const Tensor& router_weight, int64_t top_k) {
  amp::ModuleScope scope("router");
  const auto [xr, wr] = amp::autocast_args("moe_router", x, router_weight);
  // Autocast off: linear would otherwise lower the f32 operands back to bf16/f16.
  amp::AutocastGuard f32_only(DType::f32);
  Routing r;
  r.logits = router_logits(x, xr, wr);
  r.probs = softmax(r.logits, -1);
  auto [values, ids] = topk(r.probs, top_k, -1);
  r.gates = div(values, sum(values, -1, /*keepdim=*/true));
  r.expert_ids = ids;
  return r;
}

}  // namespace

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

MoeOutput moe_forward(const Tensor& x, const MoeWeights& w, const MoeOptions& opt) {
  MIXPREC_CHECK(x.ndim() == 2, kWhere, "expects x [N, d], got " + shape_to_string(x.shape()));
  const int64_t n = x.size(0), d = x.size(1);
  const auto n_experts = static_cast<int64_t>(w.experts.size());
  MIXPREC_CHECK(w.router.ndim() == 2 && w.router.size(0) == n_experts && w.router.size(1) == d,
                kWhere,
                "router " + shape_to_string(w.router.shape()) + " does not match " +
                    std::to_string(n_experts) + " experts of width " + std::to_string(d));
  MIXPREC_CHECK(
      opt.top_k >= 1 && opt.top_k <= n_experts, kWhere,
      "top_k " + std::to_string(opt.top_k) + " must be in [1, " + std::to_string(n_experts) + "]");

  const Routing r = route(x, w.router, opt.top_k);
  RoutingPlan plan = plan_routing(r.expert_ids, n_experts, opt.capacity_factor);

  // Dispatch -> expert MLPs -> gated combine: one pass over the token rows each way, sums in
  // f32 (f64 for f64) in expert order, rounded once into x's dtype.
  const DType acc = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const auto slots = std::make_shared<const TokenSlots>(token_slots(plan, n));
  const std::vector<Tensor> xs = dispatch_rows(x, plan, slots, acc);
  // The experts with rows run together (grouped products); one without rows runs nothing
  // (and gets no gradient).
  std::vector<Tensor> ys(static_cast<size_t>(n_experts));
  std::vector<size_t> busy;
  std::vector<Tensor> busy_xs;
  std::vector<FeedForwardWeights> busy_ws;
  std::vector<std::string> scopes;
  for (size_t e = 0; e < ys.size(); ++e) {
    if (plan.tokens[e].empty()) {
      ys[e] = Tensor::empty({0, d}, x.dtype());
      continue;
    }
    busy.push_back(e);
    busy_xs.push_back(xs[e]);
    busy_ws.push_back(w.experts[e]);
    scopes.push_back("experts." + std::to_string(e));
  }
  const std::vector<Tensor> outs = feed_forward_grouped(busy_xs, busy_ws, opt.mlp, scopes);
  for (size_t i = 0; i < busy.size(); ++i) ys[busy[i]] = outs[i];
  const Tensor out = combine_rows(ys, r.gates.reshape({n * opt.top_k}), n, d, slots, acc);

  MoeOutput o;
  o.out = out.to(x.dtype());
  o.router_logits = r.logits;
  o.probs = r.probs;
  {
    amp::ModuleScope scope("router");
    amp::AutocastGuard f32_only(DType::f32);
    const DType ld = r.probs.dtype();
    // f_e: routed fractions before dropping, a constant of the routing decision.
    std::vector<double> frac(static_cast<std::size_t>(n_experts));
    for (std::size_t e = 0; e < frac.size(); ++e)
      frac[e] = static_cast<double>(plan.stats.routed[e]) / static_cast<double>(n * opt.top_k);
    const Tensor f = Tensor::from_doubles(frac, {n_experts}, ld);
    o.aux_loss =
        scale(sum(mul(mean(r.probs, 0), f)), static_cast<double>(n_experts));  // E·Σ f_e·P_e
    // logsumexp(l) = l - log_softmax(l), read off column 0.
    const Tensor lse = sub(r.logits.select(1, 0), log_softmax(r.logits, -1).select(1, 0));
    o.z_loss = mean(mul(lse, lse));
  }
  o.stats = std::move(plan.stats);
  return o;
}

}  // namespace mixprec::models
