#include "mixprec/optim/optimizer.h"

#include <string>

#include "mixprec/core/error.h"

namespace mixprec::optim {

double weight_decay_of(const ParamGroup& group, const Parameter& param) {
  return group.decay_every_parameter || !param.role().no_weight_decay ? group.weight_decay : 0.0;
}

void Optimizer::zero_grad() {
  for (const ParamGroup& g : groups_)
    for (const auto& p : g.params) p->zero_grad();
}

ParamList Optimizer::parameters() const {
  ParamList all;
  for (const ParamGroup& g : groups_) all.insert(all.end(), g.params.begin(), g.params.end());
  return all;
}

std::vector<amp::NamedGradient> Optimizer::gradients() const {
  std::vector<amp::NamedGradient> out;
  for (const ParamGroup& g : groups_)
    for (const auto& p : g.params)
      if (Tensor grad = p->grad(); grad.defined()) out.push_back({p->name(), std::move(grad)});
  return out;
}

void Optimizer::replace_gradient(std::string_view name, Tensor grad) {
  for (const ParamGroup& g : groups_)
    for (const auto& p : g.params)
      if (p->name() == name) return p->set_grad(std::move(grad));
  throw Error("Optimizer", "no parameter named '" + std::string(name) + "'");
}

void Optimizer::set_lr(double lr) {
  for (ParamGroup& g : groups_) g.lr = lr;
}

}  // namespace mixprec::optim
