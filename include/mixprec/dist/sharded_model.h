// Fully sharded data parallelism (FSDP / ZeRO-3) for any models::Model, torchtitan's recipe
// (the Parallelism a job of more than one rank gets: parallelism.h):
//
//   masters     each rank keeps only its shard of every unit (shard_layout.h) in the master
//               dtype (f32; the narrow master of the pure modes), materialised from the
//               counter-based init (seed, parameter name, element index): any world size
//               starts from the same weights;
//   forward     on entering a unit the rank casts its shard to the policy's param_dtype and
//               all-gathers it (half the bytes of an f32 all-gather for bf16); a block's
//               gathered weights are freed when the forward leaves it (reshard after forward;
//               not the last block, whose backward comes next) and gathered again when its
//               backward starts; the root unit (embeddings, final
//               norm, LM head) stays gathered for the step. The next block's gather is started
//               before the current block computes (prefetch, MPI non-blocking collectives);
//   backward    a unit's gradients accumulate in reduce_dtype into one flat buffer, which is
//               reduce-scattered into the rank's gradient shard as soon as the unit's backward
//               is done, then divided by the world size (each rank's loss is the mean over
//               its part of the global batch);
//   FP8         with ShardingOptions::fp8_all_gather (torchao's enable_fsdp_float8_all_gather),
//               the linear weights its recipe converts are cast from the master shard to FP8
//               with their blocks' scales from the global amaxes (one MAX all-reduce: per unit
//               as its gather starts, or for all at begin_step with precompute_fp8_scales) and
//               all-gathered as FP8 bytes, the other parameters in the param dtype (fp8_gather.h
//               has the wire layout). The model reads such a weight as a placeholder without
//               bytes, its FP8 form filed for the linear (amp/fp8_weights.h). A recipe
//               with two weight casts (rowwise, MX) gathers output's for the forward and
//               grad_input's for the backward (UnitCasts);
//   optimizer   any of the library's, on this rank's pieces (Parameter::shard_piece), one per
//               parameter overlapping the shard; join(scaler) all-reduces the non-finite flag
//               and global_norm() the gradient norm, so every rank takes the same decision.
//
// What the backward order must give (autograd/engine.cpp runs a node once every consumer has
// sent its gradient, latest-created first): a block's "backward begins" node (its output's
// identity) runs before any node of the block that reads a weight, because every such node
// feeds the block's output; its "backward done" node (its input's identity) runs after all of
// them and after the leaves' gradient accumulators, which are created after it (fresh leaves
// each step). A weight read outside that window is an Error ("storage was released"), not a
// wrong value. After an exception inside a step the object is left mid-step (collectives in
// flight): end the job, as the trainer's CLI does (Communicator::abort_job).
//
//   ShardedModel fsdp(model, comm, policy);
//   fsdp.materialize(seed);
//   AdamW opt(fsdp.parameters(), ...);  fsdp.join(opt);  fsdp.join(scaler);
//   fsdp.begin_step(true);  loss = model.loss(x, y);  loss.backward();  fsdp.finish_backward();
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/amp/fp8_weights.h"
#include "mixprec/amp/policy.h"
#include "mixprec/dist/agreement.h"
#include "mixprec/dist/communicator.h"
#include "mixprec/dist/parallelism.h"
#include "mixprec/dist/shard_layout.h"
#include "mixprec/models/model.h"
#include "mixprec/optim/adam_mini.h"

namespace mixprec::dist {
namespace detail {
struct Fp8GatherPlan;
}

// Which FP8 weight casts a use of a unit reads (fp8_gather.h): the forward the output
// product's; the backward grad_input's, and output's again when it recomputes the forward
// (activation checkpoints). Where the recipe has one cast it serves both.
struct UnitCasts {
  bool output = true, grad_input = false;
};

class ShardedModel final : public Parallelism, public models::UnitHooks {
 public:
  // Hooks itself into `model` (unhooked by the destructor). model, comm must outlive this.
  ShardedModel(models::Model& model, Communicator& comm, const amp::MixedPrecisionPolicy& policy,
               ShardingOptions options = {});
  ~ShardedModel() override;
  ShardedModel(const ShardedModel&) = delete;
  ShardedModel& operator=(const ShardedModel&) = delete;

  // This rank's shards from the init rule of every parameter (nothing else is allocated).
  void materialize(uint64_t seed) override;
  const ShardLayout& layout() const { return layout_; }
  Communicator& comm() const override { return comm_; }
  const amp::MixedPrecisionPolicy& policy() const { return policy_; }
  // This rank's pieces, unit by unit in flat order (what the optimizer updates).
  const optim::ParamList& parameters() const override { return pieces_; }
  // Adam-mini sums its cut blocks over the ranks; the scaler's found-inf flag is any rank's.
  void join(optim::Optimizer& optimizer) override;
  void join(amp::GradScaler& scaler) override;

