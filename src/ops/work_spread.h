// How grouped_linear spreads independent products over the threads (private to src/ops).
#pragma once

#include <cstddef>
#include <vector>

namespace mixprec::detail {

struct WorkSpread {
  // Tasks holding at least half of all the work: run one at a time, each split over every
  // thread as the gemm splits a lone product (one thread alone would leave the rest idle).
  std::vector<std::size_t> shared;
  // The rest, heaviest first: each thread takes the next one whole when it is free (a static
  // longest-first plan, corrected for products whose time their multiply-adds misjudge).
  std::vector<std::size_t> queue;
  int threads = 0;  // threads for the queue: no more than it has tasks
};

// `work`: one figure per task (multiply-adds). Which tasks are shared depends on the work
// alone, never on `threads`, and every queued task runs whole on one thread: neither the
// thread count nor which thread takes a task changes the bits.
WorkSpread spread_work(const std::vector<double>& work, int threads);

}  // namespace mixprec::detail
