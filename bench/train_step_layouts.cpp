// bench_train_step --layouts (train_step_layouts.h).
#include "train_step_layouts.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench_util.h"
#include "mixprec/amp/autocast.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/data/batches.h"
#include "mixprec/models/registry.h"
#include "mixprec/models/transformer/moe.h"
#include "mixprec/ops.h"
#include "mixprec/optim/adamw.h"
#include "mixprec/optim/clip.h"
#include "mixprec/tensor/generator.h"

namespace mixprec::bench {
namespace {

using Clock = std::chrono::steady_clock;

Tensor randn(const Shape& shape, double std, uint64_t seed, DType dtype) {
  Generator gen(seed);
  return Tensor::normal(shape, 0.0, std, gen, DType::f32).to(dtype);
}

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One model in one layout: the training step bench_train_step times (forward + loss under
// autocast, backward through the scaler, unscale, clip 1.0, AdamW, zero_grad).
struct Variant {
  std::string layout;
  amp::MixedPrecisionPolicy policy;
  std::unique_ptr<models::Model> model;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<amp::GradScaler> scaler;
  std::vector<double> seconds;
  uint64_t next = 0;

  Variant(config::ModelConfig m, const char* idle_experts, const char* precision)
      : layout(idle_experts), policy(amp::preset(precision)) {
    m.moe.idle_experts = idle_experts;
    model = models::make_model(m);
    model->materialize(1337, policy);  // the same weights in both layouts (init_slices)
    optim::AdamWOptions ao;
    ao.beta1 = 0.9;
    ao.beta2 = 0.95;
    opt = std::make_unique<optim::AdamW>(model->parameters().parameters(), 1e-3, 0.1, ao);
    scaler = std::make_unique<amp::GradScaler>(amp::ScalerOptions::for_policy(policy));
  }

  double step(const data::Batch& b) {
    const auto t0 = Clock::now();
    Tensor loss;
    {
      amp::AutocastGuard autocast(policy.compute_dtype, policy.compute_dtype != DType::f32);
      loss = model->loss(b.inputs, b.targets).total;
    }
    scaler->scale(loss).backward();
    scaler->unscale(*opt);
    const double norm = optim::grad_norm(opt->parameters());
    scaler->step(*opt, std::isfinite(norm) ? optim::clip_coefficient(norm, 1.0) : 1.0f, norm);
    scaler->update();
    opt->zero_grad();
    return since(t0);
  }

  // n steps on the next batches; timed ones recorded.
  double run(const data::TrainBatches& batches, int n, bool timed) {
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      const double t = step(batches.batch(next++));
      if (timed) seconds.push_back(t);
      sum += t;
    }
    return sum / std::max(n, 1);
  }
};

double min_of(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}
double max_of(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end());
}

void time_steps(const LayoutModel& m, const char* precision, const data::TokenSplit& tokens,
                const LayoutOptions& o) {
  Variant stacked(m.model, "step", precision), per_expert(m.model, "skip", precision);
  const data::TrainBatches batches(tokens, m.batch, m.seq, 7);
  stacked.run(batches, o.warmup, false);
  per_expert.run(batches, o.warmup, false);
  std::vector<double> ratio;  // per round: per-expert step time / stacked step time
  int round = 0;
  for (int timed = 0; timed < o.reps; timed += o.block - 1, ++round) {
    const int n = std::min(o.block - 1, o.reps - timed);
    double t[2] = {0, 0};
    Variant* order[2] = {&stacked, &per_expert};
    if (round % 2 == 1) std::swap(order[0], order[1]);  // neither always goes first
    for (Variant* v : order) {
      v->run(batches, 1, false);  // re-warms what the other layout evicted
      t[v == &stacked ? 0 : 1] = v->run(batches, n, true);
    }
    ratio.push_back(t[1] / t[0]);
  }
  for (Variant* v : {&stacked, &per_expert}) {
    const double med = median(v->seconds);
    std::printf("%-20s %-11s %-6s %10.0f %9.1f %8.1f-%-8.1f", m.label.c_str(), precision,
                v->layout.c_str(), double(m.batch * m.seq) / med, 1e3 * med,
                1e3 * min_of(v->seconds), 1e3 * max_of(v->seconds));
    if (v == &per_expert)
      std::printf("   %5.3f (%5.3f-%5.3f)", median(ratio), min_of(ratio), max_of(ratio));
    std::printf("\n");
  }
}

// The MoE layer alone: moe_forward + backward of sum(out · r) on random [N, d] rows, the
// weights as a training step's working copies (bf16 leaves with f32 gradients under
// bf16-mixed), per-expert against stacked, alternating.
struct LayerCase {
  models::MoeWeights w;
  std::vector<Tensor> leaves;
};

LayerCase layer_weights(const config::ModelConfig& m, bool stacked, DType param, uint64_t seed) {
  const int64_t E = m.moe.n_experts, d = m.d_model, F = m.d_ff;
  const bool swiglu = m.mlp == "swiglu";
  LayerCase c;
  auto leaf = [&](Shape s, uint64_t k) {
    Tensor t = randn(s, 0.02, seed + k, param);
    t.set_requires_grad(true, DType::f32);
    c.leaves.push_back(t);
    return t;
  };
  auto bias = [&](Shape s, uint64_t k) { return m.bias ? leaf(std::move(s), k) : Tensor(); };
  c.w.router = randn({E, d}, 0.02, seed + 1, DType::f32).set_requires_grad();  // f32 always
  c.leaves.push_back(c.w.router);
  if (stacked) {
    models::FeedForwardWeights& f = c.w.stacked;
    if (swiglu) f.w_gate = leaf({E, F, d}, 2);
    f.w_up = leaf({E, F, d}, 3);
    f.w_down = leaf({E, d, F}, 4);
    if (swiglu) f.b_gate = bias({E, F}, 5);
    f.b_up = bias({E, F}, 6);
    f.b_down = bias({E, d}, 7);
  } else {
    for (int64_t e = 0; e < E; ++e) {
      models::FeedForwardWeights f;
      const auto k = static_cast<uint64_t>(10 * (e + 1));
      if (swiglu) f.w_gate = leaf({F, d}, k + 2);
      f.w_up = leaf({F, d}, k + 3);
      f.w_down = leaf({d, F}, k + 4);
      if (swiglu) f.b_gate = bias({F}, k + 5);
      f.b_up = bias({F}, k + 6);
      f.b_down = bias({d}, k + 7);
      c.w.experts.push_back(f);
    }
  }
  const int64_t S = m.moe.n_shared_experts * F;
  if (S > 0) {
    if (swiglu) c.w.shared.w_gate = leaf({S, d}, 1000);
    c.w.shared.w_up = leaf({S, d}, 1001);
    c.w.shared.w_down = leaf({d, S}, 1002);
  }
  return c;
}

void time_layer(const LayoutModel& m, const char* precision, const LayoutOptions& o) {
  const amp::MixedPrecisionPolicy policy = amp::preset(precision);
  const int64_t N = m.batch * m.seq;
  const DType compute = policy.compute_dtype;
  models::MoeOptions opt;
  opt.top_k = m.model.moe.top_k;
  opt.mlp = models::parse_mlp_kind(m.model.mlp);
  opt.score_func = models::parse_score_func(m.model.moe.score_func);
  opt.route_norm = m.model.moe.route_norm;
  opt.route_scale = m.model.moe.route_scale;
  LayerCase cases[2] = {layer_weights(m.model, true, policy.param_dtype, 5),
                        layer_weights(m.model, false, policy.param_dtype, 5)};
  const Tensor x = randn({N, m.model.d_model}, 1.0, 3, compute);
  const Tensor r = randn({N, m.model.d_model}, 1.0, 4, DType::f32);
  std::vector<double> seconds[2], ratio;
  for (int rep = 0; rep < o.warmup + o.reps; ++rep) {
    double t[2];
    for (int k = 0; k < 2; ++k) {
      const int i = rep % 2 == 0 ? k : 1 - k;  // alternate which goes first
      for (Tensor& l : cases[i].leaves) l.set_grad(Tensor());
      const auto t0 = Clock::now();
      {
        amp::AutocastGuard autocast(compute, compute != DType::f32);
        const models::MoeOutput out = models::moe_forward(x, cases[i].w, opt);
        sum(mul(out.out.to(DType::f32), r)).backward();
      }
      t[i] = since(t0);
      if (rep >= o.warmup) seconds[i].push_back(t[i]);
    }
    if (rep >= o.warmup) ratio.push_back(t[1] / t[0]);
  }
  for (int i = 0; i < 2; ++i) {
    std::printf("%-20s %-11s %-6s %21.1f %8.1f-%-8.1f", m.label.c_str(), precision,
                i == 0 ? "step" : "skip", 1e3 * median(seconds[i]), 1e3 * min_of(seconds[i]),
                1e3 * max_of(seconds[i]));
    if (i == 1) std::printf("   %5.3f (%5.3f-%5.3f)", median(ratio), min_of(ratio), max_of(ratio));
    std::printf("\n");
  }
}

}  // namespace

