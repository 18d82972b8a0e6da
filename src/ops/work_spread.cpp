// How grouped_linear spreads independent products over the threads (work_spread.h).
#include "work_spread.h"

#include <algorithm>
#include <atomic>
#include <exception>

#include "mixprec/backend/backend.h"
#include "mixprec/core/parallel.h"

namespace mixprec {
namespace detail {

void run_spread(const std::vector<WorkTask>& tasks) {
  std::vector<double> work;
  for (const WorkTask& t : tasks) work.push_back(t.work);
  const WorkSpread plan = spread_work(work, num_threads());
  for (std::size_t i : plan.shared) tasks[i].run();
  if (plan.queue.empty()) return;
  std::atomic<std::size_t> next{0};
  // An exception must not leave the region: the first is kept and rethrown after it.
  std::exception_ptr error;
#pragma omp parallel num_threads(plan.threads) if (plan.threads > 1)
  {
    const backend::WholeProductScope whole;
    for (std::size_t at = next++; at < plan.queue.size(); at = next++) {
      try {
        tasks[plan.queue[at]].run();
      } catch (...) {
#pragma omp critical(mixprec_grouped_linear_error)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

WorkSpread spread_work(const std::vector<double>& work, int threads) {
  double total = 0;
  for (double w : work) total += w;
  WorkSpread plan;
  std::vector<std::size_t> rest;
  for (std::size_t i = 0; i < work.size(); ++i)
    (2 * work[i] >= total && total > 0 ? plan.shared : rest).push_back(i);
  if (rest.empty()) return plan;
  std::stable_sort(rest.begin(), rest.end(),
                   [&](std::size_t a, std::size_t b) { return work[a] > work[b]; });
  plan.threads =
      static_cast<int>(std::clamp<int64_t>(threads, 1, static_cast<int64_t>(rest.size())));
  plan.queue = std::move(rest);
  return plan;
}

}  // namespace detail
}  // namespace mixprec
