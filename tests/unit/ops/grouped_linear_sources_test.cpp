// grouped_linear over several weight sources in one call, 2-d and 3-d mixed (an MoE layer's
// stacked routed experts beside its shared experts' plain weights), against the per-group
// vector overload given each group's weight (slice): the same outputs, input gradients and
// gradient slices bit for bit; one gradient per source tensor; zero slices for stacked groups
// without rows or gradient; 1 and 2 threads; bf16 autocast with fp32 modules; an f64
// finite-difference check; errors naming the source.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/node.h"
#include "mixprec/ops.h"
#include "mixprec/ops/grouped_linear.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

// A source as the test builds it: its shape, and each of its groups' x rows.
struct SourceSpec {
  int64_t stack;  // 0: a 2-d weight; G > 0: a 3-d [G, Out, In] one
  int64_t out, in;
  std::vector<Shape> rows;  // one per group
};

// Stacked A (a 0-row group), plain B of another width, stacked C whose first group holds over
// half the work (run split over the threads), plain D with 0 rows.
const std::vector<SourceSpec> kSpecs = {{3, 48, 64, {{37}, {0}, {2, 5}}},
                                        {0, 40, 64, {{90}}},
                                        {2, 24, 32, {{700}, {1}}},
                                        {0, 24, 32, {{0}}}};

struct Case {
  std::vector<GroupedWeight> sources;  // leaves
  std::vector<Tensor> xs, ref_xs;      // one leaf set per overload, equal values
  std::vector<Tensor> ws, bs;          // per group: its weight (slice) and bias as leaves
  std::vector<std::string> scopes;
  std::vector<std::size_t> source_of;  // per group
  std::vector<int64_t> slice_of;       // per group: its index in a stacked source, -1 for 2-d
};

Case make_case(DType dt, bool with_bias, uint64_t seed) {
  Case c;
  for (std::size_t s = 0; s < kSpecs.size(); ++s) {
    const SourceSpec& spec = kSpecs[s];
    const uint64_t at = seed + 100 * s;
    GroupedWeight src;
    const Shape ws = spec.stack ? Shape{spec.stack, spec.out, spec.in} : Shape{spec.out, spec.in};
    const Shape bs = spec.stack ? Shape{spec.stack, spec.out} : Shape{spec.out};
    src.weight = randn(ws, dt, at, 0.2).set_requires_grad();
    if (with_bias) src.bias = randn(bs, dt, at + 1).set_requires_grad();
    for (std::size_t i = 0; i < spec.rows.size(); ++i) {
      const auto slice = static_cast<int64_t>(i);
      Shape xs = spec.rows[i];
      xs.push_back(spec.in);
      const Tensor x = randn(xs, dt, at + 10 + i);
      c.xs.push_back(x.clone().set_requires_grad());
      c.ref_xs.push_back(x.clone().set_requires_grad());
      const Tensor w = spec.stack ? src.weight.detach().select(0, slice) : src.weight.detach();
      c.ws.push_back(w.clone().set_requires_grad());
      if (with_bias) {
        const Tensor b = spec.stack ? src.bias.detach().select(0, slice) : src.bias.detach();
        c.bs.push_back(b.clone().set_requires_grad());
      } else {
        c.bs.emplace_back();
      }
      c.scopes.push_back("experts." + std::to_string(c.scopes.size()));
      c.source_of.push_back(s);
      c.slice_of.push_back(spec.stack ? slice : -1);
    }
    c.sources.push_back(src);
  }
  return c;
}

void clear_grads(Case& c) {
  std::vector<Tensor*> all;
  for (GroupedWeight& s : c.sources) all.insert(all.end(), {&s.weight, &s.bias});
  for (auto* list : {&c.xs, &c.ref_xs, &c.ws, &c.bs})
    for (Tensor& t : *list) all.push_back(&t);
  for (Tensor* t : all)
    if (t->defined()) t->set_grad(Tensor());
}

// backward of the sum over the groups in `loss_groups` (all when empty) of sum(y_g * r_g).
void backward(const std::vector<Tensor>& ys, const std::vector<std::size_t>& loss_groups) {
  Tensor loss;
  for (std::size_t g = 0; g < ys.size(); ++g) {
    if (!loss_groups.empty() &&
        std::find(loss_groups.begin(), loss_groups.end(), g) == loss_groups.end())
      continue;
    const Tensor term = sum(mul(ys[g].to(DType::f32), randn(ys[g].shape(), DType::f32, 900 + g)));
    loss = loss.defined() ? add(loss, term) : term;
  }
  loss.backward();
}

struct Result {
  std::vector<Tensor> ys, dxs;
  std::vector<Tensor> dw, db;  // sources: one per source; vector: one per group
};

