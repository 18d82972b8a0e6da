// Every op of the registry (tests/support/op_registry.h) passes a finite-difference gradient
// check in f64 on its registry inputs: the analytic gradient of <out, R> (R fixed random)
// against central differences, for every input that gets a gradient.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/op_registry.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

class RegistryGradcheck : public ::testing::TestWithParam<std::string> {};

TEST_P(RegistryGradcheck, F64GradientsMatchFiniteDifferences) {
  const std::string name = GetParam();
  const testing::OpCase& op = testing::op_registry().at(name);
  const testing::Tensors in = testing::case_inputs(name, DType::f64);
  std::vector<std::string> names;
  std::vector<Tensor> inputs;
  for (const auto& [n, t] : in) {
    names.push_back(n);
    inputs.push_back(t);
  }
  const auto fn = [&](const std::vector<Tensor>& xs) {
    testing::Tensors named;
    for (size_t i = 0; i < xs.size(); ++i) named[names[i]] = xs[i];
    const testing::Tensors out = op.run(named);
    return out.at(testing::primary_output(out));
  };
  testing::expect_gradcheck(fn, inputs, name);
}

INSTANTIATE_TEST_SUITE_P(Registry, RegistryGradcheck, ::testing::ValuesIn(testing::case_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mixprec
