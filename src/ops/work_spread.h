// How grouped_linear spreads independent products over the threads (private to src/ops).
#pragma once

#include <cstddef>
#include <vector>

namespace mixprec::detail {

struct WorkSpread {
  // Tasks holding at least half of all the work: run one at a time, each split over every
  // thread as cpu::gemm splits a lone product (one thread alone would leave the rest idle).
  std::vector<std::size_t> shared;
  // The rest, whole on one thread each: heaviest first, each onto the thread with the least
  // work so far.
  std::vector<std::vector<std::size_t>> per_thread;
};

// `work`: one figure per task (multiply-adds). Which tasks are shared depends on the work
// alone, never on `threads`, so neither do the bits.
WorkSpread spread_work(const std::vector<double>& work, int threads);

}  // namespace mixprec::detail
