#include "fused_update.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "mixprec/backend/backend.h"
#include "mixprec/core/hash.h"

namespace mixprec::optim::detail {

uint64_t rounding_stream(const RoundingKeys& keys, int buffer) {
  return splitmix64(keys.name_hash ^ splitmix64(static_cast<uint64_t>(keys.step) * 8 +
                                                static_cast<uint64_t>(buffer)));
}

double square_sum(const Tensor& grad, int64_t begin, int64_t end, float inv_scale) {
  return backend::current().square_sum(grad, begin, end, inv_scale);
}

Tensor checked_grad(const Parameter& param, const Tensor& grad, const char* where) {
  MIXPREC_CHECK(grad.shape() == param.master().shape(), where,
                "gradient of " + param.name() + " has shape " + shape_to_string(grad.shape()) +
                    ", the parameter " + shape_to_string(param.master().shape()));
  const DType dt = grad.dtype();
  MIXPREC_CHECK(dt == DType::f32 || dt == DType::bf16 || dt == DType::f16, where,
                "gradient of " + param.name() + " is " + dtype_name(dt) +
                    "; optimizers read f32, bf16 or f16 gradients");
  MIXPREC_CHECK(!grad.is_meta(), where, "gradient of " + param.name() + " is on the meta device");
  return grad.contiguous();
}

void fused_update(Parameter& param, const Tensor& grad, float inv_scale, std::span<Tensor> state,
                  Tensor& kahan, const RoundingKeys& keys, const TileRule& rule) {
  const Tensor& master = param.master();
  const auto buffer = [](const Tensor& t) {
    return backend::UpdateBuffer{t.dtype(), t.raw_data()};
  };
  backend::UpdatePass pass;
  pass.numel = master.numel();
  pass.inv_scale = inv_scale;
  pass.grad = buffer(grad);
  pass.master = buffer(master);
  MIXPREC_CHECK(state.size() <= pass.state.size(), "fused_update", "too many state buffers");
  pass.n_state = static_cast<int>(state.size());
  for (std::size_t k = 0; k < state.size(); ++k) pass.state[k] = buffer(state[k]);
  if (kahan.defined()) pass.kahan = buffer(kahan);
  if (param.has_working_copy()) pass.working = buffer(param.value());
  pass.stochastic =
      master.dtype() != DType::f32 && param.policy().master_update == amp::MasterUpdate::stochastic;
  if (pass.stochastic) {
    pass.seed = keys.seed;
    for (std::size_t b = 0; b < pass.streams.size(); ++b)
      pass.streams[b] = rounding_stream(keys, static_cast<int>(b));
  }
  // A shard piece counts from its offset in the whole parameter, so sharded and unsharded
  // runs round the same element alike.
  pass.index_base = static_cast<uint64_t>(param.element_offset());
  backend::current().update(pass, rule);
}

}  // namespace mixprec::optim::detail
