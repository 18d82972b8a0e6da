// grouped_linear against one linear per group: the same values and gradients bit for bit on
// mixprec's own and the AMX GEMM (to rounding on the OpenBLAS path) (dtypes, autocast with
// per-group scopes, matmul precisions, biases, empty and one-row groups), the same bits at any
// thread count on every GEMM path, and errors that name the op.
#include "mixprec/ops/grouped_linear.h"

#include "cpu/gemm_own.h"
#include "ops/work_spread.h"
#include "support/own_gemm_path.h"

#include <gtest/gtest.h>

#include <optional>

#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/policy.h"
#include "mixprec/ops.h"
#include "support/bf16_products.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

struct Case {
  std::vector<Tensor> xs, ws, bs;  // leaves requiring grad (bs may hold undefined)
  std::vector<std::string> scopes;
};

// Groups of uneven sizes, like an MoE layer's experts: empty, one row, a 3-d x, and products
// large enough that cpu::gemm splits them when called alone (C tiles; K-ranges for the
// 4096-row group's weight gradient).
Case make_case(DType dt, bool biases, uint64_t seed) {
  struct Group {
    Shape x;
    int64_t out;
  };
  const std::vector<Group> groups = {{{37, 24}, 16},   {{0, 24}, 24},     {{1, 24}, 32},
                                     {{2, 5, 24}, 16}, {{600, 256}, 512}, {{4096, 64}, 64}};
  Case c;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const Group& s = groups[g];
    const int64_t in = s.x.back();
    c.xs.push_back(randn(s.x, dt, seed + g).set_requires_grad());
    c.ws.push_back(randn({s.out, in}, dt, seed + 100 + g, 0.2).set_requires_grad());
    c.bs.push_back(biases && g != 2 ? randn({s.out}, dt, seed + 200 + g).set_requires_grad()
                                    : Tensor());
    c.scopes.push_back("experts." + std::to_string(g));
  }
  return c;
}

// Outputs, then every gradient (x, w, b per group) after backward of sum(y_g * r_g).
std::vector<Tensor> run(Case& c, bool grouped) {
  std::vector<Tensor> ys;
  if (grouped) {
    ys = grouped_linear(c.xs, c.ws, c.bs, c.scopes);
  } else {
    for (std::size_t g = 0; g < c.xs.size(); ++g) {
      const amp::ModuleScope scope(c.scopes[g]);
      ys.push_back(linear(c.xs[g], c.ws[g], c.bs[g]));
    }
  }
  Tensor loss;
  for (std::size_t g = 0; g < ys.size(); ++g) {
    const Tensor r = randn(ys[g].shape(), DType::f32, 900 + g);
    const Tensor term = sum(mul(ys[g].to(DType::f32), r));
    loss = loss.defined() ? add(loss, term) : term;
  }
  loss.backward();
  std::vector<Tensor> out;
  for (const Tensor& y : ys) out.push_back(y.detach());
  for (std::size_t g = 0; g < c.xs.size(); ++g) {
    out.push_back(c.xs[g].grad());
    out.push_back(c.ws[g].grad());
    if (c.bs[g].defined()) out.push_back(c.bs[g].grad());
    c.xs[g].set_grad(Tensor());
    c.ws[g].set_grad(Tensor());
    if (c.bs[g].defined()) c.bs[g].set_grad(Tensor());
  }
  return out;
}

void expect_same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                      const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << what << " tensor " << i;
    if (a[i].defined()) {
      EXPECT_TRUE(same_bits(a[i], b[i])) << what << " tensor " << i;
    }
  }
}

// grouped (a) against one linear per group (b), for operands of dtype `dt`: bit for bit on
// mixprec's own GEMM, whose sums over K run in KC blocks in order however a product is split.
// The OpenBLAS path (MIXPREC_OWN_GEMM=0, or a CPU without AVX2) sums a product split into K
// ranges in another order than the whole one: there they agree to a unit in the last place of `dt`
// (f32 sums of 4096 products for f32).
void expect_same_as_per_group(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                              const std::string& what, DType dt) {
  if (cpu::own_gemm::enabled()) return expect_same_bits(a, b, what);
  ASSERT_EQ(a.size(), b.size()) << what;
  const double tol = dt == DType::bf16  ? 0x1p-7
                     : dt == DType::f16 ? 0x1p-9
                     : dt == DType::f64 ? 1e-10
                                        : 1e-4;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << what << " tensor " << i;
    if (a[i].defined())
      expect_close(a[i], b[i], tol, tol, what + " tensor " + std::to_string(i) + " (OpenBLAS)");
  }
}

