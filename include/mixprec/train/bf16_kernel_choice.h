// Which kernel a run's bf16 products take (backend::Backend::bf16_kernels; the cpu backend's in
// cpu/bf16_kernel.h), chosen by measured throughput: the first run on a host times every kernel it
// has and keeps the fastest, and the choice is kept in a per-host cache file so that every later
// run on that host takes the same kernel and so gives the same bits. A resumed run keeps its
// checkpoint's kernel where the host has it; training.bf16_kernel names one outright. The choice
// and the timings that made it go into the run's metrics line and summary.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "mixprec/backend/kernel_types.h"

namespace mixprec::train {

struct Bf16KernelChoice {
  std::string kernel;  // the one in use
  // Why: "training.bf16_kernel", "checkpoint", "measured", "cached", "only one" (or, on the
  // other ranks of a job, "rank 0's choice"). The cache is per host, not per thread count:
  // a choice measured at one thread count is kept at every other.
  std::string reason;
  std::vector<backend::Bf16KernelTiming> timings;  // those that chose it (now, or cached)
  std::string host;                                // the cache's key for this host
  // "avx512-bf16 (measured: avx512-bf16 612, widened 455 GFLOP/s)"
  std::string describe() const;
  // {"kernel":..., "reason":..., "gflops":{name: median, ...}, "host":...}
  std::string to_json() const;
};

// The key this host's entry has in the cache: CPU vendor, family/model/stepping, model name
// and the kernels it can run.
std::string bf16_kernel_host();

// $MIXPREC_CACHE_DIR, else $XDG_CACHE_HOME/mixprec, else $HOME/.cache/mixprec; then
// bf16_kernels.json.
std::string bf16_kernel_cache_path();

// setting: training.bf16_kernel ("auto" or a kernel's name). checkpoint_kernel: the kernel
// of the checkpoint a run resumes from ("" if none). A broken or unwritable cache is
// reported through `warn` and measured around, never fatal. Switches the products to the
// kernel chosen.
Bf16KernelChoice choose_bf16_kernel(const std::string& setting,
                                    const std::string& checkpoint_kernel,
                                    const std::function<void(const std::string&)>& warn);

// Forgets this host's cached choice (the next auto choice measures again); true if there was one.
bool forget_bf16_kernel_choice(const std::function<void(const std::string&)>& warn);

}  // namespace mixprec::train
