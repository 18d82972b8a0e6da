// How grouped_linear spreads independent products over the threads (private to src/ops).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

struct WorkTask {
  double work;  // multiply-adds
  std::function<void()> run;
};

// Runs every task once as spread_work plans it for num_threads(): the shared ones in order,
// then the queue in one parallel region (each thread's gemm kept whole); the first exception
// a task throws is rethrown after the region.
void run_spread(const std::vector<WorkTask>& tasks);

inline double product_work(int64_t m, int64_t n, int64_t k) {
  return static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}

}  // namespace mixprec::detail
