// The numerics monitor on gradients with known contents: amax, the f16 underflow / overflow
// fractions at a loss scale (before and after unscaling), the global norm, the step report,
// and its JSON form.
#include "mixprec/amp/numerics_monitor.h"
#include "mixprec/optim/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

class NoopOptimizer final : public optim::Optimizer {
 public:
  explicit NoopOptimizer(optim::ParamList params) : Optimizer({optim::ParamGroup{params}}) {}
  void step(float) override {}
  std::size_t state_bytes() const override { return 0; }
  optim::StateDict state_dict() const override { return {}; }
  void load_state_dict(const optim::StateDict&) override {}
};

std::shared_ptr<optim::Parameter> with_grad(const std::string& name, std::vector<double> g) {
  auto p = std::make_shared<optim::Parameter>(name, Tensor::zeros({static_cast<int64_t>(g.size())}),
                                              MixedPrecisionPolicy{});
  p->set_grad(Tensor::from_doubles(g, {static_cast<int64_t>(g.size())}, DType::f32));
  return p;
}

TEST(NumericsMonitor, CountsF16UnderflowAndOverflowAtTheLossScale) {
  // True gradients; at scale 1024 the scaled values are 1024x these.
  const double tiny = std::ldexp(1.0, -36);  // * 1024 = 2^-26: below the f16 subnormals
  const double ok = std::ldexp(1.0, -20);    // * 1024 = 2^-10: fine
  const double big = 100.0;                  // * 1024 > 65504: overflows f16
  NoopOptimizer opt({with_grad("a", {tiny, 0.0, ok, -ok}), with_grad("b", {big, -3.0, tiny, 0.5})});
  // As stored after the loss was scaled by 1024 (not yet unscaled).
  for (const auto& p : opt.parameters()) p->set_grad(mixprec::scale(p->grad(), 1024.0));
  const NumericsMonitor monitor;
  const StepNumerics n = monitor.observe(7, opt, 1024.0f, /*unscaled=*/false);
  EXPECT_EQ(n.step, 7);
  EXPECT_EQ(n.numel, 8);
  EXPECT_EQ(n.underflow, 3);  // tiny (twice) and the exact zero
  EXPECT_EQ(n.overflow, 1);
  ASSERT_EQ(n.params.size(), 2u);
  EXPECT_EQ(n.params[0].underflow, 2);
  EXPECT_DOUBLE_EQ(n.params[0].underflow_fraction(), 0.5);
  EXPECT_FLOAT_EQ(n.params[1].amax, 100.0f);  // of the true gradient
  const double norm = std::sqrt(2 * tiny * tiny + 2 * ok * ok + big * big + 9 + 0.25);
  EXPECT_NEAR(n.grad_norm, norm, 1e-12 * norm);
  // The same gradients after unscaling give the same statistics.
  for (const auto& p : opt.parameters()) p->set_grad(mixprec::scale(p->grad(), 1.0 / 1024));
  const StepNumerics u = monitor.observe(7, opt, 1024.0f, /*unscaled=*/true);
  EXPECT_EQ(u.underflow, n.underflow);
  EXPECT_EQ(u.overflow, n.overflow);
  EXPECT_FLOAT_EQ(u.params[1].amax, 100.0f);
  EXPECT_NEAR(u.grad_norm, norm, 1e-12 * norm);
}

TEST(NumericsMonitor, NonFiniteGradientsAndTheStepReportAppearInJson) {
  NoopOptimizer opt({with_grad("w", {1.0, INFINITY, 2.0})});
  StepNumerics n = NumericsMonitor().observe(3, opt, 1.0f, false);
  EXPECT_EQ(n.nonfinite, 1);
  EXPECT_TRUE(std::isinf(n.grad_norm));
  StepReport r;
  r.stepped = false;
  r.reason = "non-finite gradient (inf or NaN) in parameter 'w' at loss scale 1";
  r.first_nonfinite = "w";
  NumericsMonitor::add_step_report(n, r);
  const nlohmann::json j = nlohmann::json::parse(n.to_json());
  EXPECT_EQ(j["step"], 3);
  EXPECT_EQ(j["skipped"], true);
  EXPECT_EQ(j["first_nonfinite"], "w");
  EXPECT_EQ(j["params"][0]["name"], "w");
  EXPECT_EQ(j["params"][0]["nonfinite"], 1);
  MonitorOptions totals_only;
  totals_only.per_param = false;
  EXPECT_TRUE(NumericsMonitor(totals_only).observe(3, opt, 1.0f, false).params.empty());
}

}  // namespace
}  // namespace mixprec::amp
