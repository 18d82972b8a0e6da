// Adam-mini (Zhang et al. 2024, "Adam-mini: Use Fewer Learning Rates To Gain More"): Adam with
// one second-moment value per block of parameters instead of one per parameter. Per block B:
//   vmean_B = b2 * vmean_B + (1 - b2) * mean_{i in B}(g_i^2)
//   m = b1 * m + (1 - b1) * g
//   p = p * (1 - lr * wd) - lr * m * (1 / (1 - b1^t)) / (sqrt(vmean_B) / sqrt(1 - b2^t) + eps)
// (the reference implementation's formula and order of operations, in f32; the block mean of
// g^2 is accumulated in f64 over fixed chunks, so it does not depend on the thread count).
//
// Partition (the reference code's, v1.1, by Hessian structure), from Parameter::role():
//   role.heads = H > 0   query/key weights [H * head_dim, d]: one block per head, i.e. the
//                        head_dim rows of that head (head_dim * d values);
//   2-D and higher       one block per output row (numel / size(-1) blocks of size(-1)):
//                        value, output projection, MLP, and embedding / LM-head rows (one per
//                        token); a stacked [E, F, d] expert weight has E·F, one per row of
//                        each expert, as E separate [F, d] weights would (its bias [E, F]:
//                        one per expert, as each expert's 1-D bias);
//   1-D and 0-D          one block for the whole tensor (norm gains, biases).
// A shard piece of a parameter (Parameter::shard_piece, fully sharded training) keeps the
// whole parameter's block boundaries; for the at most two blocks it holds only part of,
// set_sum_cut_blocks() adds the parts over the ranks, so every rank keeps the whole block's
// mean (without it, the mean of the part it holds).
//
// Memory: the state is m (numel values) + vmean (one per block) instead of AdamW's 2 * numel:
// with an f32 master that is 4 bytes per parameter instead of 8, so master + state go from 12
// to ~8 bytes per parameter (plus 2 for a bf16 working copy): about a third of the optimizer's
// memory, half of its state. State: "exp_avg" (m) and "vmean" [blocks].
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "mixprec/optim/stateful_optimizer.h"

namespace mixprec::optim {

// A block of a shard piece that the shard's boundary cuts: the piece holds only part of it.
struct CutBlock {
  const Parameter* param = nullptr;
  int64_t first_element = 0;  // the block's first element in the whole parameter
  double sum_sq = 0;          // in: sum of (g * inv_scale)^2 over the piece's part (f64);
                              // out: over the whole block
};

struct AdamMiniOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  uint64_t seed = 0;  // stochastic rounding of narrow masters
};

// How Adam-mini splits a parameter: `blocks` consecutive runs of `block_size` elements.
struct AdamMiniPartition {
  int64_t blocks;
  int64_t block_size;
};
AdamMiniPartition adam_mini_partition(const Shape& shape, const ParamRole& role);

class AdamMini : public StatefulOptimizer {
 public:
  explicit AdamMini(std::vector<ParamGroup> groups, AdamMiniOptions options = {});
  AdamMini(ParamList params, double lr, double weight_decay = 0.01, AdamMiniOptions options = {});

  const AdamMiniOptions& options() const { return options_; }
  // Fully sharded training: `fn` adds every cut block's parts over the ranks (one collective
  // per step; called on every step, with an empty list when this rank has no cut block), so a
  // cut block's second moment is that of the whole block. Unset: each piece's part alone.
  void set_sum_cut_blocks(std::function<void(std::vector<CutBlock>&)> fn) {
    sum_cut_blocks_ = std::move(fn);
  }

 protected:
  std::vector<BufferSpec> buffer_specs(const Parameter& param) const override;
  void before_updates(const ParamList& params, const std::vector<Tensor>& grads,
                      float inv_scale) override;
  void update(Parameter& param, const ParamGroup& group, ParamState& state, const Tensor& grad,
              float inv_scale) override;

 private:
  AdamMiniOptions options_;
  std::function<void(std::vector<CutBlock>&)> sum_cut_blocks_;
  // This step's whole-block sums of the cut blocks: (parameter, first element) -> sum.
  std::map<std::pair<const Parameter*, int64_t>, double> cut_sums_;
};

}  // namespace mixprec::optim
