// The one pass every update rule makes over a parameter, run by the backend's `update` kernel
// (tiles of gradient, master and state in f32; new master and state stored per the policy;
// the working copy refreshed), and the rounding keys that pass uses.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>

#include "mixprec/backend/kernel_types.h"
#include "mixprec/core/hash.h"
#include "mixprec/optim/parameter.h"

namespace mixprec::optim::detail {

inline constexpr int64_t kChunk = int64_t{1} << 16;  // elements per parallel task
inline constexpr int kMaxState = backend::kMaxUpdateState;

using Tile = backend::UpdateTile;  // (backend/kernel_types.h says what a rule may do)
using TileRule = backend::UpdateRule;

// Keys of the stochastic rounding of a parameter's buffers at one step.
struct RoundingKeys {
  uint64_t seed = 0;
  uint64_t name_hash = 0;  // fnv1a(parameter name)
  int64_t step = 0;
  // Element i of the tensor draws at counter index_offset + i: a shard piece passes its offset
  // in the whole parameter, so sharded and unsharded runs round the same element alike.
  int64_t index_offset = 0;
};

// The Philox stream of buffer `buffer` (0: master, 1 + k: state k).
uint64_t rounding_stream(const RoundingKeys& keys, int buffer);

// Runs `rule` over every element of `param` on the current backend: state tensors are
// contiguous, have the master's dtype and numel; `kahan` is defined iff the policy asks for
// compensated updates of a narrow master.
void fused_update(Parameter& param, const Tensor& grad, float inv_scale, std::span<Tensor> state,
                  Tensor& kahan, const RoundingKeys& keys, const TileRule& rule);

// f64 sum of (g[i] * inv_scale)^2 over elements [begin, end) of a contiguous f32/bf16/f16
// gradient, widened tile by tile (the squares of clipping's norm and of Adam-mini's blocks).
double square_sum(const Tensor& grad, int64_t begin, int64_t end, float inv_scale);

// The gradient as the optimizers read it: contiguous, the parameter's shape, f32/bf16/f16.
Tensor checked_grad(const Parameter& param, const Tensor& grad, const char* where);

}  // namespace mixprec::optim::detail
