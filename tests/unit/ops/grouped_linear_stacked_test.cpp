// grouped_linear over a stacked weight [G, Out, In] against the vector overload given the
// slices weight[g]: the same outputs and input gradients bit for bit, each slice of the one
// weight (and bias) gradient equal to that group's gradient, zero slices for groups with no
// rows or no gradient (dtypes, matmul precisions, autocast with per-group scopes, G = 1, 1 and
// 2 threads, both GEMM paths); an f64 finite-difference check; errors naming the argument.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/policy.h"
#include "mixprec/autograd/node.h"
#include "mixprec/ops.h"
#include "mixprec/ops/grouped_linear.h"
#include "support/op_testing.h"
#include "support/own_gemm_path.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

// One stacked weight (and bias) and its slices as separate leaves: the vector overload's view.
struct Case {
  std::vector<Tensor> xs, ref_xs;  // leaves of equal values, one set per overload
  Tensor weight, bias;             // [G, Out, In], [G, Out] (bias may be undefined)
  std::vector<Tensor> ws, bs;      // weight[g], bias[g] as leaves
  std::vector<std::string> scopes;
};

// rows: each group's x shape minus In. Like an MoE layer's experts: empty, one row, a 3-d x,
// and one dominant group (over half the work: its products run split over the threads).
const std::vector<Shape> kRows = {{37}, {0}, {1}, {2, 5}, {90}, {700}};

Case make_case(DType dt, bool with_bias, const std::vector<Shape>& rows, uint64_t seed,
               int64_t in = 64, int64_t out = 48) {
  Case c;
  const auto groups = static_cast<int64_t>(rows.size());
  c.weight = randn({groups, out, in}, dt, seed, 0.2).set_requires_grad();
  if (with_bias) c.bias = randn({groups, out}, dt, seed + 1).set_requires_grad();
  for (int64_t g = 0; g < groups; ++g) {
    Shape xs = rows[static_cast<std::size_t>(g)];
    xs.push_back(in);
    const Tensor x = randn(xs, dt, seed + 10 + static_cast<uint64_t>(g));
    c.xs.push_back(x.clone().set_requires_grad());
    c.ref_xs.push_back(x.clone().set_requires_grad());
    c.ws.push_back(c.weight.detach().select(0, g).clone().set_requires_grad());
    c.bs.push_back(with_bias ? c.bias.detach().select(0, g).clone().set_requires_grad() : Tensor());
    c.scopes.push_back("experts." + std::to_string(g));
  }
  return c;
}

void clear_grads(Case& c) {
  std::vector<Tensor*> all = {&c.weight, &c.bias};
  for (auto* list : {&c.xs, &c.ref_xs, &c.ws, &c.bs})
    for (Tensor& t : *list) all.push_back(&t);
  for (Tensor* t : all)
    if (t->defined()) t->set_grad(Tensor());
}

// backward of sum over the groups in `loss_groups` (all when empty) of sum(y_g * r_g).
void backward(const std::vector<Tensor>& ys, const std::vector<std::size_t>& loss_groups) {
  Tensor loss;
  for (std::size_t g = 0; g < ys.size(); ++g) {
    if (!loss_groups.empty() &&
        std::find(loss_groups.begin(), loss_groups.end(), g) == loss_groups.end())
      continue;
    const Tensor r = randn(ys[g].shape(), DType::f32, 900 + g);
    const Tensor term = sum(mul(ys[g].to(DType::f32), r));
    loss = loss.defined() ? add(loss, term) : term;
  }
  loss.backward();
}

struct Result {
  std::vector<Tensor> ys, dxs;
  Tensor dw, db;  // stacked: one tensor each; per group: the slices stacked for comparison
  std::vector<Tensor> dws, dbs;
};

Result run_stacked(Case& c, const std::vector<std::size_t>& loss_groups = {}) {
  clear_grads(c);
  Result r;
  r.ys = grouped_linear(c.xs, c.weight, c.bias, c.scopes);
  backward(r.ys, loss_groups);
  for (const Tensor& x : c.xs) r.dxs.push_back(x.grad());
  r.dw = c.weight.grad();
  r.db = c.bias.defined() ? c.bias.grad() : Tensor();
  return r;
}

Result run_vector(Case& c, const std::vector<std::size_t>& loss_groups = {}) {
  clear_grads(c);
  Result r;
  r.ys = grouped_linear(c.ref_xs, c.ws, c.bs, c.scopes);
  backward(r.ys, loss_groups);
  for (std::size_t g = 0; g < c.xs.size(); ++g) {
    r.dxs.push_back(c.ref_xs[g].grad());
    r.dws.push_back(c.ws[g].grad());
    r.dbs.push_back(c.bs[g].defined() ? c.bs[g].grad() : Tensor());
  }
  return r;
}

void expect_zero(const Tensor& t, const std::string& what) {
  for (double v : t.to_doubles()) {
    EXPECT_TRUE(v == 0 && !std::signbit(v)) << what << " holds " << v;
    if (v != 0 || std::signbit(v)) return;
  }
}

