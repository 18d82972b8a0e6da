#include "mixprec/optim/parameter.h"

#include "mixprec/autograd/grad_mode.h"

namespace mixprec::optim {
namespace {

bool is_update_dtype(DType t) {
  return t == DType::f32 || t == DType::bf16 || t == DType::f16;
}

// A copy of init rounded once (nearest even) into dtype.
Tensor rounded_copy(const Tensor& init, DType dtype) {
  Tensor t = Tensor::empty(init.shape(), dtype);
  t.copy_from(init.detach());
  return t;
}

}  // namespace

Parameter::Parameter(std::string name, const Tensor& init, const amp::MixedPrecisionPolicy& policy,
                     ParamRole role)
    : name_(std::move(name)), role_(role), policy_(policy) {
  const std::string where = "Parameter(" + name_ + ")";
  MIXPREC_CHECK(init.defined() && !init.is_meta() && is_floating(init.dtype()), where,
                "initial values must be a defined cpu tensor of a floating dtype");
  MIXPREC_CHECK(is_update_dtype(policy.master_dtype()), where,
                std::string("master dtype ") + dtype_name(policy.master_dtype()) +
                    " is not one an optimizer updates (f32, bf16, f16)");
  MIXPREC_CHECK(is_floating(policy.param_dtype) && is_floating(policy.reduce_dtype), where,
                "param and reduce dtypes must be floating");
  // The working copy is the master rounded: it cannot be wider (an f64 copy of an f32 master).
  MIXPREC_CHECK(dtype_size(policy.param_dtype) <= dtype_size(policy.master_dtype()), where,
                std::string("param dtype ") + dtype_name(policy.param_dtype) +
                    " is wider than the master dtype " + dtype_name(policy.master_dtype()));
  MIXPREC_CHECK(role.heads >= 0, where, "role.heads is " + std::to_string(role.heads));
  if (role.heads > 0)
    MIXPREC_CHECK(init.ndim() >= 2 && init.size(0) % role.heads == 0, where,
                  "role.heads = " + std::to_string(role.heads) + " does not divide the rows of " +
                      shape_to_string(init.shape()));
  NoGradGuard no_grad;
  full_shape_ = init.shape();
  master_ = rounded_copy(init, policy.master_dtype());
  // From the master, not from init: the working copy is always the master rounded (an f64
  // init rounded straight to bf16 could differ from f64 -> f32 -> bf16).
  working_ =
      policy.param_dtype == master_.dtype() ? master_ : rounded_copy(master_, policy.param_dtype);
  working_.set_requires_grad(true, policy.reduce_dtype);
}

std::shared_ptr<Parameter> Parameter::shard_piece(std::string name, Tensor master,
                                                  const amp::MixedPrecisionPolicy& policy,
                                                  ParamRole role, Shape full_shape,
                                                  int64_t element_offset) {
  const std::string where = "Parameter::shard_piece(" + name + ")";
  MIXPREC_CHECK(master.defined() && master.ndim() == 1 && master.dtype() == policy.master_dtype(),
                where, "the piece must be a 1-D tensor of the master dtype");
  MIXPREC_CHECK(element_offset >= 0 && element_offset + master.numel() <= shape_numel(full_shape),
                where,
                "elements [" + std::to_string(element_offset) + ", " +
                    std::to_string(element_offset + master.numel()) + ") are outside " +
                    shape_to_string(full_shape));
  std::shared_ptr<Parameter> p(new Parameter());
  p->name_ = std::move(name);
  p->role_ = role;
  p->policy_ = policy;
  p->full_shape_ = std::move(full_shape);
  p->element_offset_ = element_offset;
  p->piece_ = true;
  p->master_ = master;
  p->working_ = master;
  p->working_.set_requires_grad(true, policy.reduce_dtype);
  return p;
}

void Parameter::refresh() {
  if (!has_working_copy()) return;
  NoGradGuard no_grad;
  working_.copy_from(master_);
}

TensorMap parameter_values(const ParamList& params) {
  TensorMap out;
  for (const auto& p : params) {
    MIXPREC_CHECK(p != nullptr, "parameter_values", "a parameter is null");
    MIXPREC_CHECK(out.emplace(p->name(), p->value()).second, "parameter_values",
                  "parameter name '" + p->name() + "' appears twice");
  }
  return out;
}

}  // namespace mixprec::optim
