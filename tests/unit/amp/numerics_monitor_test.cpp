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

// The FP8 figures: totals every step, per tensor with per_param, the first overflow by name;
// no fp8 key at all when no FP8 cast ran (the keys of a bf16 run stay as they were).
TEST(NumericsMonitor, Fp8FiguresAppearInJsonOnlyWhenFp8CastsRan) {
  NoopOptimizer opt({with_grad("w", {1.0, 2.0})});
  const StepNumerics plain = NumericsMonitor().observe(1, opt, 1.0f, false);
  const nlohmann::json p = nlohmann::json::parse(plain.to_json());
  for (const auto& [key, value] : p.items()) EXPECT_EQ(key.find("fp8"), std::string::npos) << key;

  Fp8StepStats fp8;
  Fp8TensorStats a;
  a.numel = 100, a.amax = 3, a.scale_min = a.scale_max = 2, a.scales = 1, a.flushed = 10;
  Fp8TensorStats b;
  b.numel = 300, b.amax = 7, b.scale_min = 0.5f, b.scale_max = 4, b.scales = 3;
  b.saturated = 4, b.nonfinite = 2;
  fp8.tensors = {{"blocks.0.attn.wq fwd.input", "f8_e4m3fn allxall torchao", a},
                 {"blocks.0.attn.wq fwd.weight", "f8_e4m3fn 1x32 mx_floor", b}};
  fp8.first_nonfinite = 1;
  fp8.first_saturated = 1;
  MonitorOptions totals_only;
  totals_only.per_param = false;
  for (const bool detail : {false, true}) {
    StepNumerics n =
        NumericsMonitor(detail ? MonitorOptions{} : totals_only).observe(1, opt, 1.0f, false);
    (detail ? NumericsMonitor() : NumericsMonitor(totals_only)).add_fp8(n, fp8);
    nlohmann::json j = nlohmann::json::parse(n.to_json());
    for (const auto& [key, value] : p.items())  // unchanged
      if (key != "params") {
        EXPECT_EQ(j[key], value) << key;
      }
    EXPECT_EQ(j["fp8_tensors"], 2);
    EXPECT_EQ(j["fp8_numel"], 400);
    EXPECT_EQ(j["fp8_amax"], 7.0);
    EXPECT_DOUBLE_EQ(j["fp8_saturated_fraction"].get<double>(), 4.0 / 400);
    EXPECT_DOUBLE_EQ(j["fp8_flushed_fraction"].get<double>(), 10.0 / 400);
    EXPECT_EQ(j["fp8_nonfinite"], 2);
    EXPECT_EQ(j["fp8_first_nonfinite"], "blocks.0.attn.wq fwd.weight");
    EXPECT_EQ(j["fp8_first_saturated"], "blocks.0.attn.wq fwd.weight");
    ASSERT_EQ(j.contains("fp8"), detail);
    if (!detail) continue;
    EXPECT_EQ(j["fp8"][0]["name"], "blocks.0.attn.wq fwd.input");
    EXPECT_EQ(j["fp8"][0]["cast"], "f8_e4m3fn allxall torchao");
    EXPECT_DOUBLE_EQ(j["fp8"][0]["flushed_fraction"].get<double>(), 0.1);
    EXPECT_EQ(j["fp8"][0]["scale_min"], 2.0);
    EXPECT_EQ(j["fp8"][1]["scale_min"], 0.5);
    EXPECT_EQ(j["fp8"][1]["scale_max"], 4.0);
    EXPECT_DOUBLE_EQ(j["fp8"][1]["saturated_fraction"].get<double>(), 4.0 / 300);
    EXPECT_EQ(j["fp8"][1]["nonfinite"], 2);
  }
}

}  // namespace
}  // namespace mixprec::amp
