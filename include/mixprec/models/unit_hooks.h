// How a fully sharded runtime (dist/sharded_model.h) takes part in a model's forward: the
// model asks it for every weight, and tells it when the forward enters and leaves each
// transformer block, so it can gather a block's weights just in time, free them after, and
// hook the block's backward (the identity nodes enter/leave return carry those hooks).
// Without hooks a model reads its ParameterSet's working copies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::models {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  // The tensor the forward uses for a parameter (a leaf requiring grad).
  virtual const Tensor& weight(std::string_view name) = 0;
  // `unit` is the block's name ("blocks.3"); x its input, y its output. Each returns the
  // tensor the forward continues with. The forward ends with leave_unit("root", logits):
  // every weight outside the blocks has been read by then.
  virtual Tensor enter_unit(const std::string& unit, const Tensor& x) = 0;
  virtual Tensor leave_unit(const std::string& unit, const Tensor& y) = 0;
  // Sums `counts` over the data-parallel ranks in place (a collective every rank's forward
  // makes at the same point): statistics of the whole batch, such as an MoE layer's expert
  // loads for global-batch balancing.
  virtual void sum_counts_over_ranks(std::vector<int64_t>& counts) = 0;
};

}  // namespace mixprec::models
