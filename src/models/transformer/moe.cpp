// The mixture-of-experts layer: routing (f32 router, biased and group-limited top-k, gates,
// capacity plan), losses and the forward that dispatches tokens to the experts and combines
// them (ops/moe_routing.h).
#include "mixprec/models/transformer/moe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/policy.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/ops.h"

namespace mixprec::models {
namespace {

constexpr const char* kMoeForward = "moe_forward";

struct Routing {
  Tensor logits, scores, gates, expert_ids;  // [N, E], [N, E], [N, k], [N, k]
};

// σ(x) = exp(-softplus(-x)): no cancellation and no inf·0 in the gradient where exp(-x)
// overflows; softplus' rounding costs |softplus(-x)|·u relative (~1e-6 at x = -20).
Tensor sigmoid_of(const Tensor& logits) {
  return exp(scale(softplus(scale(logits, -1.0)), -1.0));
}

// choice [N, E] with the experts outside each token's `limited` best of `groups` groups set to
// -inf; a group ranks by the sum of its two best scores (its one score when it has one
// expert), ties to the lower group, NaN above everything.
Tensor limit_to_groups(const Tensor& choice, int64_t groups, int64_t limited) {
  const int64_t n = choice.size(0), E = choice.size(1), per = E / groups;
  std::vector<double> v = choice.to_doubles();
  auto key = [](double x) { return std::isnan(x) ? std::numeric_limits<double>::infinity() : x; };
  std::vector<double> rank(static_cast<std::size_t>(groups));
  std::vector<int64_t> order(static_cast<std::size_t>(groups));
  for (int64_t t = 0; t < n; ++t) {
    double* row = v.data() + t * E;
    for (int64_t g = 0; g < groups; ++g) {
      double best = -std::numeric_limits<double>::infinity(), second = best;
      for (int64_t e = g * per; e < (g + 1) * per; ++e) {
        const double s = key(row[e]);
        if (s > best) {
          second = best;
          best = s;
        } else if (s > second) {
          second = s;
        }
      }
      rank[static_cast<std::size_t>(g)] = per > 1 ? best + second : best;
    }
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return rank[static_cast<std::size_t>(a)] > rank[static_cast<std::size_t>(b)];
    });
    for (int64_t j = limited; j < groups; ++j) {
      const int64_t g = order[static_cast<std::size_t>(j)];
      std::fill(row + g * per, row + (g + 1) * per, -std::numeric_limits<double>::infinity());
    }
  }
  return Tensor::from_doubles(v, choice.shape(), choice.dtype());
}

// Router logits, scores and the top-k gates, all in f32 (f64 stays f64).
Routing route(const Tensor& x, const MoeWeights& w, const MoeOptions& opt) {
  amp::ModuleScope scope("router");
  const auto [xr, wr] = amp::autocast_args("moe_router", x, w.router);
  // Autocast off: linear would otherwise lower the f32 operands back to bf16/f16.
  amp::AutocastGuard f32_only(DType::f32);
  Routing r;
  r.logits = router_logits(x, xr, wr);
  r.scores = opt.score_func == ScoreFunc::sigmoid ? sigmoid_of(r.logits) : softmax(r.logits, -1);
  {
    // Which experts: a decision, not a function to differentiate.
    NoGradGuard no_grad;
    Tensor choice = r.scores.detach();
    if (w.expert_bias.defined()) choice = add(choice, w.expert_bias.to(choice.dtype()));
    if (opt.n_groups > 0) choice = limit_to_groups(choice, opt.n_groups, opt.n_limited_groups);
    r.expert_ids = topk(choice, opt.top_k, -1).second;
  }
  Tensor gates = gather(r.scores, 1, r.expert_ids);
  if (opt.route_norm) {
    // + 1e-20 (torchtitan's): sigmoid scores may all underflow; a sum of softmax scores is at
    // least 1/E, where it changes no bit.
    const Tensor tiny = Tensor::from_doubles({1e-20}, {}, gates.dtype());
    gates = div(gates, add(sum(gates, -1, /*keepdim=*/true), tiny));
  }
  if (opt.route_scale != 1.0) gates = scale(gates, opt.route_scale);
  r.gates = gates;
  return r;
}

void check_options(const MoeWeights& w, const MoeOptions& opt, int64_t d) {
  const int64_t n_experts = w.n_experts();
  MIXPREC_CHECK(w.router.ndim() == 2 && w.router.size(0) == n_experts && w.router.size(1) == d,
                kMoeForward,
                "router " + shape_to_string(w.router.shape()) + " does not match " +
                    std::to_string(n_experts) + " experts of width " + std::to_string(d));
  MIXPREC_CHECK(
      opt.top_k >= 1 && opt.top_k <= n_experts, kMoeForward,
      "top_k " + std::to_string(opt.top_k) + " must be in [1, " + std::to_string(n_experts) + "]");
  MIXPREC_CHECK(!w.expert_bias.defined() || w.expert_bias.shape() == Shape{n_experts}, kMoeForward,
                "expert_bias " + shape_to_string(w.expert_bias.shape()) + " is not [" +
                    std::to_string(n_experts) + "]");
  if (opt.n_groups > 0) {
    const int64_t g = opt.n_groups, per = n_experts / g;
    MIXPREC_CHECK(n_experts % g == 0 && opt.n_limited_groups >= 1 && opt.n_limited_groups <= g &&
                      opt.top_k <= opt.n_limited_groups * per,
                  kMoeForward,
                  std::to_string(g) + " groups of " + std::to_string(n_experts) + " experts, " +
                      std::to_string(opt.n_limited_groups) + " per token, cannot give top-" +
                      std::to_string(opt.top_k));
  }
}

}  // namespace

