// The memory planner (memory_plan.h): one named function per term, then a walk over the step
// for the peak. Each term follows what the runtime holds; adjust a term here when the runtime
// changes what it keeps.
#include "mixprec/dist/memory_plan.h"

#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/dist/shard_layout.h"
#include "mixprec/models/registry.h"
#include "mixprec/numerics/dtype.h"
#include "mixprec/optim/optimizer_table.h"

namespace mixprec::dist {
namespace {

using Bytes = std::size_t;

Bytes bytes_of(int64_t elements, DType dtype) {
  return static_cast<Bytes>(elements) * dtype_size(dtype);
}

// What the planner needs of a model's units: the root unit and one block unit (all blocks
// are alike), padded to the world size.
struct Units {
  int world_size = 1;
  int64_t numel = 0, shard = 0;  // all parameters; one rank's share of every unit
  int64_t root_padded = 0, root_shard = 0;
  int64_t block_padded = 0, block_shard = 0;  // the largest block unit
  int64_t blocks = 0;
};

Units units_of(const ShardLayout& layout) {
  Units u;
  u.world_size = layout.world_size();
  u.numel = layout.numel();
  u.shard = layout.shard_numel();
  for (const UnitLayout& unit : layout.units()) {
    if (unit.name == "root") {
      u.root_padded = unit.padded;
      u.root_shard = unit.shard;
    } else {
      ++u.blocks;
      u.block_padded = std::max(u.block_padded, unit.padded);
      u.block_shard = std::max(u.block_shard, unit.shard);
    }
  }
  return u;
}

// One unit holding every parameter (the parameter-count mode knows no structure).
Units single_unit(int64_t parameters, int world_size) {
  Units u;
  u.world_size = world_size;
  u.numel = parameters;
  u.shard = (parameters + world_size - 1) / world_size;
  u.root_padded = u.shard * world_size;
  u.root_shard = u.shard;
  return u;
}

bool sharded(const Units& u) {
  return u.world_size > 1;
}

// --- the terms --------------------------------------------------------------------------

// f32 masters (the param dtype in the pure modes) over the rank's shard, padding included.
Bytes master_bytes(const Units& u, const amp::MixedPrecisionPolicy& p) {
  return bytes_of(u.shard, p.master_dtype());
}

// W = 1: one working copy per parameter unless it is the master itself (ParameterSet::bytes).
// W >= 2: gathered units in the param dtype: the root for the whole step, plus the block units
// in flight: 2 (current + prefetched) with reshard-after-forward, all of them without.
Bytes working_bytes(const Units& u, const amp::MixedPrecisionPolicy& p, bool reshard) {
  if (!sharded(u)) return p.param_dtype == p.master_dtype() ? 0 : bytes_of(u.numel, p.param_dtype);
  const int64_t in_flight = reshard ? std::min<int64_t>(2, u.blocks) : u.blocks;
  return bytes_of(u.root_padded + in_flight * u.block_padded, p.param_dtype);
}

// The gradient shard each rank keeps from its units' reduce-scatter (W = 1: every gradient).
Bytes grad_shard_bytes(const Units& u, const amp::MixedPrecisionPolicy& p) {
  return bytes_of(sharded(u) ? u.shard : u.numel, p.reduce_dtype);
}

// W >= 2: the full-unit gradient buffers of backward: the root unit's for all of it, plus one
// block unit's while that block's backward runs.
Bytes grad_unit_buffer_bytes(const Units& u, const amp::MixedPrecisionPolicy& p) {
  if (!sharded(u)) return 0;
  return bytes_of(u.root_padded + u.block_padded, p.reduce_dtype);
}

// W >= 2: the rank's cast shard that all-gather sends, for the largest unit.
Bytes send_buffer_bytes(const Units& u, const amp::MixedPrecisionPolicy& p) {
  if (!sharded(u)) return 0;
  return bytes_of(std::max(u.root_shard, u.block_shard), p.param_dtype);
}

// W >= 2: a reduce-scatter in flight (at most one: the runtime waits for it before starting the
// next) holds its unit's full gradient buffer and the blocks the all-to-all receives (the same
// size), both in the reduce dtype, until the next unit's backward ends.
Bytes in_flight_reduce_bytes(const Units& u, const amp::MixedPrecisionPolicy& p) {
  if (!sharded(u)) return 0;
  return 2 * bytes_of(std::max(u.root_padded, u.block_padded), p.reduce_dtype);
}

// The communication term shown: the send buffer plus the receive staging of a reduce-scatter.
Bytes comm_bytes(const Units& u, const amp::MixedPrecisionPolicy& p) {
  if (!sharded(u)) return 0;
  return send_buffer_bytes(u, p) + in_flight_reduce_bytes(u, p) / 2;
}

bool uses_kahan(const amp::MixedPrecisionPolicy& p) {
  return p.master_dtype() != DType::f32 && p.master_update == amp::MasterUpdate::kahan;
}

// Buffers of `elements` master-dtype values (StatefulOptimizer: state in the master dtype),
// plus Kahan's compensation buffer, plus `extra_values` (Adam-mini's per-block values).
Bytes optimizer_bytes(int64_t elements, const amp::MixedPrecisionPolicy& p, int buffers,
                      int64_t extra_values) {
  const int64_t per_element = buffers + (uses_kahan(p) ? 1 : 0);
  return bytes_of(per_element * elements + extra_values, p.master_dtype());
}

// Per-block state values (Adam-mini's second moments) on the rank holding the most: one per
// block of each parameter piece it owns (a block cut by a shard boundary counts on both
// sides, as the optimizer keeps the partial means). 0 for an optimizer without such state.
int64_t per_block_values(const ShardLayout& layout, const optim::OptimizerKind& kind) {
  if (!kind.blocks) return 0;
  // Every rank's pieces of every unit are counted: bounded, so the walk stays in seconds.
  const auto pairs =
      static_cast<double>(layout.world_size()) * static_cast<double>(layout.units().size());
  MIXPREC_CHECK(pairs <= 0x1p24, "plan_memory",
                fmt::format("Adam-mini's per-block state is counted rank by rank: {} ranks x {} "
                            "units is more than 2^24 to count; plan a smaller world size (or "
                            "fewer model.n_layers)",
                            layout.world_size(), layout.units().size()));
  int64_t most = 0;
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    int64_t n = 0;
    for (const UnitLayout& unit : layout.units())
      for (const ShardPiece& piece : unit.pieces(rank)) {
        const ParamSlot& slot = unit.params[piece.slot];
        const optim::AdamMiniPartition part = kind.blocks(slot.shape, slot.role);
        if (part.blocks == 0 || part.block_size == 0) continue;
        n += (piece.end - 1) / part.block_size - piece.begin / part.block_size + 1;
      }
    most = std::max(most, n);
  }
  return most;
}

// --- the walk over one step -------------------------------------------------------------

// The largest live total of one step after the first (optimizer state exists). Phases:
// forward end, loss backward, each block's backward (last block first), after backward.
// `accumulating`: a step of several micro-batches; its last one (the peak) runs beside the
// gradients (shards) the earlier ones left, which its backward adds to in place.
Bytes walk_peak(const Units& u, const amp::MixedPrecisionPolicy& p, bool reshard,
                const models::ActivationEstimate& a, Bytes optimizer, bool accumulating) {
  const Bytes master = master_bytes(u, p), send = send_buffer_bytes(u, p);
  const Bytes working = working_bytes(u, p, reshard);
  const Bytes held = accumulating ? grad_shard_bytes(u, p) : 0;
  const Bytes resident = master + working + optimizer + send + a.batch + held;
  const Bytes saved_blocks = a.blocks_saved(a.blocks);
  const DType r = p.reduce_dtype;

  // The [vocab, d] weight gradients (ActivationEstimate::vocab_grad_numel), made whole before
  // they are added to the parameter's. Untied, the LM head's is a transient right after the
  // loss (its logits' transients freed by then) and the embedding's at the end of backward,
  // both only while micro-batches accumulate (else each becomes the gradient itself). Tied,
  // the head's waits in the engine's buffer for the embedding's through the whole backward,
  // and the two are summed at its end.
  const Bytes vocab_grad = sharded(u) ? 0 : bytes_of(a.vocab_grad_numel, r);
  const Bytes head_grad = accumulating ? vocab_grad : 0;
  const Bytes held_head_grad = a.tied_embeddings && accumulating ? vocab_grad : 0;
  const Bytes end_grad = a.tied_embeddings ? (accumulating ? 2 : 1) * vocab_grad : head_grad;

  Bytes peak = resident + a.root_saved + saved_blocks + a.forward_transient;
  peak = std::max(peak, resident + a.root_saved + saved_blocks +
                            std::max<Bytes>(a.loss_backward_transient, head_grad));
  for (int64_t done = 0; done < a.blocks; ++done) {  // `done` blocks' backward finished
    // The blocks before this one keep what they saved; this one holds all its activations
    // (its own, or recomputed when checkpointed).
    const Bytes saved = a.blocks_saved(a.blocks - done - 1) + a.block_saved;
    // Sharded: the root's and this block's full buffers, the finished blocks' shards, and
    // the previous block's reduce-scatter still in flight (its buffer + staging).
    const Bytes in_flight = done > 0 ? 2 * bytes_of(u.block_padded, r) : 0;
    const int64_t new_shards = accumulating ? 0 : done * u.block_shard;
    const Bytes grads = sharded(u)
                            ? bytes_of(u.root_padded + new_shards + u.block_padded, r) + in_flight
                        : accumulating ? 0
                                       : bytes_of(u.numel - (a.blocks - done) * u.block_padded, r);
    // The first block (the last backward) has no block before it to prefetch.
    const Bytes no_prefetch = sharded(u) && reshard && a.blocks > 1 && done == a.blocks - 1
                                  ? bytes_of(u.block_padded, p.param_dtype)
                                  : 0;
    peak = std::max(
        peak, resident + saved + grads + held_head_grad + a.block_backward_transient - no_prefetch);
  }
  // Backward done: every gradient (shard) until zero_grad, the optimizer's step over them.
  peak =
      std::max(peak, resident - held + grad_shard_bytes(u, p) + a.kept_after_backward + end_grad);
  return peak;
}

MemoryPlan fill(const Units& u, const amp::MixedPrecisionPolicy& p, bool reshard, Bytes optimizer) {
  MemoryPlan plan;
  plan.world_size = u.world_size;
  plan.parameters = u.numel;
  plan.shard_numel = u.shard;
  plan.master = master_bytes(u, p);
  plan.working = working_bytes(u, p, reshard);
  plan.grads = grad_shard_bytes(u, p) + grad_unit_buffer_bytes(u, p);
  plan.optimizer = optimizer;
  plan.comm = comm_bytes(u, p);
  return plan;
}

void check_world_size(int world_size) {
  MIXPREC_CHECK(world_size >= 1 && world_size <= kMaxPlannedWorldSize, "plan_memory",
                "world size must be in [1, " + std::to_string(kMaxPlannedWorldSize) + "], got " +
                    std::to_string(world_size));
}

// Parameter tensors and parameters of the model with `layers` blocks, `dense` of them dense.
struct ModelSize {
  double tensors = 0, parameters = 0;
};
// The family's config with `layers` blocks of kind `block_kind` (ModelSpec::with_blocks).
ModelSize size_with(const config::ModelConfig& m, int64_t layers, int64_t block_kind) {
  const std::unique_ptr<models::Model> model =
      models::make_model(models::model_spec(m.kind).with_blocks(m, layers, block_kind));
  return {static_cast<double>(model->parameters().specs().size()),
          static_cast<double>(model->parameters().parameter_count())};
}

}  // namespace

