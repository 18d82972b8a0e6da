// Training runs of 2 ranks against 1 (CTest runs this under `mpiexec -np 2`): the 1-rank
// reference is the plain, unsharded trainer, run by rank 0 alone in the same program.
//
// Tolerances. fp32 with an f32 reduce: the two runs differ only in how each weight gradient's
// sum over the batch is split (two halves added after the reduce-scatter, vs one pass), a few
// f32 roundings that Adam carries forward: per-step losses agree to 1e-5 relative over 24
// steps (measured ~1e-7). bf16-mixed (bf16 weights, f32 reduce): the same f32 differences
// flip a bf16 rounding of a weight now and then (one bf16 ulp = 2^-8 relative), which the
// training dynamics then carry: losses agree to 2e-2 absolute over 24 steps (about 0.5% of
// the loss; measured up to ~1e-2 on this config). Adam-mini's blocks that a shard boundary
// cuts add their parts over the ranks (adam_mini.h), so it is as tight as AdamW. MoE runs set
// the load-balancing loss to 0 unless a case turns it on: with balance_scope = "global" (the
// default) the expert counts are summed over the ranks, so the 2-rank run balances the same
// whole batch as the 1-rank run and follows it as tightly as a dense run; the expert biases
// of auxiliary-loss-free balancing are updated from those global counts too. Balancing each
// rank's own rows (balance_scope = "rank", as torchtitan and Megatron) is another objective,
// and its trajectory leaves the 1-rank one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "mixprec/amp/grad_scaler.h"
#include "mixprec/dist/sharded_model.h"
#include "mixprec/io/checkpoint_store.h"
#include "mixprec/models/transformer/transformer.h"
#include "mixprec/optim/adamw.h"
#include "mixprec/train/trainer.h"
#include "mpi_test_env.h"
#include "shared_dir.h"
#include "unit/models/models_testing.h"
#include "unit/train/train_testing.h"

namespace mixprec::train {
namespace {

namespace fs = std::filesystem;
using mixprec::testing::SharedDir;
using mixprec::testing::world;

// The trainer tests' tiny config, 24 steps, one thread per rank, the run in dir/run.
config::TrainConfig config_in(const fs::path& dir, const std::string& run,
                              std::vector<std::string> extra) {
  std::vector<std::string> o = testing::tiny_overrides(dir / run, dir / "corpus.txt");
  for (const char* more :
       {"training.steps=24", "training.eval_every=8", "training.threads=1", "checkpoint.interval=8",
        "checkpoint.export_bf16=false", "model.moe.aux_loss_weight=0",
        // d_ff 47: a block unit's shard boundary falls mid-row, cutting an Adam-mini block
        "model.d_ff=47"})
    o.push_back(more);
  o.insert(o.end(), extra.begin(), extra.end());
  return testing::tiny_toml(o);
}

TrainSummary run(const config::TrainConfig& c, dist::Communicator* comm, bool resume = false,
                 int64_t stop_at = -1) {
  TrainerOptions o;
  o.progress = ProgressStyle::quiet;
  o.comm = comm;
  o.resume = resume;
  o.stop_at_step = stop_at;
  Trainer t(c, o);
  return t.run();
}

void expect_same_trajectory(const std::vector<StepMetrics>& want,
                            const std::vector<StepMetrics>& got, double rel, double abs) {
  ASSERT_EQ(want.size(), got.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].step, got[i].step);
    EXPECT_NEAR(want[i].loss, got[i].loss, std::max(abs, rel * std::abs(want[i].loss)))
        << "step " << want[i].step;
    // fp32 (rel > 0): the global gradient norm too (bf16's chaotic spikes make it useless).
    if (rel > 0) {
      EXPECT_NEAR(want[i].grad_norm, got[i].grad_norm, 10 * rel * want[i].grad_norm)
          << "step " << want[i].step;
    }
    EXPECT_EQ(want[i].skipped, got[i].skipped) << "step " << want[i].step;
  }
}

