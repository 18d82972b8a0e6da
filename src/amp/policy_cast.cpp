// jmp's policy casts over a tensor, a list and a map: the rule is cast_floating's.
#include "mixprec/amp/policy_cast.h"

namespace mixprec::amp {
namespace {

std::vector<Tensor> cast_all(const std::vector<Tensor>& xs, DType dtype) {
  std::vector<Tensor> out;
  out.reserve(xs.size());
  for (const Tensor& x : xs) out.push_back(cast_floating(x, dtype));
  return out;
}

TensorMap cast_all(const TensorMap& xs, DType dtype) {
  TensorMap out;
  for (const auto& [name, x] : xs) out.emplace(name, cast_floating(x, dtype));
  return out;
}

}  // namespace

Tensor cast_floating(const Tensor& x, DType dtype) {
  if (!x.defined() || !is_floating(x.dtype()) || x.dtype() == dtype) return x;
  return x.to(dtype);
}

Tensor cast_to_param(const MixedPrecisionPolicy& p, const Tensor& x) {
  return cast_floating(x, p.param_dtype);
}
Tensor cast_to_compute(const MixedPrecisionPolicy& p, const Tensor& x) {
  return cast_floating(x, p.compute_dtype);
}
Tensor cast_to_output(const MixedPrecisionPolicy& p, const Tensor& x) {
  return cast_floating(x, p.output_dtype);
}

std::vector<Tensor> cast_to_param(const MixedPrecisionPolicy& p, const std::vector<Tensor>& xs) {
  return cast_all(xs, p.param_dtype);
}
std::vector<Tensor> cast_to_compute(const MixedPrecisionPolicy& p, const std::vector<Tensor>& xs) {
  return cast_all(xs, p.compute_dtype);
}
std::vector<Tensor> cast_to_output(const MixedPrecisionPolicy& p, const std::vector<Tensor>& xs) {
  return cast_all(xs, p.output_dtype);
}

TensorMap cast_to_param(const MixedPrecisionPolicy& p, const TensorMap& xs) {
  return cast_all(xs, p.param_dtype);
}
TensorMap cast_to_compute(const MixedPrecisionPolicy& p, const TensorMap& xs) {
  return cast_all(xs, p.compute_dtype);
}
TensorMap cast_to_output(const MixedPrecisionPolicy& p, const TensorMap& xs) {
  return cast_all(xs, p.output_dtype);
}

}  // namespace mixprec::amp
