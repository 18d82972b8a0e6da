// Training state through a checkpoint: masters, AdamW state and GradScaler state flattened,
// saved, loaded and restored into fresh objects come back bit-identical (and the next step
// matches bit for bit); a restore that finds a missing, unknown or mis-shaped entry changes
// nothing at all.
#include "mixprec/io/checkpoint_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/amp/policy.h"
#include "mixprec/core/error.h"
#include "mixprec/optim/adamw.h"
#include "support/op_testing.h"
#include "support/temp_files.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;
using mixprec::testing::error_of;
using mixprec::testing::randn;
using mixprec::testing::same_bits;

amp::ScalerOptions scaler_options() {
  amp::ScalerOptions o = amp::ScalerOptions::dynamic_defaults();
  o.init_scale = 1024.0;
  o.growth_interval = 2;  // so the scale and tracker move within a few steps
  o.hysteresis = 2;
  return o;
}

// A model's parameters, an AdamW over them and a scaler, as a trainer holds them.
struct Trainee {
  Trainee(const amp::MixedPrecisionPolicy& policy, uint64_t seed)
      : params{std::make_shared<optim::Parameter>("layer.w", randn({6, 5}, DType::f32, seed),
                                                  policy),
               std::make_shared<optim::Parameter>("layer.b", randn({6}, DType::f32, seed + 1),
                                                  policy, optim::ParamRole{0, true}),
               std::make_shared<optim::Parameter>("head.w", randn({3, 6}, DType::f32, seed + 2),
                                                  policy)},
        opt(params, /*lr=*/1e-2, /*weight_decay=*/0.1, optim::AdamWOptions{.seed = 5}),
        scaler(scaler_options()) {}

  // One iteration with gradients drawn from `seed` (an inf in the first one when asked);
  // "head.w" gets no gradient on odd seeds, so its state lags the others'.
  void step(uint64_t seed, bool inject_inf = false) {
    for (std::size_t k = 0; k < params.size(); ++k) {
      optim::Parameter& p = *params[k];
      if (k == 2 && seed % 2 == 1) continue;
      Tensor g = randn(p.master().shape(), DType::f32, seed * 10 + k, scaler.get_scale());
      if (inject_inf && k == 0) g.data<float>()[3] = INFINITY;
      p.set_grad(g.to(p.policy().reduce_dtype));
    }
    scaler.step(opt);
    scaler.update();
    opt.zero_grad();
  }

  TrainingState state() { return {params, &opt, &scaler}; }

  optim::ParamList params;
  optim::AdamW opt;
  amp::GradScaler scaler;
};

// Every tensor of the flattened state plus the working copies, bit for bit.
void expect_same_state(Trainee& a, Trainee& b) {
  const TensorMap x = flatten_training_state(a.state()), y = flatten_training_state(b.state());
  ASSERT_EQ(x.size(), y.size());
  for (const auto& [key, t] : x) {
    ASSERT_EQ(y.count(key), 1u) << key;
    EXPECT_TRUE(same_bits(t, y.at(key))) << key;
  }
  for (std::size_t k = 0; k < a.params.size(); ++k)
    EXPECT_TRUE(same_bits(a.params[k]->value(), b.params[k]->value())) << a.params[k]->name();
  EXPECT_EQ(a.scaler.state(), b.scaler.state());
  EXPECT_EQ(a.opt.steps(), b.opt.steps());
}

class TrainingStateTest : public ::testing::TestWithParam<const char*> {
 protected:
  mixprec::testing::TempDir tmp_;  // removed with everything in it after each test
  fs::path dir_ = tmp_.path();
};