Result run_sources(Case& c, const std::vector<std::size_t>& loss_groups = {}) {
  clear_grads(c);
  Result r;
  r.ys = grouped_linear(c.xs, c.sources, c.scopes);
  backward(r.ys, loss_groups);
  for (const Tensor& x : c.xs) r.dxs.push_back(x.grad());
  for (const GroupedWeight& s : c.sources) {
    r.dw.push_back(s.weight.grad());
    r.db.push_back(s.bias.defined() ? s.bias.grad() : Tensor());
  }
  return r;
}

Result run_vector(Case& c, const std::vector<std::size_t>& loss_groups = {}) {
  clear_grads(c);
  Result r;
  r.ys = grouped_linear(c.ref_xs, c.ws, c.bs, c.scopes);
  backward(r.ys, loss_groups);
  for (std::size_t g = 0; g < c.xs.size(); ++g) {
    r.dxs.push_back(c.ref_xs[g].grad());
    r.dw.push_back(c.ws[g].grad());
    r.db.push_back(c.bs[g].defined() ? c.bs[g].grad() : Tensor());
  }
  return r;
}

bool all_plus_zero(const Tensor& t) {
  const std::vector<double> v = t.to_doubles();
  return std::all_of(v.begin(), v.end(), [](double x) { return x == 0 && !std::signbit(x); });
}

// A source's gradient for group g against the vector overload's for that group: the same bits
// (its slice for a stacked source), or, when the group got none, a zero slice (stacked) or
// none (2-d).
void expect_grad(const Tensor& source_grad, int64_t slice, const Tensor& group_grad,
                 const std::string& what) {
  if (slice < 0) {
    ASSERT_EQ(source_grad.defined(), group_grad.defined()) << what;
    if (group_grad.defined()) {
      EXPECT_TRUE(same_bits(source_grad, group_grad)) << what;
    }
    return;
  }
  ASSERT_TRUE(source_grad.defined()) << what << ": a stacked source always gets its gradient";
  const Tensor part = source_grad.select(0, slice);
  if (group_grad.defined()) {
    EXPECT_EQ(source_grad.dtype(), group_grad.dtype()) << what;
    EXPECT_TRUE(same_bits(part, group_grad)) << what;
  } else {
    EXPECT_TRUE(all_plus_zero(part)) << what << ": no gradient, so a zero slice";
  }
}

void expect_same(const Case& c, const Result& s, const Result& v, const std::string& what) {
  ASSERT_EQ(s.ys.size(), v.ys.size()) << what;
  for (std::size_t g = 0; g < s.ys.size(); ++g) {
    const std::string at = what + ", group " + std::to_string(g);
    EXPECT_TRUE(same_bits(s.ys[g], v.ys[g])) << at << ": y";
    ASSERT_EQ(s.dxs[g].defined(), v.dxs[g].defined()) << at << ": dx";
    if (s.dxs[g].defined()) {
      EXPECT_TRUE(same_bits(s.dxs[g], v.dxs[g])) << at << ": dx";
    }
    const std::size_t src = c.source_of[g];
    expect_grad(s.dw[src], c.slice_of[g], v.dw[g], at + ": dw");
    if (c.sources[src].bias.defined()) expect_grad(s.db[src], c.slice_of[g], v.db[g], at + ": db");
  }
}

TEST(GroupedLinearSources, MixedStackedAndPlainEqualThePerGroupOverloadBitForBit) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (bool with_bias : {true, false}) {
      Case c = make_case(dt, with_bias, 3);
      const std::string what = std::string(dtype_name(dt)) + (with_bias ? " with bias" : "");
      expect_same(c, run_sources(c), run_vector(c), what);
    }
}

TEST(GroupedLinearSources, GroupsOutsideTheLossAndWithoutRows) {
  Case c = make_case(DType::f32, true, 5);
  // Poison the allocator's free blocks so a skipped zero fill shows.
  for (int i = 0; i < 4; ++i) (void)Tensor::full({1 << 16}, -3.0);
  // Groups 0 (stacked A) and 4 (stacked C's second) and 3 (plain B) out of the loss.
  const std::vector<std::size_t> loss = {1, 2, 5, 6};
  expect_same(c, run_sources(c, loss), run_vector(c, loss), "groups 0, 3, 4 outside the loss");
}

