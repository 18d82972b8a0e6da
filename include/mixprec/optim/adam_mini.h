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
//   2-D and higher       one block per output row (size(0) blocks of numel / size(0)): value,
//                        output projection, MLP, and embedding / LM-head rows (one per token);
//   1-D and 0-D          one block for the whole tensor (norm gains, biases).
// A shard piece of a parameter (Parameter::shard_piece, fully sharded training) keeps the
// whole parameter's block boundaries; the at most two blocks it holds only part of take the
// mean of g^2 over the part it holds (so a sharded run's second moments differ from an
// unsharded run's in those boundary blocks only).
//
// Memory: the state is m (numel values) + vmean (one per block) instead of AdamW's 2 * numel:
// with an f32 master that is 4 bytes per parameter instead of 8, so master + state go from 12
// to ~8 bytes per parameter (plus 2 for a bf16 working copy): about a third of the optimizer's
// memory, half of its state. State: "exp_avg" (m) and "vmean" [blocks].
#pragma once

#include <cstdint>
#include <vector>

#include "mixprec/optim/stateful_optimizer.h"

namespace mixprec::optim {

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

 protected:
  std::vector<BufferSpec> buffer_specs(const Parameter& param) const override;
  void update(Parameter& param, const ParamGroup& group, ParamState& state, const Tensor& grad,
              float inv_scale) override;

 private:
  AdamMiniOptions options_;
};

}  // namespace mixprec::optim