TEST_P(TrainingStateTest, RestoresBitIdenticalStateThroughACheckpoint) {
  const amp::MixedPrecisionPolicy policy = amp::preset(GetParam());
  Trainee run(policy, 1);
  for (uint64_t s = 1; s <= 5; ++s) run.step(s, /*inject_inf=*/s == 3);
  ASSERT_EQ(run.scaler.state().steps_skipped, 1);
  const TensorMap flat = flatten_training_state(run.state());
  EXPECT_TRUE(flat.count("model.layer.w") && flat.count("optim.step") &&
              flat.count("optim.layer.w.exp_avg_sq") && flat.count("scaler.scale"));
  EXPECT_EQ(flat.count("optim.layer.w.kahan_comp"), policy.f32_master ? 0u : 1u);

  CheckpointStore store(dir_.string(), 2);
  store.save(5, flat, {{"policy", GetParam()}});
  const std::optional<Checkpoint> ckpt = store.load_latest();
  ASSERT_TRUE(ckpt.has_value());

  Trainee resumed(policy, 77);  // other initial values, no optimizer state yet
  restore_training_state(ckpt->tensors, resumed.state());
  expect_same_state(run, resumed);
  // The state is complete: the next steps agree bit for bit.
  for (uint64_t s = 6; s <= 8; ++s) {
    run.step(s);
    resumed.step(s);
  }
  expect_same_state(run, resumed);
}

INSTANTIATE_TEST_SUITE_P(Policies, TrainingStateTest,
                         ::testing::Values("fp32", "bf16-mixed", "bf16-pure-kahan"));

