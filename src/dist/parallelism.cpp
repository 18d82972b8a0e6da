// The parallelism a job gets (parallelism.h).
#include "mixprec/dist/parallelism.h"

#include "mixprec/dist/sharded_model.h"
#include "whole_model.h"

namespace mixprec::dist {

std::pair<int64_t, int64_t> Parallelism::local_rows(int64_t rows) const {
  const int64_t rank = comm().rank(), world = comm().size();
  return {rows * rank / world, rows * (rank + 1) / world};
}

std::unique_ptr<Parallelism> make_parallelism(models::Model& model, Communicator& comm,
                                              const amp::MixedPrecisionPolicy& policy,
                                              ShardingOptions options) {
  if (comm.size() == 1) return std::make_unique<WholeModel>(model, comm, policy);
  return std::make_unique<ShardedModel>(model, comm, policy, options);
}

}  // namespace mixprec::dist
