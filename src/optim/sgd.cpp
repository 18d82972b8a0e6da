#include "mixprec/optim/sgd.h"

#include "fused_update.h"

namespace mixprec::optim {

SGD::SGD(std::vector<ParamGroup> groups, SgdOptions options)
    : StatefulOptimizer(std::move(groups), options.seed, "SGD"), options_(options) {
  MIXPREC_CHECK(options.momentum >= 0, "SGD",
                "momentum must be >= 0, got " + std::to_string(options.momentum));
  MIXPREC_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0), "SGD",
                "Nesterov momentum needs momentum > 0 and dampening == 0");
}

SGD::SGD(ParamList params, double lr, double weight_decay, SgdOptions options)
    : SGD(std::vector<ParamGroup>{{std::move(params), lr, weight_decay}}, options) {}

std::vector<BufferSpec> SGD::buffer_specs(const Parameter& param) const {
  if (options_.momentum == 0) return {};
  return {{"momentum_buffer", param.master().shape()}};
}

void SGD::update(Parameter& param, const ParamGroup& group, ParamState& state, const Tensor& grad,
                 float inv_scale) {
  const float neg_lr = static_cast<float>(-group.lr);
  const auto wd = static_cast<float>(weight_decay_of(group, param));
  const float momentum = static_cast<float>(options_.momentum);
  const float keep = static_cast<float>(1.0 - options_.dampening);
  const bool first = state.step == 1, nesterov = options_.nesterov;
  const detail::RoundingKeys keys{seed(), fnv1a(param.name()), state.step};
  detail::fused_update(param, grad, inv_scale, state.buffers, state.kahan, keys,
                       [&](const detail::Tile& t) {
                         for (int64_t i = 0; i < t.len; ++i) {
                           const float p = t.p[i];
                           float d = t.g[i] * t.inv_scale;
                           if (wd != 0) d = d + wd * p;
                           if (momentum != 0) {
                             const float b = first ? d : momentum * t.s[0][i] + keep * d;
                             t.s[0][i] = b;
                             d = nesterov ? d + momentum * b : b;
                           }
                           t.p_new[i] = p + neg_lr * d;
                         }
                       });
}

}  // namespace mixprec::optim
