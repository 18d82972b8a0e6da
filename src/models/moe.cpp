#include "mixprec/models/moe.h"

#include <cmath>
#include <string>

#include "mixprec/amp/autocast.h"
#include "mixprec/ops.h"

namespace mixprec::models {
namespace {

constexpr const char* kWhere = "moe_forward";

// [n] token ids -> [n, d] gather index (every column of row i is ids[i]).
Tensor row_index(const std::vector<int64_t>& ids, int64_t d) {
  Tensor idx = Tensor::empty({static_cast<int64_t>(ids.size()), d}, DType::i64);
  int64_t* p = idx.data<int64_t>();
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < d; ++c) p[static_cast<int64_t>(i) * d + c] = ids[i];
  return idx;
}

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
  r.logits = linear(xr, wr);
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

  // Gather -> expert MLP -> gate -> index_add, expert by expert; f32 sums (f64 for f64).
  const DType acc = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const Tensor gates_flat = r.gates.reshape({n * opt.top_k});  // [N·k]
  Tensor out = Tensor::zeros({n, d}, acc);
  for (int64_t e = 0; e < n_experts; ++e) {
    const std::vector<int64_t>& tokens = plan.tokens[static_cast<std::size_t>(e)];
    if (tokens.empty()) continue;
    amp::ModuleScope scope("experts." + std::to_string(e));
    const Tensor token_ids = Tensor::from_vector(tokens);   // [n_e]
    const Tensor x_e = gather(x, 0, row_index(tokens, d));  // [n_e, d]
    const Tensor h_e = feed_forward(x_e, w.experts[static_cast<std::size_t>(e)], opt.mlp);
    const Tensor slots = Tensor::from_vector(plan.slots[static_cast<std::size_t>(e)]);
    const Tensor g_e = gather(gates_flat, 0, slots).unsqueeze(1);  // [n_e, 1]
    out = index_add(out, 0, token_ids, mul(h_e, g_e).to(acc));
  }

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
