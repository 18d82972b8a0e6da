// DeepSeek-style routing of the MoE layer (sigmoid or softmax scores, expert bias, group-limited
// top-k, route_norm, route_scale, shared experts, counts over the global batch) against an f64
// reference written from DeepSeek-V3's definition with loops over plain doubles, cases by hand,
// and a gradcheck.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/models/transformer/moe.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"
#include "unit/models/moe_reference.h"

namespace mixprec::models {
namespace {

using mixprec::testing::expect_close;
using mixprec::testing::expect_gradcheck;
using mixprec::testing::grad_input;
using mixprec::testing::randn;
using namespace moe_reference;

struct Reference {
  Matrix out;
  double aux = 0;
  std::vector<int64_t> routed;
};

// Token by token: scores, choice = scores + bias, the groups a token may use (ranked by the
// sum of their two best choices), the top-k by choice, gates from the unbiased scores.
Reference reference(const Tensor& x_t, const MoeWeights& w, const MoeOptions& o,
                    const std::vector<double>& bias) {
  const Matrix x = rows_of(x_t), router = rows_of(w.router);
  const size_t E = router.size(), k = static_cast<size_t>(o.top_k);
  Reference r;
  r.out.assign(x.size(), std::vector<double>(x[0].size(), 0.0));
  r.routed.assign(E, 0);
  std::vector<double> p_sum(E, 0.0);
  for (size_t n = 0; n < x.size(); ++n) {
    const std::vector<double> logits = matvec(router, x[n]);
    std::vector<double> s(E), choice(E);
    if (o.score_func == ScoreFunc::sigmoid) {
      for (size_t e = 0; e < E; ++e) s[e] = 1 / (1 + std::exp(-logits[e]));
    } else {
      const double mx = *std::max_element(logits.begin(), logits.end());
      double z = 0;
      for (size_t e = 0; e < E; ++e) z += s[e] = std::exp(logits[e] - mx);
      for (double& v : s) v /= z;
    }
    const double total = std::accumulate(s.begin(), s.end(), 0.0);
    for (size_t e = 0; e < E; ++e) p_sum[e] += s[e] / total;
    for (size_t e = 0; e < E; ++e) choice[e] = s[e] + (bias.empty() ? 0.0 : bias[e]);
    if (o.n_groups > 0) {
      const size_t G = static_cast<size_t>(o.n_groups), per = E / G;
      std::vector<double> group(G);
      for (size_t g = 0; g < G; ++g) {
        std::vector<double> members(choice.begin() + static_cast<long>(g * per),
                                    choice.begin() + static_cast<long>((g + 1) * per));
        std::sort(members.rbegin(), members.rend());
        group[g] = members[0] + (per > 1 ? members[1] : 0.0);
      }
      std::vector<size_t> order(G);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return group[a] > group[b]; });
      for (size_t j = static_cast<size_t>(o.n_limited_groups); j < G; ++j)
        for (size_t e = order[j] * per; e < (order[j] + 1) * per; ++e)
          choice[e] = -std::numeric_limits<double>::infinity();
    }
    std::vector<size_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return choice[a] > choice[b]; });
    double top = 0;
    for (size_t j = 0; j < k; ++j) top += s[order[j]];
    for (size_t j = 0; j < k; ++j) {
      const size_t e = order[j];
      ++r.routed[e];
      const double gate = (o.route_norm ? s[e] / top : s[e]) * o.route_scale;
      const std::vector<double> y = expert_ref(w.experts[e], o.mlp, x[n]);
      for (size_t c = 0; c < y.size(); ++c) r.out[n][c] += gate * y[c];
    }
    if (w.shared.w_up.defined()) {
      const std::vector<double> y = expert_ref(w.shared, o.mlp, x[n]);
      for (size_t c = 0; c < y.size(); ++c) r.out[n][c] += y[c];
    }
  }
  const auto N = static_cast<double>(x.size());
  for (size_t e = 0; e < E; ++e)
    r.aux += static_cast<double>(E) * static_cast<double>(r.routed[e]) /
             (N * static_cast<double>(k)) * p_sum[e] / N;
  return r;
}

