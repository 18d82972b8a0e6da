// The MoE layer's fused row dispatch/combine and its narrow-input router under bf16 autocast:
// forward and gradients against the same layer written with plain ops (gather rows, expert
// MLP, gate, index_add; router = linear on the f32-widened input), and the same bits with one
// and two threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/core/parallel.h"
#include "mixprec/models/transformer/moe.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec::models {
namespace {

using mixprec::testing::randn;

struct Layer {
  Tensor x;  // [N, d] bf16, requires grad
  MoeWeights w;
};

Layer make_layer(int64_t n, int64_t d, int64_t ff, int64_t experts) {
  Layer l;
  l.x = randn({n, d}, DType::bf16, 1, 1.0).set_requires_grad(true, DType::bf16);
  l.w.router = randn({experts, d}, DType::bf16, 2, 0.5).set_requires_grad(true, DType::f32);
  for (int64_t e = 0; e < experts; ++e) {
    FeedForwardWeights f;
    const auto s = 10 + 3 * static_cast<uint64_t>(e);
    f.w_up = randn({ff, d}, DType::bf16, s, 0.3).set_requires_grad(true, DType::f32);
    f.w_down = randn({d, ff}, DType::bf16, s + 1, 0.3).set_requires_grad(true, DType::f32);
    l.w.experts.push_back(f);
  }
  return l;
}

void clear_grads(Layer& l) {
  l.x.set_grad(Tensor());
  l.w.router.set_grad(Tensor());
  for (auto& f : l.w.experts) {
    f.w_up.set_grad(Tensor());
    f.w_down.set_grad(Tensor());
  }
}

// The layer with the plain ops moe_forward used before its fused dispatch (top-k routing
// given by `ids`, gates by `gates`).
Tensor reference_out(const Layer& l, const Tensor& gates, const Tensor& ids, int64_t k) {
  const int64_t n = l.x.size(0), d = l.x.size(1);
  const std::vector<double> e_of = ids.to_doubles();
  Tensor out = Tensor::zeros({n, d}, DType::f32);
  const Tensor gflat = gates.reshape({n * k});
  for (int64_t e = 0; e < static_cast<int64_t>(l.w.experts.size()); ++e) {
    std::vector<int64_t> tokens, slots;
    for (int64_t s = 0; s < n * k; ++s)
      if (static_cast<int64_t>(e_of[static_cast<size_t>(s)]) == e) {
        tokens.push_back(s / k);
        slots.push_back(s);
      }
    if (tokens.empty()) continue;
    std::vector<int64_t> rows;
    for (int64_t t : tokens)
      for (int64_t c = 0; c < d; ++c) rows.push_back(t);
    const Tensor xe = gather(l.x, 0, Tensor::from_vector(rows, {int64_t(tokens.size()), d}));
    const Tensor he = feed_forward(xe, l.w.experts[static_cast<size_t>(e)], MlpKind::gelu);
    const Tensor ge = gather(gflat, 0, Tensor::from_vector(slots)).unsqueeze(1);
    out = index_add(out, 0, Tensor::from_vector(tokens), mul(he, ge).to(DType::f32));
  }
  return out.to(l.x.dtype());
}

TEST(MoeDispatch, MatchesPlainOpsUnderBf16Autocast) {
  const int64_t n = 96, d = 32, ff = 48, experts = 4, k = 2;
  Layer l = make_layer(n, d, ff, experts);
  const Tensor probe = randn({n, d}, DType::f32, 7);  // loss = <out, probe>
  amp::AutocastGuard autocast(DType::bf16);
  const MoeOutput m = moe_forward(l.x, l.w, {k, 0.0, MlpKind::gelu});
  // The router read the bf16 input itself: logits equal linear on the widened input.
  const Tensor logits_ref = [&] {
    amp::AutocastGuard off(DType::f32);
    return linear(l.x.to(DType::f32), l.w.router.to(DType::f32));
  }();
  testing::expect_close(m.router_logits, logits_ref, 1e-6, 1e-6, "router logits");
  sum(mul(m.out.to(DType::f32), probe)).backward();
  const std::vector<double> dx = l.x.grad().to_doubles(), dr = l.w.router.grad().to_doubles();
  const std::vector<double> dup = l.w.experts[1].w_up.grad().to_doubles();
  clear_grads(l);
  // Same routing, plain ops: gates and ids recomputed by the same router ops.
  const Tensor probs = softmax(logits_ref, -1);
  auto [values, ids] = topk(probs, k, -1);
  const Tensor gates = div(values, sum(values, -1, true));
  const Tensor ref = reference_out(l, gates, ids, k);
  testing::expect_close(m.out, ref, 1e-2, 1e-2, "out");  // bf16 outputs: a rounding flip at most
  sum(mul(ref.to(DType::f32), probe)).backward();
  testing::expect_close(Tensor::from_doubles(dx, {n, d}, DType::f64), l.x.grad().to(DType::f64),
                        2e-2, 2e-2, "dx");
  testing::expect_close(Tensor::from_doubles(dr, {experts, d}, DType::f64),
                        l.w.router.grad().to(DType::f64), 1e-3, 1e-3, "drouter");
  testing::expect_close(Tensor::from_doubles(dup, {ff, d}, DType::f64),
                        l.w.experts[1].w_up.grad().to(DType::f64), 1e-3, 1e-3, "dw_up");
}

TEST(MoeDispatch, SameBitsWithOneAndTwoThreads) {
  const int64_t n = 300, d = 64, ff = 96, experts = 4, k = 2;
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2}) {
    const int saved = num_threads();
    set_num_threads(threads);
    Layer l = make_layer(n, d, ff, experts);
    {
      amp::AutocastGuard autocast(DType::bf16);
      const MoeOutput m = moe_forward(l.x, l.w, {k, 0.0, MlpKind::gelu});
      sum(m.out.to(DType::f32)).backward();
      std::vector<double> r = m.out.to_doubles();
      for (const Tensor& g : {l.x.grad(), l.w.router.grad(), l.w.experts[0].w_down.grad()}) {
        const std::vector<double> v = g.to_doubles();
        r.insert(r.end(), v.begin(), v.end());
      }
      results.push_back(r);
    }
    set_num_threads(saved);
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  EXPECT_EQ(std::memcmp(results[0].data(), results[1].data(), results[0].size() * 8), 0);
}

}  // namespace
}  // namespace mixprec::models
