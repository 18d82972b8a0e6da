// The MoE layer's two expert layouts (model.moe.idle_experts): "step" stacks each expert
// weight into one parameter ([E, d_ff, d], torchtitan's), "skip" keeps one parameter per
// expert (Hugging Face's). Given the same values they compute the same forward and the same
// gradients slice by slice; an expert no token chose gets a zero gradient slice and still
// takes AdamW's step (decay, momentum; one step count for every expert) under "step", and
// stays as it was under "skip". An f64 gradcheck through the stacked layer, 1 vs 2 threads,
// and Adam-mini's partition of a stacked weight (one value per row of each expert).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/amp/compute_scope.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/models/transformer/moe.h"
#include "mixprec/models/transformer/transformer.h"
#include "mixprec/ops.h"
#include "mixprec/optim/adam_mini.h"
#include "mixprec/optim/adamw.h"
#include "support/op_testing.h"
#include "unit/models/models_testing.h"

namespace mixprec::models {
namespace {

using mixprec::testing::same_bits;

constexpr int64_t kExperts = 6;
constexpr int64_t kIdle = 2;  // the expert the tests starve

config::ModelConfig layout_config(const char* idle_experts, bool gelu_with_bias = false) {
  config::ModelConfig c = testing::tiny_config("moe");
  c.moe.n_experts = kExperts;
  c.moe.top_k = 2;
  c.moe.n_shared_experts = 1;
  c.moe.load_balance_coeff = 0.01;  // expert biases: the tests steer the routing with them
  c.moe.idle_experts = idle_experts;
  if (gelu_with_bias) {
    c.mlp = "gelu";
    c.bias = true;
    c.norm = "layernorm";
  }
  return c;
}

// Expert kIdle of every MoE block is never chosen (its bias far below every score; the bias
// only picks experts, so nothing else changes), or every expert may be again, or (`favour`)
// every token picks it.
void starve(Transformer& t, bool on, bool favour = false) {
  std::vector<float> bias(kExperts, 0.0f);
  if (on || favour) bias[kIdle] = favour ? 100.0f : -100.0f;
  for (const auto& [name, b] : t.buffers()) {
    Tensor handle = b;  // writes the model's buffer
    handle.copy_from(Tensor::from_vector(bias, {kExperts}));
  }
}

// "blocks.1.moe.experts.w_up" -> ("blocks.1.moe.experts", ".w_up"), for a stacked expert name.
bool split_stacked(const std::string& name, std::string& experts, std::string& leaf) {
  const std::string key = ".moe.experts.";
  const auto at = name.find(key);
  if (at == std::string::npos || std::isdigit(static_cast<unsigned char>(name[at + key.size()])))
    return false;
  experts = name.substr(0, at + key.size() - 1);
  leaf = name.substr(at + key.size() - 1);
  return true;
}

std::string slice_name(const std::string& experts, int64_t e, const std::string& leaf) {
  return experts + "." + std::to_string(e) + leaf;
}

// The stacked model's parameters <- the per-expert model's values (expert e into slice e).
void copy_values(const Transformer& per_expert, Transformer& stacked) {
  NoGradGuard no_grad;
  for (const auto& [name, p] : stacked.parameters().entries()) {
    std::string experts, leaf;
    if (split_stacked(name, experts, leaf)) {
      for (int64_t e = 0; e < kExperts; ++e)
        p->master().select(0, e).copy_from(
            per_expert.parameters().at(slice_name(experts, e, leaf)).master());
    } else {
      p->master().copy_from(per_expert.parameters().at(name).master());
    }
    p->refresh();
  }
}

// f(stacked gradient slice e, the per-expert parameter's gradient) over every stacked tensor.
template <class Fn>
void for_each_slice(const Transformer& stacked, const Transformer& per_expert, Fn fn) {
  for (const auto& [name, p] : stacked.parameters().entries()) {
    std::string experts, leaf;
    if (!split_stacked(name, experts, leaf)) continue;
    for (int64_t e = 0; e < kExperts; ++e)
      fn(name + "[" + std::to_string(e) + "]", e, p->grad(),
         per_expert.parameters().at(slice_name(experts, e, leaf)).grad());
  }
}

bool all_plus_zero(const Tensor& t) {
  for (double v : t.to_doubles())
    if (v != 0 || std::signbit(v)) return false;
  return true;
}

struct Pair {
  Transformer step, skip;
};

Pair make_pair(const amp::MixedPrecisionPolicy& policy, bool gelu_with_bias, uint64_t seed) {
  Pair p{testing::transformer(layout_config("step", gelu_with_bias)),
         testing::transformer(layout_config("skip", gelu_with_bias))};
  p.skip.materialize(seed, policy);
  p.step.materialize(seed + 1, policy);  // other values first: copy_values must do the work
  copy_values(p.skip, p.step);
  return p;
}

LossParts loss_of(Transformer& t, const amp::MixedPrecisionPolicy& policy, int64_t salt = 0) {
  const amp::ComputeScope scope(policy);
  return t.loss(testing::token_grid(3, 8, 16, salt), testing::token_grid(3, 8, 16, salt + 1));
}

// [8, 12] pseudo-random tokens and their targets: varied enough that every expert gets some.
LossParts random_batch_loss(Transformer& t, const amp::MixedPrecisionPolicy& policy) {
  std::vector<int64_t> v(8 * 12 + 1);
  uint32_t x = 12345;
  for (int64_t& id : v) id = (x = x * 1664525u + 1013904223u) >> 28;  // 0..15
  const amp::ComputeScope scope(policy);
  return t.loss(Tensor::from_vector(std::vector<int64_t>(v.begin(), v.end() - 1), {8, 12}),
                Tensor::from_vector(std::vector<int64_t>(v.begin() + 1, v.end()), {8, 12}));
}

TEST(MoeStackedExperts, ParameterNamesShapesAndInitialValues) {
  const Transformer step = testing::transformer(layout_config("step", true));
  const Transformer skip = testing::transformer(layout_config("skip", true));
  const ParameterSet& s = step.parameters();
  EXPECT_EQ(s.spec("blocks.0.moe.experts.w_up").shape, (Shape{kExperts, 24, 16}));
  EXPECT_EQ(s.spec("blocks.0.moe.experts.w_down").shape, (Shape{kExperts, 16, 24}));
  EXPECT_EQ(s.spec("blocks.0.moe.experts.w_up_bias").shape, (Shape{kExperts, 24}));
  EXPECT_EQ(s.spec("blocks.0.moe.experts.w_down_bias").shape, (Shape{kExperts, 16}));
  EXPECT_TRUE(s.spec("blocks.0.moe.experts.w_up_bias").role.no_weight_decay);
  EXPECT_FALSE(s.spec("blocks.0.moe.experts.w_up").role.no_weight_decay);
  EXPECT_FALSE(s.contains("blocks.0.moe.experts.0.w_up"));
  EXPECT_FALSE(s.contains("blocks.0.moe.experts.w_gate"));  // gelu
  EXPECT_EQ(skip.parameters().spec("blocks.1.moe.experts.5.w_up").shape, (Shape{24, 16}));
  EXPECT_FALSE(skip.parameters().contains("blocks.1.moe.experts.w_up"));
  EXPECT_EQ(s.parameter_count(), skip.parameters().parameter_count());
  EXPECT_EQ(*step.active_parameter_count(), *skip.active_parameter_count());
  EXPECT_NE(step.describe(), skip.describe());
  EXPECT_NE(skip.describe().find("per-expert weights"), std::string::npos) << skip.describe();

  // Each expert's slice starts as its own parameter would: the same values bit for bit, so the
  // layouts start from the same weights (swiglu: w_gate too).
  Transformer a = testing::transformer(layout_config("step"));
  Transformer b = testing::transformer(layout_config("skip"));
  a.materialize(11, testing::fp32_policy());
  b.materialize(11, testing::fp32_policy());
  int stacked = 0;
  for (const auto& [name, p] : a.parameters().entries()) {
    std::string experts, leaf;
    if (!split_stacked(name, experts, leaf)) {
      EXPECT_TRUE(same_bits(p->master(), b.parameters().at(name).master())) << name;
      continue;
    }
    ++stacked;
    for (int64_t e = 0; e < kExperts; ++e)
      EXPECT_TRUE(same_bits(p->master().select(0, e),
                            b.parameters().at(slice_name(experts, e, leaf)).master()))
          << name << "[" << e << "]";
  }
  EXPECT_EQ(stacked, 2 * 3);  // 2 blocks x (w_gate, w_up, w_down)
}

// The same values give the same loss and gradients (the stacked tensor's slices against the
// per-expert tensors), an idle expert a zero slice against no gradient at all.
void expect_same_step(const char* precision, bool gelu_with_bias, bool idle) {
  const amp::MixedPrecisionPolicy policy = amp::preset(precision);
  Pair p = make_pair(policy, gelu_with_bias, 5);
  starve(p.step, idle);
  starve(p.skip, idle);
  const std::string what = std::string(precision) + (gelu_with_bias ? ", gelu + bias" : "") +
                           (idle ? ", expert 2 idle" : "");
  // Poison the allocator's free blocks so a skipped zero fill shows.
  for (int i = 0; i < 4; ++i) (void)Tensor::full({1 << 16}, -3.0);
  const LossParts a = loss_of(p.step, policy), b = loss_of(p.skip, policy);
  ASSERT_TRUE(same_bits(a.total, b.total)) << what;
  a.total.backward();
  b.total.backward();
  for (const auto& [name, q] : p.skip.parameters().entries()) {
    if (!p.step.parameters().contains(name)) continue;
    ASSERT_TRUE(q->grad().defined()) << what << ": " << name;
    EXPECT_TRUE(same_bits(p.step.parameters().at(name).grad(), q->grad())) << what << ": " << name;
  }
  int zero_slices = 0;
  for_each_slice(p.step, p.skip,
                 [&](const std::string& at, int64_t e, const Tensor& stacked, const Tensor& own) {
                   ASSERT_TRUE(stacked.defined()) << what << ": " << at;
                   if (idle && e == kIdle) {
                     EXPECT_FALSE(own.defined()) << what << ": " << at << " (skip)";
                     EXPECT_TRUE(all_plus_zero(stacked.select(0, e))) << what << ": " << at;
                     ++zero_slices;
                   } else {
                     ASSERT_TRUE(own.defined()) << what << ": " << at;
                     EXPECT_TRUE(same_bits(stacked.select(0, e), own)) << what << ": " << at;
                   }
                 });
  EXPECT_EQ(zero_slices, idle ? 2 * (gelu_with_bias ? 4 : 3) : 0) << what;
}

TEST(MoeStackedExperts, SameLossAndGradientsSliceBySliceAsPerExpertWeights) {
  for (const char* precision : {"fp32", "bf16-mixed"})
    for (bool gelu_with_bias : {false, true})
      for (bool idle : {false, true}) expect_same_step(precision, gelu_with_bias, idle);
}

// The master of `name` (stacked: expert kIdle's slice) as doubles.
std::vector<double> idle_master(Transformer& t, const std::string& experts, const char* leaf) {
  const ParameterSet& s = t.parameters();
  if (s.contains(experts + leaf))
    return s.at(experts + leaf).master().select(0, kIdle).to_doubles();
  return s.at(slice_name(experts, kIdle, leaf)).master().to_doubles();
}

double state_step(const optim::Optimizer& opt, const std::string& name) {
  const optim::StateDict state = opt.state_dict();
  const auto it = state.find(name + ".step");
  return it == state.end() ? 0.0 : it->second.item();
}

TEST(MoeStackedExperts, AnIdleExpertTakesAdamWsStepStackedAndNotPerExpert) {
  const amp::MixedPrecisionPolicy policy = amp::preset("fp32");
  const double lr = 1e-2, wd = 0.1;
  Pair p = make_pair(policy, false, 9);
  optim::AdamW step_opt(p.step.parameters().parameters(), lr, wd);
  optim::AdamW skip_opt(p.skip.parameters().parameters(), lr, wd);
  const std::string experts = "blocks.1.moe.experts";
  auto train = [&](Transformer& t, optim::AdamW& opt, int64_t salt) {
    loss_of(t, policy, salt).total.backward();
    opt.step();
    opt.zero_grad();
  };

  // Step 1 routes every token to expert 2 (momentum for it), steps 2-3 starve it.
  for (Transformer* t : {&p.step, &p.skip}) starve(*t, false, true);
  train(p.step, step_opt, 0);
  train(p.skip, skip_opt, 0);
  for (Transformer* t : {&p.step, &p.skip}) starve(*t, true);
  for (int64_t s = 1; s < 3; ++s) {
    const std::vector<double> before_step = idle_master(p.step, experts, ".w_up");
    const std::vector<double> before_skip = idle_master(p.skip, experts, ".w_up");
    {
      const LossParts loss = loss_of(p.step, policy, s);
      loss.total.backward();
      // The idle expert's slice is there and zero.
      const Tensor g = p.step.parameters().at(experts + ".w_up").grad();
      ASSERT_TRUE(g.defined());
      EXPECT_TRUE(all_plus_zero(g.select(0, kIdle))) << "step " << s;
      EXPECT_FALSE(all_plus_zero(g.select(0, 0))) << "step " << s;
      step_opt.step();
      step_opt.zero_grad();
    }
    train(p.skip, skip_opt, s);
    // "skip": no gradient, not touched at all.
    EXPECT_EQ(idle_master(p.skip, experts, ".w_up"), before_skip) << "step " << s;
    // "step": decayed by lr·wd and moved by its momentum, m/(sqrt(v)+eps) with m and v from
    // step 1 decayed: a relative move of lr·wd plus up to lr/|w| per element.
    const std::vector<double> after = idle_master(p.step, experts, ".w_up");
    double moved = 0, norm = 0;
    for (std::size_t i = 0; i < after.size(); ++i) {
      moved += std::fabs(after[i] - before_step[i]);
      norm += std::fabs(before_step[i]);
      EXPECT_LE(std::fabs(after[i] - before_step[i] * (1 - lr * wd)), 1.01 * lr) << i;
    }
    EXPECT_GT(moved / norm, lr * wd) << "step " << s;  // more than decay alone: momentum too
  }
  // One step count for every expert under "step"; expert 2's own parameters lag under "skip".
  EXPECT_EQ(state_step(step_opt, experts + ".w_up"), 3.0);
  double busiest = 0;
  for (int64_t e = 0; e < kExperts; ++e)
    busiest = std::max(busiest, state_step(skip_opt, slice_name(experts, e, ".w_up")));
  EXPECT_EQ(busiest, 3.0);
  EXPECT_EQ(state_step(skip_opt, slice_name(experts, kIdle, ".w_up")), 1.0);
}

// Without momentum (a fresh optimizer's first step), an idle expert's move is the decay alone:
// w·(1 - lr·wd), relative lr·wd, bit for bit AdamW's f32 rule on a zero gradient.
TEST(MoeStackedExperts, AFirstStepOnAnIdleExpertIsTheDecayAlone) {
  const amp::MixedPrecisionPolicy policy = amp::preset("fp32");
  const double lr = 1e-2, wd = 0.1;
  Pair p = make_pair(policy, false, 13);
  starve(p.step, true);
  optim::AdamW opt(p.step.parameters().parameters(), lr, wd);
  const std::string experts = "blocks.0.moe.experts";
  const std::vector<const char*> leaves = {".w_gate", ".w_up", ".w_down"};
  std::vector<std::vector<double>> before;
  for (const char* leaf : leaves) before.push_back(idle_master(p.step, experts, leaf));
  loss_of(p.step, policy).total.backward();
  opt.step();
  const auto decay = static_cast<float>(1 - lr * wd);
  for (std::size_t l = 0; l < leaves.size(); ++l) {
    const std::vector<double> after = idle_master(p.step, experts, leaves[l]);
    for (std::size_t i = 0; i < after.size(); ++i)
      ASSERT_EQ(after[i], static_cast<float>(static_cast<float>(before[l][i]) * decay))
          << leaves[l] << " " << i;
  }
}

TEST(MoeStackedExperts, OneAndTwoThreadsGiveTheSameBits) {
  const amp::MixedPrecisionPolicy policy = amp::preset("bf16-mixed");
  auto run = [&] {
    Transformer t = testing::transformer(layout_config("step"));
    t.materialize(3, policy);
    starve(t, true);
    const LossParts loss = loss_of(t, policy);
    loss.total.backward();
    std::vector<Tensor> out{loss.total};
    for (const auto& [name, q] : t.parameters().entries()) out.push_back(q->grad());
    return out;
  };
  const std::vector<Tensor> one = mixprec::testing::with_threads(1, run);
  const std::vector<Tensor> two = mixprec::testing::with_threads(2, run);
  ASSERT_EQ(one.size(), two.size());
  for (std::size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(same_bits(one[i], two[i])) << i;
}

TEST(MoeStackedExperts, F64GradCheckThroughTheStackedLayer) {
  using mixprec::testing::grad_input;
  const int64_t E = 3, d = 4, ff = 2;
  // x, router, stacked w_gate, w_up, w_down (with biases), the shared expert's w_gate, w_up,
  // w_down.
  std::vector<Tensor> inputs = {grad_input({5, d}, 1),           grad_input({E, d}, 2, 0.7),
                                grad_input({E, ff, d}, 3, 0.7),  grad_input({E, ff}, 4, 0.3),
                                grad_input({E, ff, d}, 5, 0.7),  grad_input({E, ff}, 6, 0.3),
                                grad_input({E, d, ff}, 7, 0.7),  grad_input({E, d}, 8, 0.3),
                                grad_input({2 * ff, d}, 9, 0.7), grad_input({2 * ff, d}, 10, 0.7),
                                grad_input({d, 2 * ff}, 11, 0.7)};
  auto fn = [&](const std::vector<Tensor>& in) {
    MoeWeights w;
    w.router = in[1];
    w.stacked = {in[2], in[4], in[6], in[3], in[5], in[7]};
    w.shared.w_gate = in[8];
    w.shared.w_up = in[9];
    w.shared.w_down = in[10];
    // Expert 1 never chosen: its slices' gradients are zeros, which the check confirms.
    w.expert_bias = Tensor::from_vector(std::vector<double>{0, -100, 0}, {E});
    MoeOptions o;
    o.top_k = 2;
    o.mlp = MlpKind::swiglu;
    const MoeOutput m = moe_forward(in[0], w, o);
    return concat({m.out.reshape({-1}), m.aux_loss.reshape({1}), m.z_loss.reshape({1})}, 0);
  };
  mixprec::testing::expect_gradcheck(fn, inputs, "stacked experts, expert 1 idle", 1e-6, 1e-7,
                                     1e-5);
}

// Adam-mini keeps one second moment per row of each expert (E·F for [E, F, d]), as it does for
// E separate [F, d] weights: given the same values and no idle expert, the two layouts take the
// same steps bit for bit.
TEST(MoeStackedExperts, AdamMiniPartitionsAStackedWeightAsPerExpertWeights) {
  const amp::MixedPrecisionPolicy policy = amp::preset("fp32");
  Pair p = make_pair(policy, true, 17);
  for (Transformer* t : {&p.step, &p.skip}) starve(*t, false);
  optim::AdamMini step_opt(p.step.parameters().parameters(), 1e-2, 0.1);
  optim::AdamMini skip_opt(p.skip.parameters().parameters(), 1e-2, 0.1);
  for (int64_t s = 0; s < 3; ++s) {
    for (auto [t, opt] : {std::pair{&p.step, &step_opt}, std::pair{&p.skip, &skip_opt}}) {
      const LossParts loss = random_batch_loss(*t, policy);
      for (const int64_t n : t->step_counts()) ASSERT_GT(n, 0);
      loss.total.backward();
      opt->step();
      opt->zero_grad();
    }
  }
  const optim::StateDict state = step_opt.state_dict();
  EXPECT_EQ(state.at("blocks.0.moe.experts.w_up.vmean").numel(), kExperts * 24);
  EXPECT_EQ(state.at("blocks.0.moe.experts.w_up_bias.vmean").numel(), kExperts);
  for (const auto& [name, q] : p.step.parameters().entries()) {
    std::string experts, leaf;
    if (!split_stacked(name, experts, leaf)) {
      EXPECT_TRUE(same_bits(q->master(), p.skip.parameters().at(name).master())) << name;
      continue;
    }
    for (int64_t e = 0; e < kExperts; ++e)
      EXPECT_TRUE(same_bits(q->master().select(0, e),
                            p.skip.parameters().at(slice_name(experts, e, leaf)).master()))
          << name << "[" << e << "]";
  }
}

}  // namespace
}  // namespace mixprec::models