FeedForwardWeights shared_weights(int64_t d, int64_t ff, uint64_t seed, bool requires_grad) {
  auto make = [&](Shape s, uint64_t sd) {
    return requires_grad ? grad_input(s, sd, 0.5) : randn(s, DType::f64, sd, 0.5);
  };
  return {make({ff, d}, seed), make({ff, d}, seed + 1), make({d, ff}, seed + 2), {}, {}, {}};
}

TEST(MoeRouting, DeepSeekOptionsMatchTheF64Reference) {
  const int64_t E = 8, d = 5, ff = 4;
  const Tensor x = randn({11, d}, DType::f64, 70);
  const std::vector<double> bias{0.3, -0.2, 0.05, 0.0, -0.1, 0.25, -0.3, 0.1};
  int cases = 0;
  for (ScoreFunc score : {ScoreFunc::softmax, ScoreFunc::sigmoid})
    for (bool norm : {true, false})
      for (double scale : {1.0, 2.5})
        for (int64_t groups : {0, 4})
          for (bool biased : {false, true})
            for (bool shared : {false, true}) {
              MoeWeights w = random_weights(E, d, ff, MlpKind::swiglu, 71);
              if (shared) w.shared = shared_weights(d, 2 * ff, 90, false);
              if (biased) w.expert_bias = Tensor::from_doubles(bias, {E}, DType::f32);
              MoeOptions o{.top_k = 3, .mlp = MlpKind::swiglu, .score_func = score};
              o.route_norm = norm;
              o.route_scale = scale;
              o.n_groups = groups;
              o.n_limited_groups = groups > 0 ? 2 : 0;
              const MoeOutput got = moe_forward(x, w, o);
              // The bias as the layer holds it: f32.
              std::vector<double> b32;
              if (biased) b32 = w.expert_bias.to_doubles();
              const Reference want = reference(x, w, o, b32);
              const std::string what = "case " + std::to_string(cases);
              EXPECT_EQ(got.stats.routed, want.routed) << what;
              expect_close(got.out, to_tensor(want.out), 1e-12, 1e-12, what);
              EXPECT_NEAR(got.aux_loss.item(), want.aux, 1e-13) << what;
              ++cases;
            }
  EXPECT_EQ(cases, 64);
}

// Router weights 0: every score is σ(0) = 1/2, so the bias alone decides.
TEST(MoeRouting, TheBiasPicksExpertsAndTheGatesIgnoreIt) {
  const int64_t E = 4, d = 3;
  MoeWeights w = random_weights(E, d, 2, MlpKind::gelu, 80);
  w.router = Tensor::zeros({E, d}, DType::f64);
  w.expert_bias = Tensor::from_doubles({0.40, 0.05, 0.30, 0.25}, {E}, DType::f32);
  const Tensor x = randn({6, d}, DType::f64, 81);
  MoeOptions o{.top_k = 2, .mlp = MlpKind::gelu, .score_func = ScoreFunc::sigmoid};
  o.route_norm = false;
  // Experts 0 and 2: the two largest biases.
  const MoeOutput plain = moe_forward(x, w, o);
  EXPECT_EQ(plain.stats.routed, (std::vector<int64_t>{6, 0, 6, 0}));
  // Gates: the unbiased 1/2 each, not 1/2 + bias.
  Matrix want(6, std::vector<double>(d, 0.0));
  const Matrix xs = rows_of(x);
  for (size_t n = 0; n < 6; ++n)
    for (size_t e : {0u, 2u}) {
      const std::vector<double> y = expert_ref(w.experts[e], MlpKind::gelu, xs[n]);
      for (size_t c = 0; c < y.size(); ++c) want[n][c] += 0.5 * y[c];
    }
  expect_close(plain.out, to_tensor(want), 1e-12, 1e-12, "gates 1/2");
  // Two groups {0, 1} and {2, 3}, one per token: {2, 3} ranks 0.55 + 1 against 0.45 + 1.
  o.n_groups = 2;
  o.n_limited_groups = 1;
  EXPECT_EQ(moe_forward(x, w, o).stats.routed, (std::vector<int64_t>{0, 0, 6, 6}));
  // The bias gets no gradient: it is not an input of any differentiable op.
  EXPECT_FALSE(w.expert_bias.requires_grad());
}