TEST(TrainingState, RefusesBadEntriesWithoutChangingAnything) {
  const amp::MixedPrecisionPolicy policy = amp::preset("bf16-mixed");
  Trainee source(policy, 1);
  for (uint64_t s = 1; s <= 3; ++s) source.step(s);
  const TensorMap good = flatten_training_state(source.state());

  Trainee target(policy, 50);
  target.step(100);  // some state of its own, which a failed restore must keep
  Trainee reference(policy, 50);
  reference.step(100);

  struct Case {
    const char* what;
    std::function<void(TensorMap&)> damage;
    std::vector<std::string> fragments;  // the message must hold each
  };
  const std::vector<Case> cases = {
      {"mis-shaped master",
       [](TensorMap& m) {
         m["model.layer.w"] = Tensor::zeros({5, 6});
       },
       {"'model.layer.w'", "f32 [5, 6]", "f32 [6, 5]"}},
      {"mis-typed master",
       [](TensorMap& m) { m["model.layer.b"] = m["model.layer.b"].to(DType::bf16); },
       {"'model.layer.b'", "bf16 [6]"}},
      {"missing master", [](TensorMap& m) { m.erase("model.head.w"); }, {"'model.head.w'"}},
      {"unknown master",
       [](TensorMap& m) { m["model.extra"] = Tensor::ones({1}); },
       {"'model.extra'", "matches no parameter"}},
      {"missing moment",
       [](TensorMap& m) { m.erase("optim.layer.w.exp_avg"); },
       {"'optim.'", "'layer.w.exp_avg'"}},
      {"mis-shaped moment",
       [](TensorMap& m) { m["optim.layer.b.exp_avg_sq"] = Tensor::zeros({7}); },
       {"'optim.'", "'layer.b.exp_avg_sq'", "[7]"}},
      {"unknown optimizer entry",
       [](TensorMap& m) { m["optim.head.w.momentum"] = Tensor(); },
       {"'optim.'", "'head.w.momentum'"}},
      {"mis-typed scale",
       [](TensorMap& m) { m["scaler.scale"] = Tensor::full({1}, 8.0, DType::f64); },
       {"'scaler.'", "'scale'"}},
      {"missing scaler tracker",
       [](TensorMap& m) { m.erase("scaler._growth_tracker"); },
       {"'scaler.'", "'_growth_tracker'"}},
      {"scaler factor out of range",
       [](TensorMap& m) { m["scaler.backoff_factor"] = Tensor::full({1}, 2.0, DType::f64); },
       {"'scaler.'", "backoff_factor"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    TensorMap bad = good;
    c.damage(bad);
    const std::string msg = error_of([&] { restore_training_state(bad, target.state()); });
    ASSERT_FALSE(msg.empty());
    for (const std::string& f : c.fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg;
    expect_same_state(target, reference);
  }
  // The undamaged state still loads, and other prefixes are ignored.
  TensorMap with_extra = good;
  with_extra["data.position"] = Tensor::full({}, 3.0, DType::i64);
  restore_training_state(with_extra, target.state());
  expect_same_state(target, source);
}

TEST(TrainingState, ModelOnlyRestoreAndDuplicateNames) {
  const amp::MixedPrecisionPolicy policy = amp::preset("bf16-mixed");
  Trainee source(policy, 1);
  source.step(2);
  Trainee target(policy, 9);
  // Only the parameters: a fine-tune start; optimizer and scaler entries are ignored.
  restore_training_state(flatten_training_state(source.state()), {target.params});
  for (std::size_t k = 0; k < source.params.size(); ++k) {
    EXPECT_TRUE(same_bits(source.params[k]->master(), target.params[k]->master()));
    EXPECT_TRUE(same_bits(source.params[k]->value(), target.params[k]->value()));
  }
  EXPECT_EQ(target.opt.state_bytes(), 0u);
  optim::ParamList twice{source.params[0], source.params[0]};
  EXPECT_NE(error_of([&] { flatten_training_state({twice}); }).find("'layer.w' appears twice"),
            std::string::npos);
}

}  // namespace
}  // namespace mixprec::io

namespace mixprec::io {
namespace {

// A model's buffers (the MoE expert biases): saved as buffer.<name>, restored in place, and a
// missing, mis-shaped, non-finite or unknown entry refused before anything changes.
TEST(TrainingState, BuffersRoundTripAndBadEntriesAreRefused) {
  Tensor bias = Tensor::from_vector<float>({0.5f, -0.25f, 0.0f}, {3});
  const optim::ParamList params{std::make_shared<optim::Parameter>(
      "w", Tensor::from_vector<float>({1.0f, 2.0f}, {2}), amp::preset("fp32"))};
  const TrainingState state{params, nullptr, nullptr, {{"blocks.1.moe.expert_bias", bias}}};
  const TensorMap saved = flatten_training_state(state);
  ASSERT_EQ(saved.count("buffer.blocks.1.moe.expert_bias"), 1u);

  Tensor restored = Tensor::zeros({3}, DType::f32);
  const TrainingState target{params, nullptr, nullptr, {{"blocks.1.moe.expert_bias", restored}}};
  restore_training_state(saved, target);
  EXPECT_EQ(restored.to_doubles(), bias.to_doubles());

  auto refused = [&](TensorMap bad, const std::string& needle) {
    Tensor untouched = Tensor::full({3}, 7.0, DType::f32);
    const TrainingState t{params, nullptr, nullptr, {{"blocks.1.moe.expert_bias", untouched}}};
    try {
      restore_training_state(bad, t);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(untouched.to_doubles(), std::vector<double>(3, 7.0));
  };
  TensorMap missing = saved;
  missing.erase("buffer.blocks.1.moe.expert_bias");
  refused(missing, "no entry 'buffer.blocks.1.moe.expert_bias'");
  TensorMap shaped = saved;
  shaped["buffer.blocks.1.moe.expert_bias"] = Tensor::zeros({4}, DType::f32);
  refused(shaped, "the buffer is f32 [3]");
  TensorMap nan = saved;
  nan["buffer.blocks.1.moe.expert_bias"] = Tensor::from_vector<float>({0.0f, NAN, 0.0f}, {3});
  refused(nan, "holds inf or NaN");
  TensorMap unknown = saved;
  unknown["buffer.blocks.2.moe.expert_bias"] = Tensor::zeros({3}, DType::f32);
  refused(unknown, "'buffer.blocks.2.moe.expert_bias' matches no buffer");
}

}  // namespace
}  // namespace mixprec::io