struct Case {
  const char* kind;
  const char* precision;
  double rel, abs;
  const char* optimizer = "adamw";
  std::vector<std::string> extra = {};  // more overrides
  const char* name = "";                // what the extra overrides test, for the test's name
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.kind << " " << c.precision << " " << c.optimizer << " " << c.name;
}

// Global-batch balancing with the Switch loss on; then DeepSeek's routing with the expert
// biases updated every step as well.
const std::vector<std::string> kAuxLoss = {"model.moe.aux_loss_weight=0.01"};
// Gradient accumulation: each rank's 4 rows as 2 micro-batches (the 1-rank run: 4 of 2), the
// reduced shards summed into the gradient shard.
const std::vector<std::string> kAccumulate = {"training.batch_size=8",
                                              "training.local_batch_size=2"};
// Accumulation, full activation checkpointing (the recompute routes again in backward) and the
// expert biases (from the whole step's counts) at once. Not the balance loss: with
// micro-batches it balances each micro-batch over the ranks, and a rank's micro-batch i holds
// other rows at 2 ranks than at 1 (rows {0, 1, 4, 5} of 8 against {0, 1}): another objective
// at each world size, as in torchtitan.
const std::vector<std::string> kEverything = {
    "training.batch_size=8",           "training.local_batch_size=2",
    "activation_checkpoint.mode=full", "model.moe.load_balance_coeff=0.01",
    "model.moe.n_shared_experts=1",    "model.moe.score_func=sigmoid"};
const std::vector<std::string> kDeepSeek = {
    "model.moe.aux_loss_weight=0.01", "model.moe.load_balance_coeff=0.01",
    "model.moe.n_shared_experts=1",   "model.moe.score_func=sigmoid",
    "model.moe.route_norm=false",     "model.moe.route_scale=2"};

// FSDP's FP8 all-gather: the 2-rank run casts each weight from its f32 master with the global
// amax's scale, the 1-rank run (no gather) from its bf16 working copy; both within bf16-mixed's
// tolerance of each other (the casts differ by a bf16 rounding before the FP8 one). Tensorwise
// with the scales precomputed in one all-reduce, DeepSeek-V3's 128x128 blocks (cut by the
// shard boundaries) with one all-reduce per unit.
const std::vector<std::string> kFp8GatherTensorwise = {
    "quantize.linear.float8.recipe_name=tensorwise",
    "quantize.linear.float8.enable_fsdp_float8_all_gather=true",
    "quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp=true"};
// Rowwise: two casts of each weight (rows for output, columns for grad_input), gathered apart.
const std::vector<std::string> kFp8GatherRowwise = {
    "quantize.linear.float8.recipe_name=rowwise",
    "quantize.linear.float8.enable_fsdp_float8_all_gather=true"};
const std::vector<std::string> kFp8GatherBlockwise = {
    "quantize.linear.float8.recipe_name=deepseek_v3",
    "quantize.linear.float8.enable_fsdp_float8_all_gather=true"};

class TwoRanks : public ::testing::TestWithParam<Case> {};

TEST_P(TwoRanks, FollowTheOneRankTrajectory) {
  const Case k = GetParam();
  SharedDir dir("trajectory");
  std::vector<std::string> o = {std::string("model.kind=") + k.kind,
                                std::string("training.precision=") + k.precision,
                                std::string("optimizer.name=") + k.optimizer};
  const std::vector<std::string> plain = o;
  o.insert(o.end(), k.extra.begin(), k.extra.end());
  world().reset_stats();
  const TrainSummary two = run(config_in(dir.path(), "two", o), &world());
  ASSERT_EQ(two.steps.size(), 24u);
  // The trainer gathered FP8: fewer bytes than the same run in bf16 (the exact count is
  // sharded_model_mpi_test's; here the d_ff-47 MLP and the experts stay bf16).
  if (std::string_view(k.name).starts_with("fp8_all_gather")) {
    const uint64_t fp8 = world().stats().all_gather_bytes;
    world().reset_stats();
    run(config_in(dir.path(), "two_bf16", plain), &world());
    EXPECT_LT(fp8, world().stats().all_gather_bytes);
  }
  if (world().rank() != 0) return;
  const TrainSummary one = run(config_in(dir.path(), "one", o), nullptr);
  expect_same_trajectory(one.steps, two.steps, k.rel, k.abs);
  ASSERT_EQ(one.evals.size(), two.evals.size());
  for (std::size_t i = 0; i < one.evals.size(); ++i)
    EXPECT_NEAR(one.evals[i].val_loss, two.evals[i].val_loss,
                std::max(k.abs, k.rel * one.evals[i].val_loss));
}