// Global-batch balancing: each half of a batch, with counts summed over both halves, gives an
// aux loss whose mean over the halves is the whole batch's loss, and so are the gradients (the
// data-parallel mean of two ranks' gradients is the one-rank gradient).
TEST(MoeRouting, CountsOverBothHalvesMakeTheHalvesAddUpToTheWhole) {
  const int64_t E = 6, d = 4;
  const Tensor x = randn({12, d}, DType::f64, 90);
  const Tensor halves[2] = {x.slice(0, 0, 6).contiguous(), x.slice(0, 6, 12).contiguous()};
  MoeWeights w = random_weights(E, d, 3, MlpKind::swiglu, 91);
  const MoeOptions o{.top_k = 2, .mlp = MlpKind::swiglu};
  auto router_grad = [&](const Tensor& rows, const MoeOptions& opt, double* loss) {
    Tensor router = w.router.detach().clone();
    router.set_requires_grad(true, DType::f64);
    MoeWeights wr = w;
    wr.router = router;
    const MoeOutput m = moe_forward(rows, wr, opt);
    *loss = m.aux_loss.item();
    m.aux_loss.backward();
    return router.grad();
  };
  double whole_loss = 0;
  const Tensor whole_grad = router_grad(x, o, &whole_loss);
  std::vector<int64_t> counts[2];
  for (int h = 0; h < 2; ++h) {
    NoGradGuard no_grad;
    counts[h] = moe_forward(halves[h], w, o).stats.routed;
    counts[h].push_back(6 * 2);
  }
  double loss[2];
  Tensor grad[2];
  for (int h = 0; h < 2; ++h) {
    MoeOptions global = o;
    global.global_counts = [&, h](std::vector<int64_t>& c) {
      ASSERT_EQ(c, counts[h]);  // this half's own counts and assignments
      for (std::size_t i = 0; i < c.size(); ++i) c[i] += counts[1 - h][i];
    };
    grad[h] = router_grad(halves[h], global, &loss[h]);
  }
  EXPECT_NEAR((loss[0] + loss[1]) / 2, whole_loss, 1e-14);
  expect_close(scale(add(grad[0], grad[1]), 0.5), whole_grad, 1e-13, 1e-14, "router gradient");
  // Each half alone (per-rank balancing) is another objective.
  double local[2];
  for (int h = 0; h < 2; ++h) router_grad(halves[h], o, &local[h]);
  EXPECT_GT(std::abs((local[0] + local[1]) / 2 - whole_loss), 1e-6);
}

TEST(MoeRouting, GradcheckF64WithEveryOption) {
  for (ScoreFunc score : {ScoreFunc::softmax, ScoreFunc::sigmoid}) {
    const int64_t E = 4, d = 3, ff = 2;
    const MoeWeights w0 = random_weights(E, d, ff, MlpKind::swiglu, 95, /*requires_grad=*/true);
    const FeedForwardWeights s0 = shared_weights(d, 3, 96, true);
    std::vector<Tensor> inputs{grad_input({5, d}, 97), w0.router, s0.w_gate, s0.w_up, s0.w_down};
    for (const FeedForwardWeights& f : w0.experts) {
      inputs.push_back(f.w_gate);
      inputs.push_back(f.w_up);
      inputs.push_back(f.w_down);
    }
    const Tensor bias = Tensor::from_doubles({0.1, -0.05, 0.0, 0.02}, {E}, DType::f32);
    auto fn = [&](const std::vector<Tensor>& in) {
      MoeWeights w;
      w.router = in[1];
      w.shared = {in[2], in[3], in[4], {}, {}, {}};
      w.expert_bias = bias;
      for (std::size_t i = 5; i < in.size(); i += 3)
        w.experts.push_back({in[i], in[i + 1], in[i + 2], {}, {}, {}});
      MoeOptions o{.top_k = 2, .mlp = MlpKind::swiglu, .score_func = score};
      o.route_scale = 1.7;
      o.n_groups = 2;
      o.n_limited_groups = 1;
      const MoeOutput m = moe_forward(in[0], w, o);
      return concat({m.out.reshape({-1}), m.aux_loss.reshape({1}), m.z_loss.reshape({1})}, 0);
    };
    expect_gradcheck(fn, inputs, "moe routing", 1e-6, 1e-7, 1e-5);
  }
}

}  // namespace
}  // namespace mixprec::models