ScoreFunc parse_score_func(const std::string& name) {
  if (name == "softmax") return ScoreFunc::softmax;
  MIXPREC_CHECK(name == "sigmoid", "model.moe.score_func",
                "'" + name + "' is not one of softmax, sigmoid");
  return ScoreFunc::sigmoid;
}

MoeOutput moe_forward(const Tensor& x, const MoeWeights& w, const MoeOptions& opt) {
  MIXPREC_CHECK(x.ndim() == 2, kMoeForward, "expects x [N, d], got " + shape_to_string(x.shape()));
  const int64_t n = x.size(0), d = x.size(1);
  const int64_t n_experts = w.n_experts();
  check_options(w, opt, d);

  const Routing r = route(x, w, opt);
  RoutingPlan plan = plan_routing(r.expert_ids, n_experts, opt.capacity_factor);

  // Dispatch -> expert MLPs -> gated combine: one pass over the token rows each way, sums in
  // f32 (f64 for f64) in expert order, rounded once into x's dtype.
  const DType acc = accumulate_dtype(x.dtype());
  const auto slots = std::make_shared<const TokenSlots>(token_slots(plan, n));
  const std::vector<Tensor> xs = moe_dispatch(x, plan, slots, acc);
  // The experts run together (grouped products), the shared experts with them. Per-expert
  // weights: one without rows runs nothing (and gets no gradient). Stacked: every expert
  // runs, one without rows on its [0, d] batch, so its gradient slices are zeros.
  const bool stacked = w.experts.empty();
  std::vector<Tensor> ys(static_cast<size_t>(n_experts));
  std::vector<size_t> busy;
  std::vector<Tensor> busy_xs;
  std::vector<FeedForwardWeights> busy_ws;
  std::vector<std::string> scopes;
  for (size_t e = 0; e < ys.size(); ++e) {
    if (!stacked && plan.tokens[e].empty()) {
      ys[e] = Tensor::empty({0, d}, x.dtype());
      continue;
    }
    busy.push_back(e);
    busy_xs.push_back(xs[e]);
    if (!stacked) busy_ws.push_back(w.experts[e]);
    scopes.push_back("experts." + std::to_string(e));
  }
  if (stacked) busy_ws.push_back(w.stacked);
  const bool shared = w.shared.w_up.defined();
  if (shared) {
    busy_xs.push_back(x);
    busy_ws.push_back(w.shared);
    scopes.push_back("shared_experts");
  }
  const std::vector<Tensor> outs = feed_forward_grouped(busy_xs, busy_ws, opt.mlp, scopes);
  for (size_t i = 0; i < busy.size(); ++i) ys[busy[i]] = outs[i];
  Tensor out = moe_combine(ys, r.gates.reshape({n * opt.top_k}), n, d, slots, acc);
  if (shared) out = add(out, outs.back());  // in acc: the one rounding stays the last

  MoeOutput o;
  o.out = out.to(x.dtype());
  o.router_logits = r.logits;
  {
    amp::ModuleScope scope("router");
    amp::AutocastGuard f32_only(DType::f32);
    const DType ld = r.scores.dtype();
    o.probs = opt.score_func == ScoreFunc::softmax
                  ? r.scores
                  : div(r.scores, sum(r.scores, -1, /*keepdim=*/true));
    // f_e: routed fractions before dropping, a constant of the routing decision; over every
    // rank's rows with global_counts (the last entry carries the assignments).
    std::vector<int64_t> routed = plan.stats.routed;
    routed.push_back(n * opt.top_k);
    if (opt.global_counts) opt.global_counts(routed);
    std::vector<double> frac(static_cast<std::size_t>(n_experts));
    for (std::size_t e = 0; e < frac.size(); ++e)
      frac[e] = static_cast<double>(routed[e]) / static_cast<double>(routed.back());
    const Tensor f = Tensor::from_doubles(frac, {n_experts}, ld);
    o.aux_loss =
        scale(sum(mul(mean(o.probs, 0), f)), static_cast<double>(n_experts));  // E·Σ f_e·P_e
    // logsumexp(l) = l - log_softmax(l), read off column 0.
    const Tensor lse = sub(r.logits.select(1, 0), log_softmax(r.logits, -1).select(1, 0));
    o.z_loss = mean(mul(lse, lse));
  }
  o.stats = std::move(plan.stats);
  return o;
}

}  // namespace mixprec::models
