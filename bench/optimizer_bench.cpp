// Optimizer step throughput and memory per parameter.
//
// 1. AdamW steps over one flat 100M-parameter f32 master (--quick: 10M), alone and as
//    GradScaler::step runs them (a read-only inf/NaN check of the gradients, then the step
//    with 1/scale folded in: the "fused unscale + check + AdamW step"), in GB/s of the bytes
//    an ideal fused kernel moves: gradient read, master, m and v each read and written, and
//    the bf16 working copy written when the policy has one (28-30 bytes per parameter). Each
//    repetition times one step and then a 2-thread memcpy moving the same number of bytes
//    (read + write, through DRAM-sized buffers of at most 512 MiB each way, repeated as
//    needed); the ratio is the median of per-repetition ratios (target >= 0.5).
// 2. Bytes per parameter each policy costs, measured as Allocator::instance() deltas: the
//    parameter (master + working copy), the optimizer state after the first step, and the
//    gradient in the reduce dtype.
//
// Usage: bench_optimizer [--reps=N] [--threads=N] [--quick]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/core/parallel.h"
#include "mixprec/optim/adam_mini.h"
#include "mixprec/optim/adamw.h"
#include "mixprec/tensor/allocator.h"

using namespace mixprec;
using namespace mixprec::optim;

namespace {

amp::MixedPrecisionPolicy policy(DType param, DType reduce, bool f32_master = true,
                                 amp::MasterUpdate update = amp::MasterUpdate::nearest) {
  amp::MixedPrecisionPolicy p;
  p.param_dtype = p.compute_dtype = param;
  p.reduce_dtype = reduce;
  p.f32_master = f32_master;
  p.master_update = update;
  return p;
}

// Bytes per element of the tensor `fill` writes: a constant pattern, no RNG (fast).
Tensor filled(int64_t n, double value, DType dt) {
  return Tensor::full({n}, value, dt);
}

void throughput(int64_t n, int reps) {
  struct Row {
    const char* name;
    amp::MixedPrecisionPolicy policy;
    bool scaler;  // through GradScaler::step (check + step with 1/scale)
  };
  const std::vector<Row> rows{
      {"AdamW f32 master, bf16 grads, bf16 working", policy(DType::bf16, DType::bf16), false},
      {"AdamW f32 master, f32 grads, bf16 working", policy(DType::bf16, DType::f32), false},
      {"AdamW f32 master, f32 grads (fp32)", policy(DType::f32, DType::f32), false},
      {"scaler check + AdamW, bf16 grads", policy(DType::bf16, DType::bf16), true},
      {"scaler check + AdamW, f32 grads", policy(DType::bf16, DType::f32), true},
  };
  std::printf("AdamW step, %lld parameters, %d threads, median of %d\n\n",
              static_cast<long long>(n), num_threads(), reps);
  std::printf("%-46s %8s %8s %8s %7s\n", "case", "B/param", "GB/s", "memcpy", "ratio");
  for (const Row& r : rows) {
    auto p = std::make_shared<Parameter>("w", filled(n, 0.5, DType::f32), r.policy);
    p->set_grad(filled(n, 1e-3, r.policy.reduce_dtype));
    AdamW opt({p}, 1e-4, 0.01);
    const double per_param = static_cast<double>(dtype_size(r.policy.reduce_dtype)) + 3 * 8 +
                             (p->has_working_copy() ? dtype_size(r.policy.param_dtype) : 0);
    const double bytes = per_param * static_cast<double>(n);
    amp::GradScaler scaler;
    const bench::VsMemcpy m = bench::measure_vs_memcpy(
        bytes, reps,
        [&] {
          if (!r.scaler) return opt.step();
          if (!scaler.step(opt).stepped) std::abort();  // the gradients are finite
          scaler.update();
        },
        [] {}, 512.0 * (1 << 20));  // DRAM-sized buffers, repeated as needed
    std::printf("%-46s %8.0f %8.1f %8.1f %7.2f\n", r.name, per_param, m.gbps, m.memcpy_gbps,
                m.ratio);
  }
}

double delta_per(std::size_t before, std::size_t after, int64_t n) {
  return static_cast<double>(after - before) / static_cast<double>(n);
}

void memory_table() {
  struct Row {
    const char* name;
    amp::MixedPrecisionPolicy policy;
    bool mini;
  };
  const std::vector<Row> rows{
      {"fp32, AdamW", policy(DType::f32, DType::f32), false},
      {"bf16-mixed, AdamW", policy(DType::bf16, DType::f32), false},
      {"bf16-pure SR, AdamW",
       policy(DType::bf16, DType::bf16, false, amp::MasterUpdate::stochastic), false},
      {"bf16-pure Kahan, AdamW", policy(DType::bf16, DType::bf16, false, amp::MasterUpdate::kahan),
       false},
      {"bf16-mixed, Adam-mini", policy(DType::bf16, DType::f32), true},
  };
  const Shape shape{2048, 2048};  // 4M parameters; Adam-mini: one v per row
  const int64_t n = shape_numel(shape);
  std::printf("\nbytes per parameter (Allocator deltas, [2048, 2048] weight)\n\n");
  std::printf("%-24s %7s %7s %7s %9s\n", "policy, optimizer", "param", "state", "total", "+ grads");
  Allocator& alloc = Allocator::instance();
  for (const Row& r : rows) {
    const std::size_t m0 = alloc.stats().current_bytes;
    auto p = std::make_shared<Parameter>("w", Tensor::zeros(shape), r.policy);
    const std::size_t m1 = alloc.stats().current_bytes;
    p->set_grad(Tensor::zeros(shape, r.policy.reduce_dtype));
    const std::size_t m2 = alloc.stats().current_bytes;
    std::unique_ptr<Optimizer> opt;
    if (r.mini)
      opt = std::make_unique<AdamMini>(ParamList{p}, 1e-3);
    else
      opt = std::make_unique<AdamW>(ParamList{p}, 1e-3);
    opt->step();
    const std::size_t m3 = alloc.stats().current_bytes;
    const double param = delta_per(m0, m1, n), state = delta_per(m2, m3, n);
    std::printf("%-24s %7.2f %7.2f %7.2f %9.2f\n", r.name, param, state, param + state,
                param + state + delta_per(m1, m2, n));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Options opt = bench::parse_options(
      argc, argv, 7, {"--quick"}, "bench_optimizer [--reps=N] [--threads=N] [--quick]");
  set_num_threads(opt.threads);
  const int64_t n = bench::has_flag(opt, "--quick") ? 10'000'000 : 100'000'000;
  throughput(n, opt.reps);
  memory_table();
  return 0;
}