int optimizer_buffers_per_element(std::string_view optimizer, double momentum) {
  return optim::optimizer_kind(optimizer).buffers_per_element({.momentum = momentum});
}

std::size_t predict_rss(const MemoryPlan& plan, int threads, std::size_t token_file_bytes) {
  constexpr double kMiB = 1 << 20;
  const double mib = kRssCodeMiB + (plan.world_size > 1 ? kRssMpiCodeMiB : 0.0) + kRssHeapMiB +
                     kRssHeapPerThreadMiB * std::max(threads, 1);
  const double factor = plan.routed ? kRssAllocatorFactorMoe : kRssAllocatorFactorDense;
  return static_cast<std::size_t>(factor * static_cast<double>(plan.peak) + mib * kMiB) +
         token_file_bytes;
}

void check_batch_splits(const config::TrainConfig& config, int world_size) {
  check_world_size(world_size);
  const int64_t rows = config.training.batch_size, local = config.training.local_batch_size;
  MIXPREC_CHECK(rows % world_size == 0, "training.batch_size",
                std::to_string(rows) + " does not split evenly over " + std::to_string(world_size) +
                    " ranks");
  MIXPREC_CHECK(local == 0 || (rows / world_size) % local == 0, "training.local_batch_size",
                std::to_string(local) + " rows per micro-batch do not divide the " +
                    std::to_string(rows / world_size) + " rows each of " +
                    std::to_string(world_size) +
                    " ranks has per step (training.batch_size = " + std::to_string(rows) + ")");
}