// A slice of the stacked gradient against the vector overload's gradient of that group
// (undefined: the group got none, so its slice must be +0).
void expect_slice(const Tensor& stacked, int64_t g, const Tensor& per_group,
                  const std::string& what) {
  const Tensor slice = stacked.select(0, g);
  if (per_group.defined()) {
    EXPECT_TRUE(same_bits(slice, per_group)) << what;
  } else {
    expect_zero(slice, what + " (no gradient: zero slice)");
  }
}

void expect_same(const Result& s, const Result& v, const std::string& what) {
  ASSERT_EQ(s.ys.size(), v.ys.size()) << what;
  ASSERT_TRUE(s.dw.defined()) << what;
  const auto groups = static_cast<int64_t>(s.ys.size());
  ASSERT_EQ(s.dw.shape()[0], groups) << what;
  for (int64_t g = 0; g < groups; ++g) {
    const auto i = static_cast<std::size_t>(g);
    const std::string at = what + ", group " + std::to_string(g);
    EXPECT_TRUE(same_bits(s.ys[i], v.ys[i])) << at << ": y";
    ASSERT_EQ(s.dxs[i].defined(), v.dxs[i].defined()) << at << ": dx";
    if (s.dxs[i].defined()) {
      EXPECT_TRUE(same_bits(s.dxs[i], v.dxs[i])) << at << ": dx";
    }
    if (v.dws[i].defined()) {
      EXPECT_EQ(s.dw.dtype(), v.dws[i].dtype()) << at << ": dw dtype";
    }
    expect_slice(s.dw, g, v.dws[i], at + ": dw");
    if (s.db.defined())
      expect_slice(s.db, g, v.dbs[i], at + ": db");
    else
      EXPECT_FALSE(v.dbs[i].defined()) << at << ": db";
  }
}

void expect_matches_vector(DType dt, bool with_bias, const std::vector<Shape>& rows,
                           const std::string& what) {
  Case c = make_case(dt, with_bias, rows, 7);
  expect_same(run_stacked(c), run_vector(c), what);
}

TEST(GroupedLinearStacked, EqualsTheVectorOverloadOnTheSlicesBitForBit) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (bool with_bias : {true, false})
      expect_matches_vector(dt, with_bias, kRows,
                            std::string(dtype_name(dt)) + (with_bias ? " with bias" : ""));
  for (auto precision : {amp::MatmulPrecision::high, amp::MatmulPrecision::medium}) {
    const amp::MatmulPrecisionGuard guard(precision);
    expect_matches_vector(DType::f32, true, kRows, amp::matmul_precision_name(precision));
  }
}

TEST(GroupedLinearStacked, OneGroupAndAllEmpty) {
  for (bool with_bias : {true, false}) {
    expect_matches_vector(DType::f32, with_bias, {{33}}, "G = 1");
    expect_matches_vector(DType::f32, with_bias, {{0}}, "G = 1, no rows");
    expect_matches_vector(DType::f32, with_bias, {{0}, {0, 3}}, "every group empty");
  }
  Case c = make_case(DType::f32, true, {{0}, {0}}, 3);
  const Result s = run_stacked(c);
  expect_zero(s.dw, "every group empty: dw");
  expect_zero(s.db, "every group empty: db");
}

TEST(GroupedLinearStacked, GroupsWithoutRowsOrGradientGetZeroSlices) {
  Case c = make_case(DType::f32, true, kRows, 11);
  // Poison the allocator's free blocks so a skipped zero fill shows.
  for (int i = 0; i < 4; ++i) (void)Tensor::full({c.weight.numel() * 2}, -3.0);
  const Result s = run_stacked(c);
  expect_zero(s.dw.select(0, 1), "0-row group: dw");
  expect_zero(s.db.select(0, 1), "0-row group: db");
  // Groups 2 and 4 left out of the loss: their outputs get no gradient, their slices zeros
  // (the vector overload gives those weights none).
  const std::vector<std::size_t> loss = {0, 1, 3, 5};
  expect_same(run_stacked(c, loss), run_vector(c, loss), "groups 2 and 4 outside the loss");
}

TEST(GroupedLinearStacked, Bf16AutocastGivesF32MasterGradients) {
  for (bool with_bias : {true, false}) {
    Case c = make_case(DType::f32, with_bias, kRows, 5);
    const amp::AutocastGuard autocast(DType::bf16);
    const std::vector<Tensor> ys = grouped_linear(c.xs, c.weight, c.bias, c.scopes);
    for (const Tensor& y : ys) EXPECT_EQ(y.dtype(), DType::bf16);
    const Result s = run_stacked(c), v = run_vector(c);
    EXPECT_EQ(s.dw.dtype(), DType::f32);
    expect_same(s, v, std::string("bf16 autocast") + (with_bias ? " with bias" : ""));
  }
  // One expert in an fp32 module: its slice is read (and differentiated) in f32, the rest
  // in bf16; both reach the one f32 master.
  Case c = make_case(DType::f32, true, kRows, 6);
  amp::AutocastOptions options;
  options.fp32_modules = {"experts.3"};
  const amp::AutocastGuard autocast(DType::bf16, options);
  const std::vector<Tensor> ys = grouped_linear(c.xs, c.weight, c.bias, c.scopes);
  for (std::size_t g = 0; g < ys.size(); ++g)
    EXPECT_EQ(ys[g].dtype(), g == 3 ? DType::f32 : DType::bf16) << g;
  // Two casts of the stacked weight (bf16, and the f32 master itself), one edge each.
  EXPECT_EQ(ys[0].grad_fn()->next_edges().size(), ys.size() + 2 * 2);
  expect_same(run_stacked(c), run_vector(c), "bf16 autocast, experts.3 in f32");
}

