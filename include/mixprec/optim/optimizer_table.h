// The optimizers, one row each: the name optimizer.name selects, how to make one, and the
// state it keeps per parameter element and per block. The config loader, the trainer's
// factory, the memory planner and sharded checkpoints all read this table.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "mixprec/optim/adam_mini.h"
#include "mixprec/optim/optimizer.h"

namespace mixprec::optim {

// The [optimizer] settings every row may read (a row ignores what it has no use for).
struct OptimizerSettings {
  double lr = 1e-3;
  double weight_decay = 0.0;
  bool decay_every_parameter = false;  // ParamGroup's: torchtitan's rule, or nanoGPT's
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double momentum = 0.0;
  bool nesterov = false;
  uint64_t seed = 0;  // stochastic rounding of narrow masters (the pure modes)
};

struct OptimizerKind {
  const char* name;  // optimizer.name
  std::unique_ptr<Optimizer> (*make)(const ParamList& params, const OptimizerSettings& settings);
  // State buffers of one value per parameter element (in the master dtype).
  int (*buffers_per_element)(const OptimizerSettings& settings);
  // A state buffer of one value per block of elements (null: every buffer is elementwise),
  // and how a parameter's elements fall into those blocks: a sharded checkpoint takes a
  // block's value from the rank holding its first element.
  const char* per_block_buffer;
  AdamMiniPartition (*blocks)(const Shape& shape, const ParamRole& role);
};

// Every row, in the table's order.
std::span<const OptimizerKind> optimizer_kinds();
// The row named `name`; an Error naming optimizer.name and listing the names otherwise.
const OptimizerKind& optimizer_kind(std::string_view name);
// The row whose per-block buffer is called `buffer`, or null (an elementwise buffer).
const OptimizerKind* per_block_owner(std::string_view buffer);

}  // namespace mixprec::optim
