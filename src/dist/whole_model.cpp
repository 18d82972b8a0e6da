// Parallelism at world size 1 (whole_model.h).
#include "whole_model.h"

#include "mixprec/core/error.h"

namespace mixprec::dist {

WholeModel::WholeModel(models::Model& model, Communicator& comm,
                       const amp::MixedPrecisionPolicy& policy)
    : model_(model), comm_(comm), policy_(policy) {
  MIXPREC_CHECK(comm.size() == 1, "WholeModel",
                "a whole model is one rank's; the job has " + std::to_string(comm.size()));
}

void WholeModel::materialize(uint64_t seed) {
  model_.materialize(seed, policy_);
  params_ = model_.parameters().parameters();
}

io::TensorMap WholeModel::full_training_state(optim::Optimizer* optimizer,
                                              amp::GradScaler* scaler) const {
  return io::flatten_training_state({params_, optimizer, scaler, model_.buffers()});
}

}  // namespace mixprec::dist
