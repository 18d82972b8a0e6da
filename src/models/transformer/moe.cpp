// The mixture-of-experts layer: routing (f32 router, top-k gates, capacity plan), losses and
// the forward that dispatches tokens to the experts and combines them (ops/moe_routing.h).
#include "mixprec/models/transformer/moe.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/policy.h"
#include "mixprec/ops.h"

namespace mixprec::models {
namespace {

constexpr const char* kWhere = "moe_forward";

struct Routing {
  Tensor logits, probs, gates, expert_ids;  // [N, E], [N, E], [N, k], [N, k]
};

// Router logits, probabilities and renormalised top-k gates, all in f32 (f64 stays f64).
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
  const DType acc = accumulate_dtype(x.dtype());
  const auto slots = std::make_shared<const TokenSlots>(token_slots(plan, n));
  const std::vector<Tensor> xs = moe_dispatch(x, plan, slots, acc);
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
  const Tensor out = moe_combine(ys, r.gates.reshape({n * opt.top_k}), n, d, slots, acc);

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
