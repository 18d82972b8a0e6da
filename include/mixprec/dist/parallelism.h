// The one object a trainer drives at every world size, as torchtitan always applies its FSDP
// wrapper (a no-op at shard degree 1): it holds the model's parameters (whole, or this rank's
// shards), takes part in each forward and backward, and owns everything ranks must agree on:
// the gradient norm, the non-finite flag, the checkpointed state and the exported weights.
//
//   std::unique_ptr<Parallelism> par = make_parallelism(model, comm, policy, options);
//   par->materialize(seed);
//   AdamW opt(par->parameters(), ...);  par->join(opt);  par->join(scaler);
//   par->begin_step(true);  loss = model.loss(x, y);  loss.backward();  par->finish_backward();
//   double norm = par->global_norm(local_norm);
//
// make_parallelism picks the whole model at world size 1 and the fully sharded one
// (sharded_model.h) above; a caller never asks which.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/amp/grad_scaler.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/amp/policy.h"
#include "mixprec/dist/communicator.h"
#include "mixprec/io/checkpoint_state.h"
#include "mixprec/models/model.h"
#include "mixprec/optim/optimizer.h"

namespace mixprec::dist {

struct ShardingOptions {
  bool reshard_after_forward = true;  // false: keep every gathered block until backward ends
  bool prefetch = true;               // gather the next block while this one computes
  // torchao's enable_fsdp_float8_all_gather: the linear weights this recipe converts (minus
  // fp8_skip, its filter_fqns) are cast to FP8 from the master shards and all-gathered as FP8
  // bytes (sharded_model.h). Null: every parameter travels in the param dtype.
  const amp::LinearRecipe* fp8_all_gather = nullptr;
  std::vector<std::string> fp8_skip = {};
  // precompute_float8_dynamic_scale_for_fsdp: every FP8 weight's amaxes in one all-reduce at
  // begin_step (each micro-batch, each evaluation batch), instead of one per unit as its gather
  // starts (the same scales either way).
  bool precompute_fp8_scales = false;
};

class Parallelism {
 public:
  virtual ~Parallelism() = default;

  virtual Communicator& comm() const = 0;
  bool leader() const { return comm().rank() == 0; }
  // This rank's rows [begin, end) of a batch of `rows` rows (rank r of W: [r R/W, (r+1) R/W)).
  std::pair<int64_t, int64_t> local_rows(int64_t rows) const;

  // Initial values of the parameters this rank holds, from the counter-based init (the same
  // weights at any world size).
  virtual void materialize(uint64_t seed) = 0;
  // What this rank's optimizer updates.
  virtual const optim::ParamList& parameters() const = 0;
  // Lets the optimizer and the loss scaler reach the other ranks where they must (Adam-mini's
  // blocks cut by shard boundaries; the found-inf flag every rank must agree on).
  virtual void join(optim::Optimizer& optimizer) = 0;
  virtual void join(amp::GradScaler& scaler) = 0;

  // Around each forward: `training` = a backward follows (then finish_backward(), which
  // leaves every parameter's gradient in place for the optimizer), else end_forward().
  virtual void begin_step(bool training) = 0;
  virtual void finish_backward() = 0;
  virtual void end_forward() = 0;
  // The whole model's gradient norm from this rank's part of it (a collective).
  virtual double global_norm(double local_norm) = 0;

  // The training state as io::flatten_training_state gives it for the whole model, on every
  // rank (a collective); optimizer and scaler may be null.
  virtual io::TensorMap full_training_state(optim::Optimizer* optimizer,
                                            amp::GradScaler* scaler) const = 0;
  // The entries of a whole model's state that this rank's parameters hold.
  virtual io::TensorMap local_training_state(const io::TensorMap& full) const = 0;
  // The whole model's masters as parameters, on every rank (a collective): for the export.
  virtual optim::ParamList full_parameters() const = 0;

  // One line for the run's log ("" when there is nothing to say).
  virtual std::string describe() const = 0;
};

// The whole model at comm.size() == 1, else the fully sharded model. model and comm must
// outlive the result.
std::unique_ptr<Parallelism> make_parallelism(models::Model& model, Communicator& comm,
                                              const amp::MixedPrecisionPolicy& policy,
                                              ShardingOptions options = {});

}  // namespace mixprec::dist