TEST(GroupedLinearSources, Bf16AutocastWithFp32ModulesCastsEachStackOncePerDtype) {
  Case c = make_case(DType::f32, true, 7);
  amp::AutocastOptions options;
  options.fp32_modules = {"experts.2", "experts.3"};  // a stacked group (A's last) and plain B
  const amp::AutocastGuard autocast(DType::bf16, options);
  const std::vector<Tensor> ys = grouped_linear(c.xs, c.sources, c.scopes);
  for (std::size_t g = 0; g < ys.size(); ++g)
    EXPECT_EQ(ys[g].dtype(), g == 2 || g == 3 ? DType::f32 : DType::bf16) << g;
  // Edges: 7 xs; weights: A twice (bf16 cast, f32 master), B, C once, D: 5; biases the same.
  EXPECT_EQ(ys[0].grad_fn()->next_edges().size(), 7u + 2 * 5u);
  EXPECT_EQ(ys[0].grad_fn(), ys[6].grad_fn());
  const Result s = run_sources(c), v = run_vector(c);
  for (const Tensor& dw : s.dw) EXPECT_EQ(dw.dtype(), DType::f32);
  expect_same(c, s, v, "bf16 autocast, experts.2 and experts.3 in f32");
}

TEST(GroupedLinearSources, SameBitsAtOneAndTwoThreads) {
  for (DType dt : {DType::f32, DType::bf16}) {
    Case c = make_case(dt, true, 4);
    const Result one = with_threads(1, [&] { return run_sources(c); });
    const Result two = with_threads(2, [&] { return run_sources(c); });
    expect_same(c, one, with_threads(2, [&] { return run_vector(c); }), "1 thread");
    for (std::size_t s = 0; s < c.sources.size(); ++s)
      EXPECT_TRUE(same_bits(one.dw[s], two.dw[s]) && same_bits(one.db[s], two.db[s])) << s;
    for (std::size_t g = 0; g < one.ys.size(); ++g)
      EXPECT_TRUE(same_bits(one.ys[g], two.ys[g]) && same_bits(one.dxs[g], two.dxs[g])) << g;
  }
}

TEST(GroupedLinearSources, F64GradCheck) {
  // Stacked [2, 2, 3] (groups of 2 and 0 rows), plain [4, 3] (3 rows), stacked [1, 2, 3].
  std::vector<Tensor> inputs = {grad_input({2, 3}, 20), grad_input({0, 3}, 21),
                                grad_input({3, 3}, 22), grad_input({1, 2, 3}, 23)};
  inputs.push_back(grad_input({2, 2, 3}, 30, 0.5));
  inputs.push_back(grad_input({2, 2}, 31));
  inputs.push_back(grad_input({4, 3}, 32, 0.5));
  inputs.push_back(grad_input({1, 2, 3}, 34, 0.5));
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        const std::vector<Tensor> xs(in.begin(), in.begin() + 4);
        const std::vector<GroupedWeight> sources = {{in[4], in[5]}, {in[6], {}}, {in[7], {}}};
        std::vector<Tensor> flat;
        for (const Tensor& y : grouped_linear(xs, sources)) flat.push_back(y.reshape({-1}));
        return concat(flat, 0);
      },
      inputs, "grouped_linear over mixed sources");
}

TEST(GroupedLinearSources, BadSourcesNameTheSource) {
  Case c = make_case(DType::f32, true, 9);
  auto expect_error = [](const std::string& e, const std::vector<std::string>& parts) {
    ASSERT_FALSE(e.empty()) << "no mixprec::Error";
    for (const std::string& p : parts) EXPECT_NE(e.find(p), std::string::npos) << e;
  };
  std::vector<GroupedWeight> sources = c.sources;
  sources[1].weight = randn({2, 40, 64, 1}, DType::f32, 1);
  expect_error(error_of([&] { grouped_linear(c.xs, sources); }),
               {"grouped_linear", "sources[1]", "2-d", "3-d", "[2, 40, 64, 1]"});
  sources = c.sources;
  sources[2].bias = randn({24}, DType::f32, 1);
  expect_error(error_of([&] { grouped_linear(c.xs, sources); }),
               {"grouped_linear", "bias must be [2, 24]", "sources[2] [2, 24, 32]", "got [24]"});
  expect_error(error_of([&] {
                 grouped_linear({c.xs.begin(), c.xs.end() - 1}, c.sources);
               }),
               {"grouped_linear", "stack 7 groups", "xs holds 6"});
  std::vector<Tensor> xs = c.xs;
  xs[5] = randn({3, 64}, DType::f32, 1);
  expect_error(error_of([&] { grouped_linear(xs, c.sources); }),
               {"grouped_linear", "xs[5] [3, 64]", "sources[2] [2, 24, 32]", "[..., 32]"});
  // The per-group overload takes 2-d weights only.
  std::vector<Tensor> ws = c.ws;
  ws[0] = c.sources[0].weight;
  expect_error(error_of([&] { grouped_linear(c.xs, ws); }),
               {"grouped_linear", "weights[0]", "2-d", "[3, 48, 64]"});
}

}  // namespace
}  // namespace mixprec
