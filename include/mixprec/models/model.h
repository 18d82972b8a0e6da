// The interface every model family implements (torchtitan's ModelSpec): the trainer,
// evaluation, sampling, checkpoints, the fully sharded runtime and the memory planner see a
// model only through it. A family is one folder under models/ and one line in the registry
// (models/registry.h); model.kind picks it.
//
// A model describes its parameters at construction (names, shapes, roles, init rules, shard
// units: nothing allocated, so it can be sized on the meta device), then materialize() gives
// them values under a precision policy. Forward and loss read weights through weight(name):
// the parameter's working copy, or whatever the unit hooks (a sharded runtime) hand out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mixprec/amp/policy.h"
#include "mixprec/config/train_config.h"
#include "mixprec/models/activation_checkpoint.h"
#include "mixprec/models/parameter_set.h"
#include "mixprec/models/unit_hooks.h"

namespace mixprec::models {

struct LossParts {
  Tensor total;  // ce + the family's auxiliary terms, each times its weight
  Tensor ce;     // mean token cross-entropy
  // The family's auxiliary losses, unweighted, by name, in a fixed order (moe: "aux", the
  // mean load-balancing loss of its MoE blocks, then "z", their router z-loss); the metrics
  // log each under its name. Empty for a family without any.
  std::vector<std::pair<std::string, Tensor>> terms;
  // The term of that name; an Error when the family has none of it.
  const Tensor& term(std::string_view name) const;
};

// What a training step's forward saves for backward, and the largest short-lived buffers of
// the loss and unit backwards, under a precision policy: the memory planner's activation term.
struct ActivationEstimate {
  std::size_t batch = 0;        // inputs + targets, i64 [B, T] each
  std::size_t root_saved = 0;   // the root unit's (final norm, LM head, loss)
  std::size_t block_saved = 0;  // one block unit's (the mean when blocks differ: MoE dense blocks)
  int64_t blocks = 0;           // block units
  // Activation checkpointing: block l is checkpointed when checkpoint_every > 0 and
  // (l + 1) % checkpoint_every == 0, and keeps checkpointed_saved from its forward to its
  // backward (its input; selective: the op outputs kept too). Its backward recomputes it:
  // block_saved is live again then.
  int64_t checkpoint_every = 0;
  std::size_t checkpointed_saved = 0;
  std::size_t kept_after_backward = 0;       // what the model keeps for its stats
  std::size_t forward_transient = 0;         // the loss's f32 copy of narrow logits
  std::size_t loss_backward_transient = 0;   // cross-entropy backward: f32 logits + gradient
  std::size_t block_backward_transient = 0;  // the largest gradient buffers inside a block
  // Elements of the embedding's (and an untied LM head's) [vocab, d] weight gradient. A
  // weight's gradient is made whole before it is added to the parameter's: no copy for the
  // first, but one while a step accumulates micro-batches, and for the second of a tied pair
  // (the embedding's, at the end of backward). With a large vocabulary it is the largest one.
  int64_t vocab_grad_numel = 0;
  bool tied_embeddings = false;
  bool checkpointed(int64_t block) const {
    return checkpoint_every > 0 && (block + 1) % checkpoint_every == 0;
  }
  // What blocks 0..n-1 keep from the forward to their backward.
  std::size_t blocks_saved(int64_t n) const;
  std::size_t saved() const { return root_saved + blocks_saved(blocks); }
  // A checkpointed block's activations recomputed in its backward, beyond what it kept.
  std::size_t recompute_transient() const {
    return checkpoint_every > 0 && block_saved > checkpointed_saved
               ? block_saved - checkpointed_saved
               : 0;
  }
  // The activations term of the plan: the batch, everything saved, and the largest of the
  // transients (the loss backward one at the start of backward, a recompute's after it).
  std::size_t total() const;
};

// What incremental decoding keeps between calls (a transformer's key/value cache).
class DecodeState {
 public:
  virtual ~DecodeState() = default;
  virtual int64_t length() const = 0;  // positions decoded so far
};

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const config::ModelConfig& config() const { return config_; }
  ParameterSet& parameters() { return params_; }
  const ParameterSet& parameters() const { return params_; }
  void materialize(uint64_t seed, const amp::MixedPrecisionPolicy& policy) {
    params_.materialize(seed, policy);
  }