TEST(GroupedLinear, EqualsOneLinearPerGroupBitForBit) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (bool biases : {true, false}) {
      Case c = make_case(dt, biases, 1);
      expect_same_as_per_group(run(c, true), run(c, false),
                               std::string(dtype_name(dt)) + (biases ? " with biases" : ""), dt);
    }
  for (auto precision : {amp::MatmulPrecision::high, amp::MatmulPrecision::medium}) {
    const amp::MatmulPrecisionGuard guard(precision);
    Case c = make_case(DType::f32, true, 2);
    expect_same_as_per_group(run(c, true), run(c, false), amp::matmul_precision_name(precision),
                             DType::f32);
  }
}

TEST(GroupedLinear, AutocastLooksUpEachGroupsScope) {
  Case c = make_case(DType::f32, true, 3);
  amp::AutocastOptions options;
  options.fp32_modules = {"experts.3"};
  const amp::AutocastGuard autocast(DType::bf16, options);
  const std::vector<Tensor> ys = grouped_linear(c.xs, c.ws, c.bs, c.scopes);
  for (std::size_t g = 0; g < ys.size(); ++g)
    EXPECT_EQ(ys[g].dtype(), g == 3 ? DType::f32 : DType::bf16) << g;
  expect_same_as_per_group(run(c, true), run(c, false), "bf16 autocast, experts.3 in f32",
                           DType::bf16);
}

TEST(GroupedLinear, SameBitsAtAnyThreadCountOnEveryGemmPath) {
  // bf16: the native bf16 products (where the CPU has them), our own kernel widened, and
  // OpenBLAS widened.
  for (int path_index : {0, 1, 2}) {
    std::optional<testing::WidenedBf16Products> widened;
    if (path_index > 0) widened.emplace();
    const testing::OwnGemmPath path(path_index < 2);
    for (DType dt : {DType::f32, DType::bf16}) {
      Case c = make_case(dt, true, 4);
      const auto one = with_threads(1, [&] { return run(c, true); });
      const auto two = with_threads(2, [&] { return run(c, true); });
      const auto three = with_threads(3, [&] { return run(c, true); });
      const std::string what = std::string(dtype_name(dt)) + (path_index == 0   ? ""
                                                              : path_index == 1 ? " widened"
                                                                                : " OpenBLAS path");
      expect_same_bits(one, two, what + ", 1 vs 2 threads");
      expect_same_bits(one, three, what + ", 1 vs 3 threads");
    }
  }
}

TEST(GroupedLinear, ADominantProductIsSharedTheRestQueueHeaviestFirst) {
  using detail::spread_work;
  // One expert with most of the rows: it runs split over every thread, first.
  auto plan = spread_work({90, 5, 3, 2}, 2);
  EXPECT_EQ(plan.shared, (std::vector<std::size_t>{0}));
  EXPECT_EQ(plan.queue, (std::vector<std::size_t>{1, 2, 3}));
  EXPECT_EQ(plan.threads, 2);
  // Balanced experts: none shared, heaviest first (ties in index order).
  plan = spread_work({3, 4, 2, 3}, 2);
  EXPECT_TRUE(plan.shared.empty());
  EXPECT_EQ(plan.queue, (std::vector<std::size_t>{1, 0, 3, 2}));
  // Which tasks are shared never depends on the thread count; a lone task is always shared.
  for (int threads : {1, 2, 3, 8}) {
    EXPECT_EQ(spread_work({90, 5, 3, 2}, threads).shared, (std::vector<std::size_t>{0}));
    EXPECT_EQ(spread_work({7}, threads).shared, (std::vector<std::size_t>{0}));
    EXPECT_TRUE(spread_work({7}, threads).queue.empty());
  }
  EXPECT_EQ(spread_work({1, 1, 1}, 8).threads, 3);  // no more threads than queued tasks
}

TEST(GroupedLinear, BadInputNamesTheOp) {
  Case c = make_case(DType::f32, true, 5);
  std::vector<Tensor> ws = c.ws;
  ws.pop_back();
  EXPECT_NE(error_of([&] { grouped_linear(c.xs, ws); }).find("grouped_linear"), std::string::npos);
  ws = c.ws;
  ws[1] = randn({16, 23}, DType::f32, 6);
  const std::string e = error_of([&] { grouped_linear(c.xs, ws); });
  EXPECT_NE(e.find("grouped_linear"), std::string::npos) << e;
  EXPECT_NE(e.find("[16, 23]"), std::string::npos) << e;
}

}  // namespace
}  // namespace mixprec
