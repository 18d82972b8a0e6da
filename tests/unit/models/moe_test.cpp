// The MoE layer against an f64 dense reference (every expert on every token, masked by the
// gates), capacity dropping by hand, the Switch and z losses by hand, and a gradcheck.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

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

// out[n] = Σ_e mask[n][e] · gate[n][e] · expert_e(x[n]), every expert run on every token;
// capacity (0 = none) drops assignments in token order.
// `aux`, when given, receives the Switch loss E · Σ_e f_e · P_e (f_e counted before dropping).
Matrix dense_reference(const Tensor& x_t, const MoeWeights& w, int64_t k, MlpKind kind,
                       int64_t capacity = 0, double* aux = nullptr) {
  const Matrix x = rows_of(x_t), router = rows_of(w.router);
  const size_t E = router.size();
  Matrix out(x.size(), std::vector<double>(x[0].size(), 0.0));
  std::vector<int64_t> used(E, 0);
  std::vector<double> routed(E, 0.0), prob_sum(E, 0.0);
  for (size_t n = 0; n < x.size(); ++n) {
    const std::vector<double> logits = matvec(router, x[n]);
    const double mx = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(E);
    double z = 0;
    for (size_t e = 0; e < E; ++e) z += p[e] = std::exp(logits[e] - mx);
    for (double& v : p) v /= z;
    for (size_t e = 0; e < E; ++e) prob_sum[e] += p[e];
    std::vector<size_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
    double top_sum = 0;
    for (int64_t j = 0; j < k; ++j) top_sum += p[order[static_cast<size_t>(j)]];
    std::vector<double> gate_mask(E, 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const size_t e = order[static_cast<size_t>(j)];
      ++routed[e];
      if (capacity > 0 && used[e] >= capacity) continue;
      ++used[e];
      gate_mask[e] = p[e] / top_sum;
    }
    for (size_t e = 0; e < E; ++e) {
      const std::vector<double> y = expert_ref(w.experts[e], kind, x[n]);
      for (size_t c = 0; c < y.size(); ++c) out[n][c] += gate_mask[e] * y[c];
    }
  }
  if (aux) {
    const auto N = static_cast<double>(x.size());
    *aux = 0;
    for (size_t e = 0; e < E; ++e)
      *aux += static_cast<double>(E) * routed[e] / (N * static_cast<double>(k)) * prob_sum[e] / N;
  }
  return out;
}

TEST(Moe, SparseDispatchMatchesDenseF64Reference) {
  for (MlpKind kind : {MlpKind::swiglu, MlpKind::gelu}) {
    for (int64_t k : {1, 2, 3}) {
      const MoeWeights w = random_weights(4, 5, 6, kind, 100 + static_cast<uint64_t>(k));
      const Tensor x = randn({9, 5}, DType::f64, 7);
      const MoeOutput o = moe_forward(x, w, {k, 0.0, kind});
      EXPECT_EQ(o.out.dtype(), DType::f64);
      EXPECT_EQ(o.stats.dropped, 0);
      double aux = 0;
      expect_close(o.out, to_tensor(dense_reference(x, w, k, kind, 0, &aux)), 1e-12, 1e-12,
                   "k=" + std::to_string(k));
      EXPECT_NEAR(o.aux_loss.item(), aux, 1e-14);
    }
  }
}