  // tokens [B, T] (i32/i64, T <= max_seq_len) -> logits [B, T, vocab_size].
  virtual Tensor forward(const Tensor& tokens) = 0;
  // Cross-entropy of forward(tokens) against targets [B, T], plus the family's extra terms.
  virtual LossParts loss(const Tensor& tokens, const Tensor& targets) = 0;

  // Incremental decoding for generation (no gradients): a fresh state for `batch` sequences,
  // or null when the family has none (generation then recomputes every position).
  virtual std::unique_ptr<DecodeState> start_decoding(int64_t /*batch*/) { return nullptr; }
  // tokens [B, n] at positions state.length() .. + n - 1 -> logits [B, n, vocab] of those
  // positions, as forward() would give them; the state then covers them too. n may exceed 1
  // only on an empty state (the prompt); state.length() + n <= max_seq_len.
  virtual Tensor decode(const Tensor& tokens, DecodeState& state);

  // The units a sharded runtime gathers and reduces together, in the order the forward
  // enters them. The first is the root (what no block holds; it stays gathered for the step,
  // and the forward ends with leave_unit(root, ...)); ParamSpec::unit puts each parameter in
  // one of them.
  virtual std::vector<std::string> shard_units() const = 0;
  // Activation bytes of a step over `sequences` x `seq_len` tokens.
  virtual ActivationEstimate estimate_activations(const amp::MixedPrecisionPolicy& policy,
                                                  int64_t sequences, int64_t seq_len) const = 0;
  // The architecture in one line ("model: moe | d_model 128 | ...").
  virtual std::string describe() const = 0;
  // Parameters one token's forward reads, for a family built to read only some of them (a
  // mixture of experts); nullopt: all of them.
  virtual std::optional<int64_t> active_parameter_count() const { return std::nullopt; }

  // State a family keeps beside its parameters and updates itself, not by gradients (MoE: the
  // expert biases of auxiliary-loss-free balancing): named f32 tensors, the same on every
  // rank, saved in checkpoints as "buffer.<name>" (io/checkpoint_state.h).
  const std::vector<std::pair<std::string, Tensor>>& buffers() const { return buffers_; }
  // Counts the last forward gathered (moe: the tokens routed to each expert before any
  // capacity drop, MoE block after MoE block), which the trainer sums over a step's
  // micro-batches and every rank; empty for a family that keeps none.
  virtual std::vector<int64_t> step_counts() const { return {}; }
  // After an optimizer step that was taken, from the step's summed counts: the family updates
  // its buffers (moe: balances the expert biases). A no-op for a family without buffers.
  virtual void update_buffers(const std::vector<int64_t>& /*step_counts*/) {}
  // The step's summed counts as loads for the metrics, one row per group (moe: per MoE block,
  // each expert's count over the block's mean; a block that routed nothing gets zeros).
  virtual std::vector<std::vector<double>> count_loads(
      const std::vector<int64_t>& /*step_counts*/) const {
    return {};
  }

  // Routes weights and unit boundaries through `hooks` (null: the working copies). The hooks
  // must outlive every forward and backward that uses them.
  void set_unit_hooks(UnitHooks* hooks) { hooks_ = hooks; }
  UnitHooks* unit_hooks() const { return hooks_; }

  // Which blocks recompute their activations in backward (none by default); the forward and
  // estimate_activations() follow it.
  void set_activation_checkpoint(const ActivationCheckpoint& ac) { checkpoint_ = ac; }
  const ActivationCheckpoint& activation_checkpoint() const { return checkpoint_; }

 protected:
  explicit Model(const config::ModelConfig& config) : config_(config) {}
  Model(Model&&) = default;  // a family's value may be moved before it is hooked anywhere
  Model& operator=(Model&&) = default;
  // The tensor the forward uses for a parameter.
  const Tensor& weight(std::string_view name) const {
    return hooks_ ? hooks_->weight(name) : params_.value(name);
  }
  // unit_hooks' enter/leave, or x itself without hooks.
  Tensor enter_unit(const std::string& unit, const Tensor& x) const {
    return hooks_ ? hooks_->enter_unit(unit, x) : x;
  }
  Tensor leave_unit(const std::string& unit, const Tensor& y) const {
    return hooks_ ? hooks_->leave_unit(unit, y) : y;
  }

  config::ModelConfig config_;
  ParameterSet params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;

 private:
  UnitHooks* hooks_ = nullptr;
  ActivationCheckpoint checkpoint_;
};

}  // namespace mixprec::models
