// The one pass every optimizer's update rule makes over a parameter (backend::UpdatePass):
// tiles of the gradient (f32, bf16 or f16), the master and the state are presented to the rule
// in f32; the pass stores the new master (f32, or a narrow master rounded nearest-even,
// stochastically or with Kahan compensation), stores narrow state back, and refreshes the
// working copy from the new master, all while the tile is in L1. Tasks are fixed chunks of the
// element range, so the bits never depend on the thread count.
#pragma once

#include <cstdint>

#include "mixprec/backend/kernel_types.h"

namespace mixprec::cpu {

inline constexpr int64_t kUpdateTile = 512;  // elements per tile (2 KiB per f32 buffer)

void update_pass(const backend::UpdatePass& pass, const backend::UpdateRule& rule);

// f64 sum of (g[i] * inv_scale)^2 over elements [begin, end) of a contiguous f32/bf16/f16
// gradient, widened tile by tile (the squares of clipping's norm and of Adam-mini's blocks).
double square_sum(const Tensor& grad, int64_t begin, int64_t end, float inv_scale);

}  // namespace mixprec::cpu
