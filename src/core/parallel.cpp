#include "mixprec/core/parallel.h"

#include <omp.h>

#include <algorithm>
#include <exception>

#include "mixprec/core/error.h"

namespace mixprec {

int num_threads() {
  return omp_get_max_threads();
}

void set_num_threads(int n) {
  MIXPREC_CHECK(n >= 1, "set_num_threads", "thread count must be >= 1, got " + std::to_string(n));
  omp_set_num_threads(n);
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = (n + grain - 1) / grain;
  if (chunks == 1) {  // no OpenMP region at all: kernels call this once per row inside theirs
    fn(0, n);
    return;
  }
  // The same chunks on one thread as on many: fn may rely on end - begin <= grain.
  // An exception must not leave an OpenMP region (that terminates): the first one is kept
  // and rethrown after it.
  std::exception_ptr error;
#pragma omp parallel for schedule(static) if (chunks > 1 && num_threads() > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    try {
      const int64_t begin = c * grain;
      fn(begin, std::min(n, begin + grain));
    } catch (...) {
#pragma omp critical(mixprec_parallel_for_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace mixprec
