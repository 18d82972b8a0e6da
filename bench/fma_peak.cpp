// The timing driver of the FMA peak probes (no ISA flags: it only calls them).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "fma_peak.h"

namespace mixprec::bench {

double measure_fma_peak(int threads, int lanes, double (*chains)(long iters), long iters) {
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<double> sink(static_cast<size_t>(threads));  // keeps the chains alive
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    { sink[static_cast<size_t>(omp_get_thread_num())] = chains(iters); }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (sink[0] == 12345.0) std::printf("!");
    best = std::max(best, 2.0 * lanes * 12 * static_cast<double>(iters) * threads / s * 1e-9);
  }
  return best;
}

}  // namespace mixprec::bench
