// The memory planner: bytes per rank of a training step, from the meta model (nothing is
// allocated), for `mixprec memory` and for checking a run against the allocator's peak.
//
// Terms (per rank; W = world size, S = the layout's shard_numel(): every unit padded to a
// multiple of W, then divided by W; at W = 1, S is the parameter count):
//   master       S x master dtype (f32; the param dtype in the bf16-pure modes)
//   working      W = 1: one working copy per parameter in the param dtype (0 when it is the
//                master itself). W >= 2: gathered units in the param dtype: the root unit plus
//                2 block units (current + prefetched) with reshard-after-forward, all units
//                without it.
//   grads        W = 1: every parameter's gradient in the reduce dtype. W >= 2: the gradient
//                shard (S x reduce dtype) plus the full-unit buffers of backward (the root
//                unit's and one block unit's, reduce dtype).
//   optimizer    AdamW 2 buffers, SGD (momentum) 1, Adam-mini 1 + one value per block, in the
//                master dtype over S elements; + a Kahan buffer in bf16-pure-kahan.
//   activations  what autograd saves for backward over the local batch (batch_size / W
//                sequences of seq_len tokens), plus the step's other live tensors: the batch
//                and the router logits the model keeps (the model's estimate_activations derives
//                it).
//   comm         W >= 2: the cast shard all-gather sends (param dtype x the largest unit
//                shard) and the blocks a reduce-scatter receives (reduce dtype x the largest
//                padded unit; the one in flight also keeps its unit's gradient buffer, which
//                the peak walk counts); 0 at W = 1.
// `peak` is not the sum of the terms: gradients grow while backward frees activations, so
// the planner walks the step (forward end, loss backward, each block's backward from the
// last, optimizer step) and takes the largest live total; that is what the allocator's
// peak_bytes of a step measures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "mixprec/amp/policy.h"
#include "mixprec/config/train_config.h"

namespace mixprec::dist {

// What the planner takes. Ranks: 2^20, far beyond today's largest jobs (about 10^5
// accelerators), and few enough that the per-rank loops (Adam-mini's block counts) stay short.
// Parameters: 10^15, 500 x today's largest models, and low enough that every byte total
// (at most 64 bytes a parameter) stays exact in 64 bits. Parameter tensors: 2^18 (DeepSeek-V3
// has about 47,000); plan_memory describes each one, a few hundred bytes and microseconds each.
inline constexpr int64_t kMaxPlannedWorldSize = int64_t{1} << 20;
inline constexpr int64_t kMaxPlannedParameters = 1'000'000'000'000'000;
inline constexpr int64_t kMaxPlannedTensors = int64_t{1} << 18;

struct MemoryPlan {
  int world_size = 1;
  int64_t parameters = 0;
  int64_t shard_numel = 0;  // elements of parameters each rank owns (padding included)
  std::size_t master = 0;
  std::size_t working = 0;
  std::size_t grads = 0;
  std::size_t optimizer = 0;
  bool has_activations = false;  // false in the parameter-count mode (no model shape known)
  std::size_t activations = 0;
  std::size_t comm = 0;
  std::size_t peak = 0;  // the largest live total over the step (see above)
  // The process's resident set between steps (VmRSS), per rank: see predict_rss. 0 in the
  // parameter-count mode.
  std::size_t rss = 0;
  // A model whose tokens read only some of its parameters (a mixture of experts): its buffers
  // change size with the routing (predict_rss' allocator factor).
  bool routed = false;
  // The plain sum of the terms: an upper bound on the peak.
  std::size_t sum() const { return master + working + grads + optimizer + activations + comm; }
};

// From a config's model, batch, precision policy, optimizer and parallelism settings.
// A rank's batch is batch_size / W sequences, run local_batch_size at a time (gradient
// accumulation: activations of one micro-batch). Error: world_size < 1, or a batch that
// check_batch_splits refuses (the trainer refuses it too), or a model past the bounds above
// (check_model_plannable, before anything is built).
MemoryPlan plan_memory(const config::TrainConfig& config, int world_size);

// Error naming model.n_layers (and the width keys) when the model has more than
// kMaxPlannedTensors parameter tensors or kMaxPlannedParameters parameters, found from 1- and
// 2-layer models (all blocks alike), so a hostile n_layers costs milliseconds.
void check_model_plannable(const config::ModelConfig& model);

// What a training process holds beside tensors, measured on the main job (AMD EPYC Zen 5,
// Debian 12's libraries, `mixprec train configs/moe_small.toml`; README "Process RSS"):
//   allocator blocks  the step's peak in size classes up to 25% larger, plus the cache: 1.40 x
//                     the peak for an MoE (its buffers change size with the routing, the cache
//                     is trimmed past 2 x the peak), 1.10 for a dense model
//   code              the binary and its libraries' pages in use: 11.5 MiB (+5.1 MiB of MPI
//                     plug-ins at W > 1: a single process never initialises MPI)
//   runtime heap      glibc's own and the GEMM's per-thread packing buffers: 2.3 MiB + 3.3 MiB
//                     per compute thread
//   token file        memory-mapped and read whole once (the unigram entropy): its size
// A checkpoint save copies the masters and optimizer state once more (on every rank): the
// high-water mark shows it, the steady state does not.
inline constexpr double kRssAllocatorFactorDense = 1.10, kRssAllocatorFactorMoe = 1.40;
inline constexpr double kRssCodeMiB = 11.5, kRssMpiCodeMiB = 5.1;
inline constexpr double kRssHeapMiB = 2.3, kRssHeapPerThreadMiB = 3.3;
// The plan's peak as process RSS between steps: the allocator factor (plan.routed: MoE, or dense) x
// peak
// + code (+ MPI's at W > 1) + heap + heap per thread x threads + token_file_bytes.
std::size_t predict_rss(const MemoryPlan& plan, int threads, std::size_t token_file_bytes);

// Error naming training.batch_size when it does not split evenly over `world_size` ranks, or
// training.local_batch_size when it does not divide a rank's rows.
void check_batch_splits(const config::TrainConfig& config, int world_size);
// The rows of one forward/backward on a rank: local_batch_size, or batch_size / W.
int64_t micro_batch_rows(const config::TrainConfig& config, int world_size);

// From a parameter count alone (no activations: has_activations = false, peak = sum of the
// other terms, one unit of `parameters` elements). optimizer: adamw | sgd | adam-mini (SGD
// with momentum; Adam-mini's per-block values are not known without shapes and are left out).
MemoryPlan plan_memory_for_count(int64_t parameters, int world_size,
                                 const amp::MixedPrecisionPolicy& policy,
                                 std::string_view optimizer);

// Per-element buffers of optimizer state (in the master dtype): adamw 2, sgd 1 (0 without
// momentum), adam-mini 1; Kahan's compensation buffer comes on top. Error naming an unknown
// optimizer.
int optimizer_buffers_per_element(std::string_view optimizer, double momentum = 0.9);

}  // namespace mixprec::dist