int run_layouts(const std::vector<LayoutModel>& models, const data::TokenSplit& tokens,
                const LayoutOptions& o) {
  std::printf("CPU: %s; %d threads; load average at start: %s\n", cpu_description().c_str(),
              o.threads, load_average().c_str());
  std::printf(
      "step = model.moe.idle_experts \"step\" (experts stacked [E, d_ff, d]: one grouped GEMM "
      "source per weight); skip = \"skip\" (one [d_ff, d] weight per expert, as before). "
      "%d warm-up + %d timed steps per variant, in blocks of %d (the first untimed), the order "
      "swapped every round; skip/step = per-expert time over stacked time, median (range) of "
      "the rounds: > 1 means stacked is faster\n\n",
      o.warmup, o.reps, o.block);
  std::printf("%-20s %-11s %-6s %10s %9s %17s   %s\n", "model", "precision", "layout", "tokens/s",
              "step ms", "min-max ms", "skip/step");
  for (const LayoutModel& m : models)
    for (const char* precision : {"fp32", "bf16-mixed"}) time_steps(m, precision, tokens, o);
  std::printf("\nThe MoE layer alone (moe_forward + backward, random rows, batch x seq tokens):\n");
  std::printf("%-20s %-11s %-6s %21s %17s   %s\n", "model", "precision", "layout", "ms",
              "min-max ms", "skip/step");
  for (const LayoutModel& m : models)
    for (const char* precision : {"fp32", "bf16-mixed"}) time_layer(m, precision, o);
  std::printf("\nload average at the end: %s\n", load_average().c_str());
  return 0;
}

}  // namespace mixprec::bench
