// Shared set-up for the optimizer tests: policies built by hand and parameters from seeds.
#pragma once

#include <memory>
#include <string>

#include "mixprec/optim/parameter.h"
#include "support/op_testing.h"

namespace mixprec::optim::testing {

inline amp::MixedPrecisionPolicy make_policy(
    DType param, DType reduce = DType::f32, bool f32_master = true,
    amp::MasterUpdate update = amp::MasterUpdate::nearest) {
  amp::MixedPrecisionPolicy p;
  p.param_dtype = p.compute_dtype = param;
  p.reduce_dtype = reduce;
  p.f32_master = f32_master;
  p.master_update = update;
  return p;
}

inline amp::MixedPrecisionPolicy pure(DType param, amp::MasterUpdate update) {
  return make_policy(param, param, false, update);
}

inline std::shared_ptr<Parameter> make_param(const std::string& name, const Shape& shape,
                                             uint64_t seed, const amp::MixedPrecisionPolicy& policy,
                                             ParamRole role = {}) {
  return std::make_shared<Parameter>(name, mixprec::testing::randn(shape, DType::f32, seed), policy,
                                     role);
}

}  // namespace mixprec::optim::testing
