// The random draws of a stochastic-rounding conversion (private to src/numerics): element i of
// a span starting at `index0` gets word (index0 + i) % 4 of Philox block (index0 + i) / 4, so a
// span split anywhere draws the same numbers as the whole.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/philox.h"

namespace mixprec::detail {

// Calls fn(i, random) for i in [0, n), drawing one Philox block per 4 indices (random 0 when
// the rounding is not stochastic).
template <class Fn>
void for_each_with_random(std::size_t n, const ConvertOptions& o, uint64_t index0, Fn&& fn) {
  if (o.rounding != Rounding::stochastic) {
    for (std::size_t i = 0; i < n; ++i) fn(i, 0u);
    return;
  }
  PhiloxBlock block{};
  uint64_t block_id = ~uint64_t{0};
  for (std::size_t i = 0; i < n; ++i) {
    const uint64_t index = index0 + i;
    if (index / 4 != block_id) {
      block_id = index / 4;
      block = philox_block(o.seed, o.stream, block_id);
    }
    fn(i, block[index % 4]);
  }
}

}  // namespace mixprec::detail
