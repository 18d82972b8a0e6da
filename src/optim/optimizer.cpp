#include "mixprec/optim/optimizer.h"

namespace mixprec::optim {

void Optimizer::zero_grad() {
  for (const ParamGroup& g : groups_)
    for (const auto& p : g.params) p->zero_grad();
}

ParamList Optimizer::parameters() const {
  ParamList all;
  for (const ParamGroup& g : groups_) all.insert(all.end(), g.params.begin(), g.params.end());
  return all;
}

void Optimizer::set_lr(double lr) {
  for (ParamGroup& g : groups_) g.lr = lr;
}

}  // namespace mixprec::optim
