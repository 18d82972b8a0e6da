// Thread-count control shared by every parallel kernel. Results never depend on it:
// work is split into fixed-size chunks whose boundaries do not move with the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace mixprec {

// Number of threads parallel kernels may use (defaults to the OpenMP default).
int num_threads();
void set_num_threads(int n);

// Runs fn(begin, end) over [0, n) in chunks of `grain` elements, in parallel when n is
// large enough to pay for it. Chunk boundaries are multiples of `grain` whatever the
// thread count, so a deterministic fn gives deterministic results. If fn throws, the first
// exception is rethrown once every chunk has run or thrown.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace mixprec
