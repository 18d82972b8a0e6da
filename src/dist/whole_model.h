// Parallelism at world size 1: the model's own parameters (masters and working copies from
// its ParameterSet), nothing to gather, reduce or agree on.
#pragma once

#include "mixprec/dist/parallelism.h"

namespace mixprec::dist {

class WholeModel final : public Parallelism {
 public:
  WholeModel(models::Model& model, Communicator& comm, const amp::MixedPrecisionPolicy& policy);

  Communicator& comm() const override { return comm_; }
  void materialize(uint64_t seed) override;
  const optim::ParamList& parameters() const override { return params_; }
  void join(optim::Optimizer&) override {}
  void join(amp::GradScaler&) override {}  // this process decides alone

  void begin_step(bool) override {}
  void finish_backward() override {}
  void end_forward() override {}
  double global_norm(double local_norm) override { return local_norm; }

  io::TensorMap full_training_state(optim::Optimizer* optimizer,
                                    amp::GradScaler* scaler) const override;
  io::TensorMap local_training_state(const io::TensorMap& full) const override { return full; }
  optim::ParamList full_parameters() const override { return params_; }
  std::string describe() const override { return ""; }

 private:
  models::Model& model_;
  Communicator& comm_;
  amp::MixedPrecisionPolicy policy_;
  optim::ParamList params_;
};

}  // namespace mixprec::dist