TEST(Moe, CapacityDropsInTokenOrderByHand) {
  // 5 tokens, top-2 of 4 experts, factor 1: capacity = ceil(1 · 5 · 2 / 4) = 3.
  const Tensor ids = Tensor::from_vector<int64_t>({0, 1, 0, 2, 0, 1, 0, 3, 1, 0}, {5, 2});
  const RoutingPlan plan = plan_routing(ids, 4, 1.0);
  EXPECT_EQ(plan.stats.capacity, 3);
  EXPECT_EQ(plan.stats.routed, (std::vector<int64_t>{5, 3, 1, 1}));
  EXPECT_EQ(plan.stats.kept, (std::vector<int64_t>{3, 3, 1, 1}));
  EXPECT_EQ(plan.stats.dropped, 2);  // token 3's slot 0 and token 4's slot 1 (expert 0 full)
  EXPECT_EQ(plan.tokens[0], (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(plan.slots[0], (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(plan.tokens[1], (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(plan.slots[1], (std::vector<int64_t>{1, 5, 8}));
  EXPECT_EQ(plan.tokens[3], (std::vector<int64_t>{3}));
  EXPECT_EQ(expert_capacity(5, 2, 4, 0.0), 10);  // no limit
  EXPECT_EQ(expert_capacity(8, 2, 4, 1.25), 5);
  EXPECT_THROW(plan_routing(Tensor::from_vector<int64_t>({0, 4}, {1, 2}), 4, 0.0), Error);
}

TEST(Moe, CapacityOutputMatchesReferenceWithDrops) {
  const MlpKind kind = MlpKind::swiglu;
  const MoeWeights w = random_weights(3, 4, 5, kind, 300);
  const Tensor x = randn({12, 4}, DType::f64, 301);
  const MoeOutput o = moe_forward(x, w, {2, 0.5, kind});  // capacity ceil(0.5·24/3) = 4
  EXPECT_EQ(o.stats.capacity, 4);
  EXPECT_GT(o.stats.dropped, 0);
  const int64_t kept = std::accumulate(o.stats.kept.begin(), o.stats.kept.end(), int64_t{0});
  EXPECT_EQ(kept + o.stats.dropped, 24);
  double aux = 0;
  expect_close(o.out, to_tensor(dense_reference(x, w, 2, kind, 4, &aux)), 1e-12, 1e-12, "capacity");
  EXPECT_NEAR(o.aux_loss.item(), aux, 1e-14);  // f counts assignments before dropping
}

// x = rows of the identity (scaled), router = c·I: token n prefers expert n.
TEST(Moe, SwitchAuxLossIsOneWhenBalancedAndLargerWhenNot) {
  const double c = 2.0;
  MoeWeights w = random_weights(4, 4, 3, MlpKind::gelu, 400);
  std::vector<double> eye(16, 0.0);
  for (int i = 0; i < 4; ++i) eye[static_cast<size_t>(i * 5)] = c;
  w.router = Tensor::from_doubles(eye, {4, 4}, DType::f64);
  std::vector<double> xb(16, 0.0), xu(16, 0.0);
  for (int i = 0; i < 4; ++i) {
    xb[static_cast<size_t>(i * 5)] = 1.0;  // token i -> expert i
    xu[static_cast<size_t>(i * 4)] = 1.0;  // every token -> expert 0
  }
  const MoeOutput balanced =
      moe_forward(Tensor::from_doubles(xb, {4, 4}, DType::f64), w, {1, 0.0, MlpKind::gelu});
  EXPECT_NEAR(balanced.aux_loss.item(), 1.0, 1e-14);
  const MoeOutput skewed =
      moe_forward(Tensor::from_doubles(xu, {4, 4}, DType::f64), w, {1, 0.0, MlpKind::gelu});
  // f = (1, 0, 0, 0), P_0 = e^c / (e^c + 3): aux = 4 · P_0.
  const double p0 = std::exp(c) / (std::exp(c) + 3);
  EXPECT_NEAR(skewed.aux_loss.item(), 4 * p0, 1e-14);
  EXPECT_GT(skewed.aux_loss.item(), 2.0);
  EXPECT_EQ(skewed.stats.routed, (std::vector<int64_t>{4, 0, 0, 0}));
}

TEST(Moe, RouterZLossByHand) {
  MoeWeights w = random_weights(3, 2, 3, MlpKind::gelu, 500);
  w.router = Tensor::from_doubles({1, 0, 0, 2, 0, 0}, {3, 2}, DType::f64);
  const Tensor x = Tensor::from_doubles({1, 0, 0, 1}, {2, 2}, DType::f64);
  const MoeOutput o = moe_forward(x, w, {1, 0.0, MlpKind::gelu});
  // logits [1, 0, 0] and [0, 2, 0]
  const double l0 = std::log(std::exp(1.0) + 2), l1 = std::log(std::exp(2.0) + 2);
  EXPECT_NEAR(o.z_loss.item(), (l0 * l0 + l1 * l1) / 2, 1e-14);
  // And in f32: the same within f32 rounding.
  MoeWeights w32 = w;
  w32.router = w.router.to(DType::f32);
  for (FeedForwardWeights& f : w32.experts) {
    f.w_up = f.w_up.to(DType::f32);
    f.w_down = f.w_down.to(DType::f32);
  }
  const MoeOutput o32 = moe_forward(x.to(DType::f32), w32, {1, 0.0, MlpKind::gelu});
  EXPECT_EQ(o32.z_loss.dtype(), DType::f32);
  EXPECT_NEAR(o32.z_loss.item(), (l0 * l0 + l1 * l1) / 2, 1e-5);
}

TEST(Moe, GradcheckF64) {
  for (MlpKind kind : {MlpKind::swiglu, MlpKind::gelu}) {
    for (double capacity_factor : {0.0, 1.0}) {
      const int64_t E = 3;
      const MoeWeights w0 = random_weights(E, 3, 4, kind, 600, /*requires_grad=*/true);
      std::vector<Tensor> inputs{grad_input({5, 3}, 601), w0.router};
      for (const FeedForwardWeights& f : w0.experts) {
        if (f.w_gate.defined()) inputs.push_back(f.w_gate);
        inputs.push_back(f.w_up);
        inputs.push_back(f.w_down);
      }
      auto fn = [&](const std::vector<Tensor>& in) {
        MoeWeights w;
        w.router = in[1];
        size_t i = 2;
        for (int64_t e = 0; e < E; ++e) {
          FeedForwardWeights f;
          if (kind == MlpKind::swiglu) f.w_gate = in[i++];
          f.w_up = in[i++];
          f.w_down = in[i++];
          w.experts.push_back(f);
        }
        const MoeOutput o = moe_forward(in[0], w, {2, capacity_factor, kind});
        return concat({o.out.reshape({-1}), o.aux_loss.reshape({1}), o.z_loss.reshape({1})}, 0);
      };
      expect_gradcheck(fn, inputs, "moe", 1e-6, 1e-7, 1e-5);
    }
  }
}

}  // namespace
}  // namespace mixprec::models
