// The one pass every update rule makes over a parameter: tiles of the gradient (any of f32,
// bf16, f16), the master and the state are presented to the rule in f32; the rule writes the
// new master values; the pass stores them (f32, or a narrow master rounded per the policy),
// stores narrow state back, and refreshes the working copy from the new master, all while the
// tile is in L1. Tasks are fixed chunks of the element range, so the bits never depend on the
// thread count.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>

#include "mixprec/optim/parameter.h"

namespace mixprec::optim::detail {

inline constexpr int64_t kTile = 512;                // elements per tile (2 KiB per f32 buffer)
inline constexpr int64_t kChunk = int64_t{1} << 16;  // elements per parallel task
inline constexpr int kMaxState = 2;

// One tile in f32. The rule reads g[i] * inv_scale, p[i] and s[k][i], updates s[k][i] in
// place and writes p_new[i]. For an f32 master p_new == p (in place): read p[i] before
// writing p_new[i].
struct Tile {
  int64_t begin;  // parameter index of element 0
  int64_t len;
  float inv_scale;
  const float* g;
  const float* p;
  std::array<float*, kMaxState> s;
  float* p_new;
};

using TileRule = std::function<void(const Tile&)>;

// Keys of the stochastic rounding of a parameter's buffers at one step.
struct RoundingKeys {
  uint64_t seed = 0;
  uint64_t name_hash = 0;  // fnv1a(parameter name)
  int64_t step = 0;
  // Element i of the tensor draws at counter index_offset + i: a shard piece passes its offset
  // in the whole parameter, so sharded and unsharded runs round the same element alike.
  int64_t index_offset = 0;
};

uint64_t fnv1a(const std::string& s);
// The Philox stream of buffer `buffer` (0: master, 1 + k: state k).
uint64_t rounding_stream(const RoundingKeys& keys, int buffer);

// Runs `rule` over every element of `param`: state tensors are contiguous, have the master's
// dtype and numel; `kahan` is defined iff the policy asks for compensated updates of a narrow
// master.
void fused_update(Parameter& param, const Tensor& grad, float inv_scale, std::span<Tensor> state,
                  Tensor& kahan, const RoundingKeys& keys, const TileRule& rule);

// f64 sum of (g[i] * inv_scale)^2 over elements [begin, end) of a contiguous f32/bf16/f16
// gradient, widened tile by tile (the squares of clipping's norm and of Adam-mini's blocks).
double square_sum(const Tensor& grad, int64_t begin, int64_t end, float inv_scale);

// The gradient as the optimizers read it: contiguous, the parameter's shape, f32/bf16/f16.
Tensor checked_grad(const Parameter& param, const Tensor& grad, const char* where);

}  // namespace mixprec::optim::detail
