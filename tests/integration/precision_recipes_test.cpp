// The mixed-precision recipes end to end, on a small classifier trained with AdamW on FP32
// masters (or bf16-only weights), under autocast, through the loss scaler and the numerics
// monitor:
// 1. fp32, bf16-mixed, fp16-mixed with dynamic loss scaling and fp16-mixed without scaling.
//    The loss is weighted by 2^-16, which puts its gradients where Micikevicius et al. ("Mixed
//    Precision Training", 2018, Fig. 3) found most activation gradients of real networks:
//    below FP16's smallest subnormal. The first three reach fp32's loss; without scaling the
//    fp16 gradients flush to zero, the monitor reports it, and the model does not learn.
// 2. Weights without FP32 masters (bf16-pure) for a few thousand steps: round-to-nearest
//    loses updates smaller than half a bf16 ulp, stochastic rounding and Kahan compensation
//    keep them and track the FP32-master run. Prints the table the README quotes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/amp/numerics_monitor.h"
#include "mixprec/amp/policy.h"
#include "mixprec/ops.h"
#include "mixprec/optim/adamw.h"
#include "mixprec/tensor/allocator.h"

namespace mixprec {
namespace {

using amp::MixedPrecisionPolicy;

// Points in 16-d labelled by which of 4 fixed random directions they align with best.
struct Task {
  Tensor x, targets;
  static Task make(int64_t n) {
    Generator gen(5);
    const int64_t din = 16, classes = 4;
    Task t;
    const Tensor x = Tensor::normal({n, din}, 0, 1, gen, DType::f64);
    const Tensor dirs = Tensor::normal({classes, din}, 0, 1, gen, DType::f64);
    const std::vector<double> s = matmul(x, dirs.transpose(0, 1).contiguous()).to_doubles();
    std::vector<int64_t> labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const double* row = s.data() + i * classes;
      labels[static_cast<size_t>(i)] = std::max_element(row, row + classes) - row;
    }
    t.x = x.to(DType::f32);
    t.targets = Tensor::from_vector(labels);
    return t;
  }
};

struct TrainingRun {
  std::vector<double> losses;  // unweighted cross-entropy per step
  double underflow = 0;        // monitor's mean underflow fraction over the steps
  int64_t skipped = 0;
  double bytes_per_param = 0;  // master + working copy + optimizer state (allocator)
  double final_loss() const {
    const size_t k = std::min<size_t>(50, losses.size());
    return std::accumulate(losses.end() - static_cast<int64_t>(k), losses.end(), 0.0) /
           static_cast<double>(k);
  }
};

// A 2-layer MLP (16 -> hidden -> 4, GELU) trained `steps` times on the whole task.
TrainingRun train(const MixedPrecisionPolicy& policy, const amp::ScalerOptions& scaler_options,
                  int steps, double loss_weight, double lr, int64_t hidden) {
  static const Task task = Task::make(512);
  Generator gen(7);
  Allocator& alloc = Allocator::instance();
  const std::size_t m0 = alloc.stats().current_bytes;
  auto make = [&](const char* name, Tensor init) {
    return std::make_shared<optim::Parameter>(name, init, policy);
  };
  auto w1 = make("w1", Tensor::normal({hidden, 16}, 0, 0.25, gen));
  auto b1 = make("b1", Tensor::zeros({hidden}));
  auto w2 = make("w2", Tensor::normal({4, hidden}, 0, 1 / std::sqrt(double(hidden)), gen));
  auto b2 = make("b2", Tensor::zeros({4}));
  optim::AdamWOptions adam;
  adam.eps = 1e-12;  // below every gradient here, so it never decides the update
  adam.seed = 3;
  optim::AdamW opt({w1, b1, w2, b2}, lr, 0.0, adam);
  amp::GradScaler scaler(scaler_options);
  const amp::NumericsMonitor monitor;
  TrainingRun run;
  const int64_t params =
      w1->master().numel() + b1->master().numel() + w2->master().numel() + b2->master().numel();
  for (int s = 0; s < steps; ++s) {
    Tensor loss;
    {
      amp::AutocastGuard autocast(policy.compute_dtype, policy.compute_dtype != DType::f32);
      const Tensor h = gelu(linear(task.x, w1->value(), b1->value()));
      loss = cross_entropy(linear(h, w2->value(), b2->value()), task.targets);
    }
    run.losses.push_back(loss.item());
    scaler.scale(scale(loss, loss_weight)).backward();
    run.underflow += monitor.observe(s, opt, scaler.get_scale(), false).underflow_fraction();
    if (!scaler.step(opt).stepped) ++run.skipped;
    scaler.update();
    opt.zero_grad();
    if (s == 0) run.bytes_per_param = double(alloc.stats().current_bytes - m0) / double(params);
  }
  run.underflow /= steps;
  return run;
}

MixedPrecisionPolicy unscaled(MixedPrecisionPolicy p) {
  p.loss_scaling = false;
  return p;
}

TEST(PrecisionRecipes, LossScalingRescuesFp16WhereGradientsUnderflow) {
  const double weight = std::ldexp(1.0, -16);
  const int steps = 150;
  auto run = [&](const MixedPrecisionPolicy& p) {
    return train(p, amp::ScalerOptions::for_policy(p), steps, weight, 3e-3, 64);
  };
  const TrainingRun fp32 = run(amp::preset("fp32"));
  const TrainingRun bf16 = run(amp::preset("bf16-mixed"));
  const TrainingRun fp16 = run(amp::preset("fp16-mixed"));
  const TrainingRun fp16_unscaled = run(unscaled(amp::preset("fp16-mixed")));
  std::printf("%-22s %10s %10s %12s %8s\n", "recipe", "first", "final", "underflow", "skipped");
  for (const auto& [name, r] : {std::pair{"fp32", &fp32},
                                {"bf16-mixed", &bf16},
                                {"fp16-mixed (dynamic)", &fp16},
                                {"fp16-mixed unscaled", &fp16_unscaled}})
    std::printf("%-22s %10.4f %10.4f %12.3f %8lld\n", name, r->losses.front(), r->final_loss(),
                r->underflow, static_cast<long long>(r->skipped));
  // The model learns in fp32 (from ln 4 = 1.386).
  ASSERT_LT(fp32.final_loss(), 0.5);
  // bf16-mixed and scaled fp16 reach fp32's loss: within 0.05 (a bf16 weight copy moves the
  // loss by ~1e-2 here; the unscaled run is ~0.9 away).
  EXPECT_NEAR(bf16.final_loss(), fp32.final_loss(), 0.05);
  EXPECT_NEAR(fp16.final_loss(), fp32.final_loss(), 0.05);
  // Unscaled fp16: most gradient elements underflow and the model stays near chance. The
  // monitor flags the same danger on the fp32 run (its gradients would underflow f16 at scale
  // 1) and sees none once the dynamic scaler has moved them into range.
  EXPECT_GT(fp16_unscaled.underflow, 0.5);
  EXPECT_GT(fp32.underflow, 0.5);
  EXPECT_LT(fp16.underflow, 0.05);
  EXPECT_GT(fp16_unscaled.final_loss(), fp32.final_loss() + 0.3);
  // The dynamic scaler found its range: a few early overflow skips at most.
  EXPECT_LT(fp16.skipped, 10);
}

TEST(PrecisionRecipes, PureBf16WithStochasticRoundingOrKahanTracksFp32Masters) {
  const int steps = 3000;
  const double lr = 2e-4;  // updates well below half a bf16 ulp of most weights
  auto run = [&](const MixedPrecisionPolicy& p) {
    return train(p, amp::ScalerOptions::none(), steps, 1.0, lr, 64);
  };
  MixedPrecisionPolicy nearest = amp::preset("bf16-pure");
  nearest.master_update = amp::MasterUpdate::nearest;
  const TrainingRun fp32 = run(amp::preset("fp32"));
  const TrainingRun mixed = run(amp::preset("bf16-mixed"));
  const TrainingRun rne = run(nearest);
  const TrainingRun sr = run(amp::preset("bf16-pure"));
  const TrainingRun kahan = run(amp::preset("bf16-pure-kahan"));
  std::printf("%-30s %10s %12s %14s\n", "weights / update", "final", "vs fp32", "bytes/param");
  for (const auto& [name, r] : {std::pair{"fp32 (f32 masters)", &fp32},
                                {"bf16-mixed (f32 masters)", &mixed},
                                {"bf16-pure, round to nearest", &rne},
                                {"bf16-pure, stochastic", &sr},
                                {"bf16-pure, Kahan", &kahan}})
    std::printf("%-30s %10.4f %+12.4f %14.2f\n", name, r->final_loss(),
                r->final_loss() - fp32.final_loss(), r->bytes_per_param);
  const double gap_rne = rne.final_loss() - fp32.final_loss();
  EXPECT_NEAR(mixed.final_loss(), fp32.final_loss(), 0.02);
  EXPECT_NEAR(sr.final_loss(), fp32.final_loss(), 0.3 * gap_rne);
  EXPECT_NEAR(kahan.final_loss(), fp32.final_loss(), 0.3 * gap_rne);
  EXPECT_GT(gap_rne, 0.02);  // round-to-nearest visibly stalls
  EXPECT_LT(sr.bytes_per_param, 0.6 * mixed.bytes_per_param);
}

}  // namespace
}  // namespace mixprec