int64_t micro_batch_rows(const config::TrainConfig& config, int world_size) {
  const int64_t per_rank = config.training.batch_size / world_size;
  return config.training.local_batch_size > 0 ? config.training.local_batch_size : per_rank;
}

void check_model_plannable(const config::ModelConfig& m) {
  // The largest of the family's kinds of block (an MoE's first blocks may be dense), times
  // every block, bounds the whole model (in double: no overflow).
  const models::ModelSpec& spec = models::model_spec(m.kind);
  const ModelSize one = size_with(m, 1, 0);
  ModelSize block{0, 0};
  for (int64_t k = 0; k < spec.block_kinds(m); ++k) {
    const ModelSize a = size_with(m, 1, k), b = size_with(m, 2, k);
    block.tensors = std::max(block.tensors, b.tensors - a.tensors);
    block.parameters = std::max(block.parameters, b.parameters - a.parameters);
  }
  const double layers = static_cast<double>(m.n_layers);
  const auto whole = [&](double ModelSize::*f) { return one.*f + (layers - 1) * block.*f; };
  const double tensors = whole(&ModelSize::tensors), parameters = whole(&ModelSize::parameters);
  const std::string keys = "model.n_layers = " + std::to_string(m.n_layers);
  MIXPREC_CHECK(tensors <= static_cast<double>(kMaxPlannedTensors), "model.n_layers",
                fmt::format("{} gives {:.4g} parameter tensors, more than the {} the memory "
                            "planner describes one by one (the largest models today have "
                            "under 50,000)",
                            keys, tensors, kMaxPlannedTensors));
  MIXPREC_CHECK(parameters <= static_cast<double>(kMaxPlannedParameters), "model.n_layers",
                fmt::format("{} with model.d_model = {}, model.d_ff = {}, model.vocab_size = {}{} "
                            "gives {:.4g} parameters, more than the planner's 1e15",
                            keys, m.d_model, m.d_ff, m.vocab_size, spec.size_keys(m), parameters));
}

