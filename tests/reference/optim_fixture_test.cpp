// SGD and AdamW against PyTorch 1.13 over 10 steps (fixtures/optim_*.safetensors, made by
// make_optim_fixtures.py): after every step the f32 master must match torch's f32 parameter
// to within 2e-6 of the parameter's scale. The script measures torch's own f32 trajectory at
// 1.0e-7 to 3.4e-7 from the same steps in f64, so 2e-6 is "f32 rounding" (a few ulp of
// accumulated difference in operation order) while any formula error (bias correction, decay
// coupling, eps placement, momentum start) moves parameters by ~lr, i.e. 1e-3 or more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "mixprec/io/safetensors.h"
#include "mixprec/optim/adamw.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::optim {
namespace {

constexpr double kTol = 2e-6;

std::string path_of(const std::string& name) {
  return std::string(MIXPREC_FIXTURE_DIR) + "/" + name + ".safetensors";
}

double scaled_distance(const Tensor& ours, const Tensor& ref) {
  const std::vector<double> a = ours.to_doubles(), b = ref.to_doubles();
  double scale = 0, worst = 0;
  for (double v : b) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst / scale;
}

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(ParamList)>;

void run_case(const std::string& name, double lr, double weight_decay, const MakeOptimizer& make) {
  const io::SafetensorsFile f = io::load_safetensors(path_of(name));
  EXPECT_DOUBLE_EQ(std::stod(f.metadata.at("lr")), lr) << name;
  EXPECT_DOUBLE_EQ(std::stod(f.metadata.at("weight_decay")), weight_decay) << name;
  const amp::MixedPrecisionPolicy fp32;
  auto w = std::make_shared<Parameter>("w", f.at("w.init"), fp32);
  auto b =
      std::make_shared<Parameter>("b", f.at("b.init"), fp32, ParamRole{.no_weight_decay = true});
  std::unique_ptr<Optimizer> opt = make({w, b});
  const int steps = std::stoi(f.metadata.at("steps"));
  ASSERT_EQ(steps, 10);
  for (int k = 0; k < steps; ++k) {
    const std::string s = std::to_string(k);
    w->set_grad(f.at("w.grad." + s));
    b->set_grad(f.at("b.grad." + s));
    opt->step();
    EXPECT_LE(scaled_distance(w->master(), f.at("w.after." + s)), kTol) << name << " w step " << k;
    EXPECT_LE(scaled_distance(b->master(), f.at("b.after." + s)), kTol) << name << " b step " << k;
  }
}

TEST(OptimFixture, SgdMomentumNesterovWeightDecay) {
  run_case("optim_sgd_nesterov", 0.05, 0.01, [](ParamList p) {
    return std::make_unique<SGD>(std::move(p), 0.05, 0.01,
                                 SgdOptions{.momentum = 0.9, .dampening = 0, .nesterov = true});
  });
}

TEST(OptimFixture, SgdMomentumDampening) {
  run_case("optim_sgd_dampening", 0.1, 0.0, [](ParamList p) {
    return std::make_unique<SGD>(std::move(p), 0.1, 0.0,
                                 SgdOptions{.momentum = 0.8, .dampening = 0.25});
  });
}

TEST(OptimFixture, AdamW) {
  run_case("optim_adamw", 0.01, 0.1, [](ParamList p) {
    return std::make_unique<AdamW>(std::move(p), 0.01, 0.1,
                                   AdamWOptions{.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8});
  });
}

TEST(OptimFixture, AdamWGradientsNearEps) {
  run_case("optim_adamw_eps", 0.003, 0.5, [](ParamList p) {
    return std::make_unique<AdamW>(std::move(p), 0.003, 0.5,
                                   AdamWOptions{.beta1 = 0.8, .beta2 = 0.99, .eps = 1e-3});
  });
}

}  // namespace
}  // namespace mixprec::optim