  // Before each forward: gathers the root unit. `training`: gradients will follow (then call
  // finish_backward() after backward), else end_forward() after the forward.
  void begin_step(bool training) override;
  // After backward: completes every unit's reduce-scatter and sets each piece's gradient.
  void finish_backward() override;
  // After a forward without backward (evaluation): frees what the forward gathered.
  void end_forward() override;
  // sqrt of the sum over ranks of local_norm^2.
  double global_norm(double local_norm) override;

  // sharded_state.h, gathered or cut for this rank.
  io::TensorMap full_training_state(optim::Optimizer* optimizer,
                                    amp::GradScaler* scaler) const override;
  io::TensorMap local_training_state(const io::TensorMap& full) const override;
  optim::ParamList full_parameters() const override;
  std::string describe() const override;

  // The master shard of unit u ([shard], master dtype) and the full unit gathered from every
  // rank's `shard` tensor ([shard] each, same dtype) as [padded]: for checkpoints.
  const Tensor& master_shard(std::size_t unit) const { return units_.at(unit).master; }
  Tensor gather_unit(const Tensor& shard) const;

  // Adds the parts of every Adam-mini block a shard boundary cuts over the ranks
  // (optim::AdamMini::set_sum_cut_blocks; a collective, once per optimizer step).
  void sum_cut_blocks(std::vector<optim::CutBlock>& blocks) const;

  // models::UnitHooks
  const Tensor& weight(std::string_view name) override;
  Tensor enter_unit(const std::string& unit, const Tensor& x) override;
  Tensor leave_unit(const std::string& unit, const Tensor& y) override;
  void sum_counts_over_ranks(std::vector<int64_t>& counts) override;

  // Called by the unit-boundary autograd nodes.
  void on_backward_begin(std::size_t unit);
  void on_backward_done(std::size_t unit);

 private:
  struct Unit {
    Tensor master;    // [shard] master dtype, zero padding
    Tensor send;      // [shard] param dtype: the cast shard an all-gather sends
    Tensor gathered;  // [padded] param dtype; its storage is released between uses
    std::unique_ptr<Request> gather;
    // With FP8 weights: the FP8 part of the gather (the FP8 weights end to end), and
    // this step's scales of each FP8 weight; `send` and `gathered` then hold the others only.
    struct Fp8Cast {
      Tensor send, gathered;
      std::unique_ptr<Request> gather;
      std::vector<Tensor> scales;  // this step's, one per FP8 weight
    };
    // By amp::WeightCast: output's, and grad_input's where the recipe has two (fp8_gather.h).
    std::array<Fp8Cast, 2> fp8;
    std::map<std::string, Tensor, std::less<>> leaves;  // views of gathered, fresh per step
    Tensor full_grad;                                   // [padded] reduce dtype, in backward
    Tensor grad_shard;                                  // [shard] reduce dtype
    std::unique_ptr<Request> reduce;
    bool reduced = false;  // reduce-scatter started this step
  };

  using Casts = UnitCasts;
  Casts backward_casts(std::size_t u) const;

  std::size_t unit_of(const std::string& unit_name) const;
  void start_gather(std::size_t u, Casts casts = {});
  void wait_gather(std::size_t u, Casts casts = {});  // then creates the unit's leaves
  void release_gathered(std::size_t u, bool drop_leaves);
  // Gathered for `casts`: leaves made, no gather in flight, their bytes present.
  bool resident(std::size_t u, Casts casts = {}) const;
  void start_reduce(std::size_t u);
  void finish_reduce(std::size_t u);
  void note_used(std::size_t u);  // which of the unit's leaves this step's graph read  // waits,
                                  // then frees the unit's full gradient buffer
  void set_grad_views(std::size_t u);
  bool has_fp8(std::size_t u) const;
  // This step's scales of the FP8 weights of units [first, last): one MAX all-reduce.
  void refresh_fp8_scales(std::size_t first, std::size_t last);
  bool two_casts(std::size_t u) const;
  // Unit u's FP8 cast that `cast`'s product reads (output's where one serves both).
  Unit::Fp8Cast& fp8_cast(std::size_t u, amp::WeightCast cast);
  const Unit::Fp8Cast& fp8_cast(std::size_t u, amp::WeightCast cast) const;
  void start_fp8_gather(std::size_t u, amp::WeightCast cast);
  void start_rest_gather(std::size_t u);
  void make_leaves(std::size_t u);
  void forget_fp8_leaves(std::size_t u);

  models::Model& model_;
  Communicator& comm_;
  amp::MixedPrecisionPolicy policy_;
  ShardingOptions options_;
  ShardLayout layout_;
  std::vector<Unit> units_;
  optim::ParamList pieces_;
  std::vector<std::size_t> piece_unit_;     // unit index of pieces_[i]
  std::vector<int64_t> piece_offset_;       // where pieces_[i] starts in its unit's shard
  std::vector<std::size_t> piece_slot_;     // its parameter's index in the unit
  std::vector<std::vector<int64_t>> used_;  // [unit][slot]: this step's graph read it
  std::map<std::string, std::size_t, std::less<>> param_unit_;
  bool training_ = false;
  bool in_step_ = false;
  std::unique_ptr<detail::Fp8GatherPlan> fp8_;  // null: no FP8 all-gather
};

}  // namespace mixprec::dist