INSTANTIATE_TEST_SUITE_P(
    Policies, TwoRanks,
    ::testing::Values(
        Case{"gpt", "fp32", 1e-5, 0}, Case{"moe", "fp32", 1e-5, 0},
        Case{"gpt", "bf16-mixed", 0, 2e-2}, Case{"moe", "bf16-mixed", 0, 2e-2},
        Case{"gpt", "fp32", 1e-5, 0, "sgd"}, Case{"gpt", "fp32", 1e-5, 0, "adam-mini"},
        Case{"moe", "fp32", 1e-5, 0, "adamw", kAuxLoss, "aux_loss"},
        Case{"moe", "fp32", 1e-5, 0, "adamw", kDeepSeek, "deepseek_bias"},
        Case{"moe", "bf16-mixed", 0, 2e-2, "adamw", kDeepSeek, "deepseek_bias"},
        Case{"gpt", "fp32", 1e-5, 0, "adamw", kAccumulate, "accumulate"},
        Case{"moe", "fp32", 1e-5, 0, "adamw", kAccumulate, "accumulate"},
        Case{"moe", "fp32", 1e-5, 0, "adamw", kEverything, "everything"},
        // Delayed FP8 scaling: amaxes maximized over the ranks, so both world
        // sizes cast with the scales of the whole batch.
        Case{"gpt", "te_delayed", 0, 2e-2},
        Case{"gpt", "bf16-mixed", 0, 2e-2, "adamw", kFp8GatherTensorwise, "fp8_all_gather"},
        Case{"moe", "bf16-mixed", 0, 2e-2, "adamw", kFp8GatherBlockwise,
             "fp8_all_gather_blockwise"},
        Case{"gpt", "bf16-mixed", 0, 2e-2, "adamw", kFp8GatherRowwise, "fp8_all_gather_rowwise"}),
    [](const auto& info) {
      std::string n =
          std::string(info.param.kind) + "_" + info.param.precision + "_" + info.param.optimizer;
      if (*info.param.name) n += std::string("_") + info.param.name;
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

// Per-rank balancing is another objective: its 2-rank trajectory leaves the 1-rank one (the
// global default above follows it to 1e-5).
TEST(TwoRanksPerRankBalancing, LeavesTheOneRankTrajectory) {
  SharedDir dir("per_rank");
  const std::vector<std::string> o = {"model.kind=moe", "training.precision=fp32",
                                      "model.moe.aux_loss_weight=0.01",
                                      "model.moe.balance_scope=rank"};
  const TrainSummary two = run(config_in(dir.path(), "two", o), &world());
  if (world().rank() != 0) return;
  const TrainSummary one = run(config_in(dir.path(), "one", o), nullptr);
  double worst = 0;
  for (std::size_t i = 0; i < one.steps.size(); ++i)
    worst = std::max(worst, std::abs(one.steps[i].loss - two.steps[i].loss) / one.steps[i].loss);
  EXPECT_GT(worst, 1e-4);
}

// Activation checkpointing under the sharded runtime: each checkpointed block's recompute
// runs in its backward, after the unit's weights are gathered again and before its gradients
// are reduce-scattered. With each mode, 2 ranks give the losses and gradient norms of 2 ranks
// without checkpointing bit for bit, and follow the 1-rank trajectory as those do.
class CheckpointedTwoRanks : public ::testing::TestWithParam<Case> {};

TEST_P(CheckpointedTwoRanks, MatchTwoRanksWithoutAndFollowOneRank) {
  const Case k = GetParam();
  SharedDir dir("checkpointed");
  auto overrides = [&](const std::string& mode, const std::string& option) {
    return std::vector<std::string>{std::string("model.kind=") + k.kind,
                                    std::string("training.precision=") + k.precision,
                                    "training.steps=8",
                                    "model.n_layers=3",
                                    "activation_checkpoint.mode=" + mode,
                                    "activation_checkpoint.selective_ac_option=" + option};
  };
  const TrainSummary none = run(config_in(dir.path(), "none", overrides("none", "2")), &world());
  ASSERT_EQ(none.steps.size(), 8u);
  for (const auto& [mode, option] : std::vector<std::pair<std::string, std::string>>{
           {"full", "2"}, {"selective", "op"}, {"selective", "2"}}) {
    const TrainSummary got =
        run(config_in(dir.path(), mode + option, overrides(mode, option)), &world());
    ASSERT_EQ(got.steps.size(), none.steps.size());
    for (std::size_t i = 0; i < got.steps.size(); ++i) {
      EXPECT_EQ(got.steps[i].loss, none.steps[i].loss) << mode << " " << option << " step " << i;
      EXPECT_EQ(got.steps[i].grad_norm, none.steps[i].grad_norm)
          << mode << " " << option << " step " << i;
    }
  }
  if (world().rank() != 0) return;
  const TrainSummary one = run(config_in(dir.path(), "one", overrides("full", "2")), nullptr);
  expect_same_trajectory(one.steps, none.steps, k.rel, k.abs);
}

INSTANTIATE_TEST_SUITE_P(Policies, CheckpointedTwoRanks,
                         ::testing::Values(Case{"moe", "fp32", 1e-5, 0},
                                           Case{"gpt", "bf16-mixed", 0, 2e-2}),
                         [](const auto& info) {
                           std::string n =
                               std::string(info.param.kind) + "_" + info.param.precision;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// A checkpoint written by 2 ranks resumes on 1 and continues the 2-rank trajectory; one
// written by 1 rank resumes on 2 and continues the 1-rank trajectory (1e-5 relative).
class Checkpoints : public ::testing::TestWithParam<const char*> {};

TEST_P(Checkpoints, MoveBetweenWorldSizes) {
  SharedDir dir("reshard");
  const std::string optimizer = GetParam();
  const double rel = 1e-5, abs = 0;
  const std::vector<std::string> o = {"training.precision=fp32", "optimizer.name=" + optimizer};
  const TrainSummary two = run(config_in(dir.path(), "two", o), &world());
  TrainSummary one;
  if (world().rank() == 0) {
    one = run(config_in(dir.path(), "one", o), nullptr);
    // Resume copies of both runs from their step-8 checkpoints.
    for (const char* name : {"two", "one"}) {
      const fs::path from = dir.path() / name, to = dir.path() / (std::string(name) + "-resumed");
      fs::create_directories(to / "checkpoint");
      fs::copy(io::CheckpointStore((from / "checkpoint").string(), 0).path_for(8),
               to / "checkpoint");
      for (const auto& e : fs::directory_iterator(from))
        if (e.path().filename().string().starts_with("tokens-")) fs::copy(e.path(), to);
    }
  }
  world().barrier();
  // 1 rank continues the 2-rank run ...
  if (world().rank() == 0) {
    const TrainSummary resumed = run(config_in(dir.path(), "two-resumed", o), nullptr, true);
    EXPECT_EQ(resumed.start_step, 8);  // not ASSERT: rank 1 waits for rank 0 below
    expect_same_trajectory({two.steps.begin() + 8, two.steps.end()}, resumed.steps, rel, abs);
  }
  // ... and 2 ranks continue the 1-rank run.
  const TrainSummary resumed = run(config_in(dir.path(), "one-resumed", o), &world(), true);
  EXPECT_EQ(resumed.start_step, 8);
  if (world().rank() == 0)
    expect_same_trajectory({one.steps.begin() + 8, one.steps.end()}, resumed.steps, rel, abs);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, Checkpoints, ::testing::Values("adamw", "adam-mini"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// Stopped after a checkpoint and resumed at the same world size: the same losses bit for bit.
class SameWorldSize : public ::testing::TestWithParam<const char*> {};

TEST_P(SameWorldSize, ResumeIsBitExact) {
  SharedDir dir("resume");
  const std::string recipe = GetParam();  // "optimizer precision"
  const std::string optimizer = recipe.substr(0, recipe.find(' '));
  const std::vector<std::string> o = {"optimizer.name=" + optimizer,
                                      "training.precision=" + recipe.substr(recipe.find(' ') + 1),
                                      "training.steps=16"};
  const TrainSummary whole = run(config_in(dir.path(), "whole", o), &world());
  run(config_in(dir.path(), "parts", o), &world(), false, 8);
  const TrainSummary rest = run(config_in(dir.path(), "parts", o), &world(), true);
  ASSERT_EQ(rest.start_step, 8);
  ASSERT_EQ(rest.steps.size(), 8u);
  for (std::size_t i = 0; i < rest.steps.size(); ++i)
    EXPECT_EQ(whole.steps[8 + i].loss, rest.steps[i].loss) << "step " << rest.steps[i].step;
}

INSTANTIATE_TEST_SUITE_P(Recipes, SameWorldSize,
                         ::testing::Values("adamw fp32", "adam-mini fp32", "adam-mini bf16-pure",
                                           "adamw bf16-mixed", "adamw te_delayed"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-' || ch == ' ') ch = '_';
                           return n;
                         });

// A non-finite gradient on one rank only: every rank skips the step, nothing changes, and the
// loss scale backs off alike everywhere.
TEST(NonFinite, OnOneRankSkipsTheStepOnEveryRank) {
  using models::testing::token_grid;
  models::Transformer model = models::testing::transformer(models::testing::tiny_config("gpt"));
  dist::ShardedModel sharded(model, world(), amp::preset("fp16-mixed"));
  sharded.materialize(4);
  optim::AdamW opt(sharded.parameters(), 1e-2);
  amp::GradScaler scaler(amp::ScalerOptions::dynamic_defaults());
  scaler.set_found_inf_reduction([](bool f) { return dist::any_rank(world(), f); });

  std::vector<std::vector<double>> before;
  for (const auto& p : sharded.parameters()) before.push_back(p->master().to_doubles());
  const int64_t rows = 2;
  const Tensor x = token_grid(rows * world().size(), 8, 16),
               y = token_grid(rows * world().size(), 8, 16, 3);
  const int r = world().rank();
  sharded.begin_step(true);
  scaler
      .scale(model
                 .loss(x.slice(0, r * rows, (r + 1) * rows).contiguous(),
                       y.slice(0, r * rows, (r + 1) * rows).contiguous())
                 .total)
      .backward();
  sharded.finish_backward();
  if (r == world().size() - 1) {  // the last rank alone sees an inf
    Tensor g = sharded.parameters().front()->grad();
    g.copy_from(Tensor::full(g.shape(), INFINITY, g.dtype()));
  }
  const float scale = scaler.get_scale();
  const amp::StepReport report = scaler.step(opt);
  scaler.update();
  EXPECT_FALSE(report.stepped);
  EXPECT_EQ(scaler.get_scale(), scale * 0.5f);
  for (std::size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(before[i], sharded.parameters()[i]->master().to_doubles())
        << sharded.parameters()[i]->name();
}

}  // namespace
}  // namespace mixprec::train
