// The sharded runtime at world size 1 (single-process communicator) against the plain model:
// the same initial weights, losses and gradients bit for bit, through the gather / free /
// regather / reduce-scatter machinery (the multi-rank runs are tests/mpi/).
#include "mixprec/dist/sharded_model.h"
#include "mixprec/models/transformer/transformer.h"

#include <gtest/gtest.h>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/dist/sharded_state.h"
#include "mixprec/optim/adamw.h"
#include "support/op_testing.h"
#include "unit/models/models_testing.h"

namespace mixprec::dist {
namespace {

using models::testing::tiny_config;
using models::testing::token_grid;

struct Case {
  const char* kind;
  const char* precision;
  bool reshard;
  bool sparse = false;  // most experts unused
  // Activation checkpointing of the sharded model ("full", "op", or "k": selective every k-th
  // block); the plain model runs without.
  const char* checkpoint = nullptr;
  const char* idle_experts = "step";  // "skip": an unused expert's weights get no gradient
};

class ShardedModelTest : public ::testing::TestWithParam<Case> {};

// The piece of `full` ([numel] row-major) a shard piece holds.
std::vector<double> piece_of(const Tensor& full, const optim::Parameter& piece) {
  const std::vector<double> all = full.to_doubles();
  const auto b = static_cast<std::ptrdiff_t>(piece.element_offset());
  return {all.begin() + b, all.begin() + b + piece.master().numel()};
}

TEST_P(ShardedModelTest, MatchesTheUnshardedModelBitForBit) {
  const Case c = GetParam();
  const amp::MixedPrecisionPolicy policy = amp::preset(c.precision);
  config::ModelConfig mc = tiny_config(c.kind);
  mc.moe.z_loss_weight = 1e-3;  // a path from the loss into the router that skips the block
  mc.moe.idle_experts = c.idle_experts;
  if (c.sparse) {  // 16 experts, top-1, 4 tokens: most experts see no token
    mc.moe.n_experts = 16;
    mc.moe.top_k = 1;
  }
  const int64_t B = c.sparse ? 1 : 3, T = c.sparse ? 4 : 10;
  const Tensor x = token_grid(B, T, mc.vocab_size), y = token_grid(B, T, mc.vocab_size, 1);

  models::Transformer plain = models::testing::transformer(mc);
  plain.materialize(7, policy);
  models::Transformer shared_desc = models::testing::transformer(mc);
  auto comm = make_single_process_communicator();
  if (c.checkpoint) {
    const std::string how = c.checkpoint;
    shared_desc.set_activation_checkpoint(models::ActivationCheckpoint::from_config(
        {.mode = how == "full" ? "full" : "selective", .selective_ac_option = how}));
  }
  ShardedModel sharded(shared_desc, *comm, policy, {.reshard_after_forward = c.reshard});
  sharded.materialize(7);

  optim::AdamW plain_opt(plain.parameters().parameters(), 1e-2);
  optim::AdamW sharded_opt(sharded.parameters(), 1e-2);
  for (int step = 0; step < 3; ++step) {
    const Tensor plain_loss = plain.loss(x, y).total;
    plain_loss.backward();
    sharded.begin_step(true);
    const Tensor sharded_loss = shared_desc.loss(x, y).total;
    sharded_loss.backward();
    sharded.finish_backward();
    ASSERT_EQ(plain_loss.item(), sharded_loss.item()) << "step " << step;

    for (const auto& piece : sharded.parameters()) {
      const optim::Parameter& p = plain.parameters().at(piece->name());
      EXPECT_EQ(piece_of(p.master().reshape({-1}), *piece), piece->master().to_doubles())
          << piece->name() << " master, step " << step;
      // A parameter no op read (an expert no token chose, per-expert weights) has no
      // gradient in both; stacked, it has its zero slices in both.
      ASSERT_EQ(p.grad().defined(), piece->grad().defined()) << piece->name();
      if (p.grad().defined()) {
        EXPECT_EQ(piece_of(p.grad().reshape({-1}), *piece), piece->grad().to_doubles())
            << piece->name() << " grad, step " << step;
      }
    }
    plain_opt.step();
    sharded_opt.step();
    plain_opt.zero_grad();
    sharded_opt.zero_grad();
  }

  // An evaluation forward between steps gives the same loss too.
  NoGradGuard no_grad;
  sharded.begin_step(false);
  const double eval = shared_desc.loss(x, y).total.item();
  sharded.end_forward();
  EXPECT_EQ(plain.loss(x, y).total.item(), eval);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, ShardedModelTest,
    ::testing::Values(
        Case{"gpt", "fp32", true}, Case{"gpt", "bf16-mixed", true}, Case{"moe", "bf16-mixed", true},
        Case{"moe", "fp32", false}, Case{"gpt", "bf16-pure", true}, Case{"moe", "fp32", true, true},
        // Checkpointed blocks recompute in backward between the unit's
        // "backward begins" (weights gathered again) and "done" (reduce-scatter).
        Case{"gpt", "bf16-mixed", true, false, "full"},
        Case{"moe", "bf16-mixed", true, false, "full"}, Case{"moe", "fp32", true, true, "full"},
        Case{"gpt", "fp32", true, false, "op"}, Case{"moe", "fp32", false, false, "op"},
        Case{"gpt", "bf16-mixed", true, false, "2"},
        Case{"moe", "fp32", true, true, nullptr, "skip"},
        Case{"moe", "bf16-mixed", false, true, "full", "skip"}),
    [](const auto& info) {
      std::string n = std::string(info.param.kind) + "_" + info.param.precision +
                      (info.param.reshard ? "" : "_keep") +
                      (info.param.sparse ? "_unused_experts" : "") +
                      (info.param.checkpoint ? std::string("_ac_") + info.param.checkpoint : "") +
                      (std::string(info.param.idle_experts) == "skip" ? "_per_expert" : "");
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

TEST(ShardedModel, WeightsOutsideAStepAreAnError) {
  models::Transformer model = models::testing::transformer(tiny_config("gpt"));
  auto comm = make_single_process_communicator();
  ShardedModel sharded(model, *comm, amp::preset("fp32"));
  sharded.materialize(1);
  EXPECT_THROW(model.loss(token_grid(1, 4, 16), token_grid(1, 4, 16)), Error);
}

TEST(ShardedState, GatheredStateIsTheUnshardedOneAndShardsBack) {
  const amp::MixedPrecisionPolicy policy = amp::preset("fp32");
  const config::ModelConfig mc = tiny_config("gpt");
  const Tensor x = token_grid(2, 8, mc.vocab_size), y = token_grid(2, 8, mc.vocab_size, 2);
  models::Transformer plain = models::testing::transformer(mc);
  plain.materialize(3, policy);
  optim::AdamW plain_opt(plain.parameters().parameters(), 1e-2);
  plain.loss(x, y).total.backward();
  plain_opt.step();

  models::Transformer desc = models::testing::transformer(mc);
  auto comm = make_single_process_communicator();
  ShardedModel sharded(desc, *comm, policy);
  sharded.materialize(3);
  optim::AdamW sharded_opt(sharded.parameters(), 1e-2);
  sharded.begin_step(true);
  desc.loss(x, y).total.backward();
  sharded.finish_backward();
  sharded_opt.step();

  const io::TensorMap want =
      io::flatten_training_state({plain.parameters().parameters(), &plain_opt, nullptr});
  const io::TensorMap got = gather_training_state(sharded, &sharded_opt, nullptr);
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [key, t] : want) {
    ASSERT_TRUE(got.contains(key)) << key;
    EXPECT_EQ(t.shape(), got.at(key).shape()) << key;
    EXPECT_EQ(t.to_doubles(), got.at(key).to_doubles()) << key;
  }
  // Round trip into a fresh sharded model: the same pieces back.
  models::Transformer desc2 = models::testing::transformer(mc);
  ShardedModel again(desc2, *comm, policy);
  again.materialize(99);
  optim::AdamW again_opt(again.parameters(), 1e-2);
  io::restore_training_state(shard_training_state(got, again),
                             {again.parameters(), &again_opt, nullptr});
  for (std::size_t i = 0; i < again.parameters().size(); ++i)
    EXPECT_EQ(again.parameters()[i]->master().to_doubles(),
              sharded.parameters()[i]->master().to_doubles());
}

// A rank's share of a checkpoint keeps the model entries that name no parameter of its model
// (the other expert layout's), so the restore reports them as an unsharded run does.
TEST(ShardedState, EntriesNamingNoParameterPassThrough) {
  const amp::MixedPrecisionPolicy policy = amp::preset("fp32");
  config::ModelConfig per_expert = tiny_config("moe");
  per_expert.moe.idle_experts = "skip";
  models::Transformer plain = models::testing::transformer(per_expert);
  plain.materialize(3, policy);
  const io::TensorMap full = io::flatten_training_state({plain.parameters().parameters()});

  models::Transformer stacked = models::testing::transformer(tiny_config("moe"));
  auto comm = make_single_process_communicator();
  ShardedModel sharded(stacked, *comm, policy);
  sharded.materialize(3);
  const io::TensorMap local = shard_training_state(full, sharded);
  EXPECT_TRUE(local.contains("model.blocks.0.moe.experts.1.w_up"));
  EXPECT_FALSE(local.contains("model.blocks.0.moe.experts.w_up"));
  EXPECT_TRUE(local.contains("model.blocks.0.attn.wq"));
  const std::string e = mixprec::testing::error_of(
      [&] { io::restore_training_state(local, {sharded.parameters()}); });
  EXPECT_NE(e.find("no entry 'model.blocks.0.moe.experts.w_gate'"), std::string::npos) << e;
}

}  // namespace
}  // namespace mixprec::dist