TEST(GroupedLinearStacked, SameBitsAtOneAndTwoThreadsOnEveryGemmPath) {
  for (bool own : {true, false}) {
    const testing::OwnGemmPath path(own);
    for (DType dt : {DType::f32, DType::bf16}) {
      Case c = make_case(dt, true, kRows, 4);
      const std::string what = std::string(dtype_name(dt)) + (own ? "" : " OpenBLAS path");
      const Result one = with_threads(1, [&] { return run_stacked(c); });
      const Result two = with_threads(2, [&] { return run_stacked(c); });
      expect_same(one, with_threads(1, [&] { return run_vector(c); }), what + ", 1 thread");
      expect_same(two, with_threads(2, [&] { return run_vector(c); }), what + ", 2 threads");
      EXPECT_TRUE(same_bits(one.dw, two.dw) && same_bits(one.db, two.db)) << what;
      for (std::size_t g = 0; g < one.ys.size(); ++g)
        EXPECT_TRUE(same_bits(one.ys[g], two.ys[g]) && same_bits(one.dxs[g], two.dxs[g]))
            << what << ", 1 vs 2 threads, group " << g;
    }
  }
}

TEST(GroupedLinearStacked, OneNodeWithOneEdgePerStackedTensor) {
  Case c = make_case(DType::f32, true, {{3}, {0}, {2}}, 8);
  const std::vector<Tensor> ys = grouped_linear(c.xs, c.weight, c.bias);
  const auto node = ys[0].grad_fn();
  ASSERT_TRUE(node);
  EXPECT_EQ(node, ys[2].grad_fn());
  EXPECT_EQ(node->next_edges().size(), 3u + 2u);  // the xs, the weight, the bias: no views
}

TEST(GroupedLinearStacked, F64GradCheck) {
  const std::vector<Shape> rows = {{2}, {0}, {3, 1}};
  std::vector<Tensor> inputs;
  for (std::size_t g = 0; g < rows.size(); ++g) {
    Shape s = rows[g];
    s.push_back(3);
    inputs.push_back(grad_input(s, 20 + g));
  }
  inputs.push_back(grad_input({3, 2, 3}, 30, 0.5));  // weight
  inputs.push_back(grad_input({3, 2}, 31));          // bias
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        const std::vector<Tensor> xs(in.begin(), in.begin() + 3);
        std::vector<Tensor> flat;
        for (const Tensor& y : grouped_linear(xs, in[3], in[4])) flat.push_back(y.reshape({-1}));
        return concat(flat, 0);
      },
      inputs, "stacked grouped_linear");
}

TEST(GroupedLinearStacked, BadShapesNameTheArgument) {
  Case c = make_case(DType::f32, true, {{3}, {2}}, 9, 8, 4);
  auto expect_error = [](const std::string& e, const std::vector<std::string>& parts) {
    ASSERT_FALSE(e.empty()) << "no mixprec::Error";
    for (const std::string& p : parts) EXPECT_NE(e.find(p), std::string::npos) << e;
  };
  expect_error(error_of([&] { grouped_linear(c.xs, c.ws[0]); }),
               {"grouped_linear", "weight", "3-d", "[4, 8]"});
  expect_error(error_of([&] { grouped_linear({c.xs[0]}, c.weight); }),
               {"grouped_linear", "weight [2, 4, 8]", "2 groups", "xs holds 1"});
  std::vector<Tensor> xs = c.xs;
  xs[1] = randn({2, 7}, DType::f32, 1);
  expect_error(error_of([&] { grouped_linear(xs, c.weight); }),
               {"grouped_linear", "xs[1] [2, 7]", "weight [2, 4, 8]", "[..., 8]"});
  expect_error(error_of([&] { grouped_linear(c.xs, c.weight, c.bs[0]); }),
               {"grouped_linear", "bias", "[2, 4]", "got [4]"});
  expect_error(error_of([&] { grouped_linear(c.xs, c.weight, {}, {"experts.0"}); }),
               {"grouped_linear", "scopes"});
  expect_error(error_of([&] { grouped_linear(c.xs, c.weight.to(DType::bf16)); }),
               {"grouped_linear", "dtype"});
}

}  // namespace
}  // namespace mixprec