MemoryPlan plan_memory(const config::TrainConfig& config, int world_size) {
  check_batch_splits(config, world_size);
  // Up to 2 blocks the model is as cheap to describe as the check (machine_fit's corners).
  if (config.model.n_layers > 2) check_model_plannable(config.model);
  const std::unique_ptr<models::Model> model = models::make_model(config.model);
  const ShardLayout layout(*model, world_size);
  const Units u = units_of(layout);
  const amp::MixedPrecisionPolicy& p = config.training.policy;
  const bool reshard = config.parallelism.reshard_after_forward;

  const optim::OptimizerKind& kind = optim::optimizer_kind(config.optimizer.name);
  const int buffers = kind.buffers_per_element({.momentum = config.optimizer.momentum});
  const int64_t extra = per_block_values(layout, kind);
  const Bytes optimizer = optimizer_bytes(u.shard, p, buffers, extra);

  // The global batch is split evenly over the ranks, each rank's rows into micro-batches: one
  // micro-batch's activations are live at a time (the gradients accumulate in place).
  const int64_t sequences = micro_batch_rows(config, world_size);
  model->set_activation_checkpoint(
      models::ActivationCheckpoint::from_config(config.activation_checkpoint));
  const models::ActivationEstimate a =
      model->estimate_activations(p, sequences, config.training.seq_len);

  MemoryPlan plan = fill(u, p, reshard, optimizer);
  plan.has_activations = true;
  plan.activations = a.total();
  const bool accumulating = sequences < config.training.batch_size / world_size;
  plan.peak = walk_peak(u, p, reshard, a, optimizer, accumulating);
  plan.routed = model->active_parameter_count().has_value();
  plan.rss = predict_rss(plan, static_cast<int>(std::max<int64_t>(config.training.threads, 1)), 0);
  return plan;
}

MemoryPlan plan_memory_for_count(int64_t parameters, int world_size,
                                 const amp::MixedPrecisionPolicy& policy,
                                 std::string_view optimizer) {
  check_world_size(world_size);
  MIXPREC_CHECK(parameters >= 1 && parameters <= kMaxPlannedParameters, "plan_memory",
                "parameter count must be in [1, 1e15], got " + std::to_string(parameters));
  const Units u = single_unit(parameters, world_size);
  const Bytes state = optimizer_bytes(u.shard, policy, optimizer_buffers_per_element(optimizer), 0);
  // No unit structure: a rank's working copy is its own cast shard (what it sends to the
  // all-gather); the gathered units and their gradient buffers depend on the model's shapes.
  MemoryPlan plan = fill(u, policy, true, state);
  if (sharded(u)) {
    plan.working = bytes_of(u.shard, policy.param_dtype);
    plan.grads = grad_shard_bytes(u, policy);
    plan.comm = 0;
  }
  plan.peak = plan.sum();
  return plan;
}

}  // namespace mixprec::dist
