// The memory planner: the arithmetic users quote (hand-computed), the precision presets' terms,
// the sharded layout's division, and the prediction against the allocator's measured peak of
// real training steps (W = 1).
#include "mixprec/dist/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "mixprec/amp/policy.h"
#include "mixprec/config/train_config.h"
#include "mixprec/core/error.h"
#include "mixprec/io/config_file.h"
#include "mixprec/train/trainer.h"
#include "support/temp_files.h"

namespace mixprec::dist {
namespace {

using mixprec::testing::TempDir;

constexpr int64_t k500B = 500'000'000'000;

std::string config_path(const std::string& name) {
  return std::string(MIXPREC_SOURCE_DIR) + "/configs/" + name;
}

TEST(MemoryPlanCount, FiveHundredBillionParametersAreTwoTerabytesOfF32Masters) {
  const MemoryPlan p = plan_memory_for_count(k500B, 1, amp::preset("bf16-mixed"), "adamw");
  EXPECT_EQ(p.master, 2'000'000'000'000u);     // 4 bytes each
  EXPECT_EQ(p.working, 1'000'000'000'000u);    // bf16 working copy: 2 bytes each
  EXPECT_EQ(p.grads, 2'000'000'000'000u);      // reduced in f32
  EXPECT_EQ(p.optimizer, 4'000'000'000'000u);  // AdamW: 8 bytes each
  EXPECT_EQ(p.comm, 0u);
  EXPECT_FALSE(p.has_activations);
  EXPECT_EQ(p.peak, p.sum());
  EXPECT_EQ(p.sum(), 9'000'000'000'000u);  // 18 bytes per parameter
}

TEST(MemoryPlanCount, ShardingDividesMastersGradientsAndStateByW) {
  const amp::MixedPrecisionPolicy bf16 = amp::preset("bf16-mixed");
  // 500e9 / 512 = 976562500 exactly (no padding).
  const MemoryPlan p = plan_memory_for_count(k500B, 512, bf16, "adamw");
  EXPECT_EQ(p.shard_numel, 976'562'500);
  EXPECT_EQ(p.master, 3'906'250'000u);  // "3.91 GB per rank"
  EXPECT_EQ(p.grads, 3'906'250'000u);
  EXPECT_EQ(p.optimizer, 7'812'500'000u);
  EXPECT_EQ(p.working, 1'953'125'000u);  // the rank's cast shard
  // A count W does not divide is padded up: 10 over 4 ranks -> 3 each.
  const MemoryPlan q = plan_memory_for_count(10, 4, bf16, "sgd");
  EXPECT_EQ(q.shard_numel, 3);
  EXPECT_EQ(q.master, 12u);
  EXPECT_EQ(q.optimizer, 12u);  // one momentum buffer
}

TEST(MemoryPlanCount, OptimizersAndPureModes) {
  const int64_t n = 1000;
  const amp::MixedPrecisionPolicy f32 = amp::preset("fp32");
  EXPECT_EQ(plan_memory_for_count(n, 1, f32, "adamw").optimizer, 8000u);
  EXPECT_EQ(plan_memory_for_count(n, 1, f32, "sgd").optimizer, 4000u);
  EXPECT_EQ(plan_memory_for_count(n, 1, f32, "adam-mini").optimizer, 4000u);
  // fp32: the working copy is the master itself; numerics.md's 16 bytes per parameter.
  const MemoryPlan fp32 = plan_memory_for_count(n, 1, f32, "adamw");
  EXPECT_EQ(fp32.working, 0u);
  EXPECT_EQ(fp32.sum(), 16u * n);
  // bf16-pure: bf16 master and state, no separate working copy, bf16 gradients.
  const MemoryPlan pure = plan_memory_for_count(n, 1, amp::preset("bf16-pure"), "adamw");
  EXPECT_EQ(pure.master, 2000u);
  EXPECT_EQ(pure.working, 0u);
  EXPECT_EQ(pure.grads, 2000u);
  EXPECT_EQ(pure.optimizer, 4000u);
  // Kahan adds its bf16 compensation buffer.
  EXPECT_EQ(plan_memory_for_count(n, 1, amp::preset("bf16-pure-kahan"), "adamw").optimizer, 6000u);
  EXPECT_THROW(plan_memory_for_count(n, 1, f32, "lion"), Error);
  EXPECT_THROW(plan_memory_for_count(n, 0, f32, "adamw"), Error);
  EXPECT_THROW(plan_memory_for_count(0, 1, f32, "adamw"), Error);
}

config::TrainConfig tiny(std::vector<std::string> overrides = {}) {
  return config::load_config(config_path("tiny.toml"), overrides);
}

// configs/tiny.toml by hand: tok_emb 256 x 64 (tied) + final_norm 64 = 16448 in the root unit;
// per block 2 norms (128) + q/k/v/o 4 x 64^2 + router 4 x 64 + 4 experts x 3 x 128 x 64 =
// 115072.
constexpr int64_t kTinyRoot = 16448, kTinyBlock = 115072, kTinyParams = kTinyRoot + 2 * kTinyBlock;

TEST(MemoryPlanConfig, PresetsChangeTheTermsAsTheirDtypes) {
  const MemoryPlan f32 = plan_memory(tiny({"training.precision=fp32"}), 1);
  const MemoryPlan bf16 = plan_memory(tiny({"training.precision=bf16-mixed"}), 1);
  const MemoryPlan f16 = plan_memory(tiny({"training.precision=fp16-mixed"}), 1);
  const MemoryPlan pure = plan_memory(tiny({"training.precision=bf16-pure"}), 1);
  ASSERT_EQ(f32.parameters, kTinyParams);
  EXPECT_EQ(f32.master, 4u * kTinyParams);
  EXPECT_EQ(f32.working, 0u);
  EXPECT_EQ(bf16.master, f32.master);
  EXPECT_EQ(bf16.working, f32.master / 2);  // a bf16 working copy: half the f32 bytes
  EXPECT_EQ(f16.working, bf16.working);
  EXPECT_EQ(bf16.grads, f32.grads);  // reduced in f32 either way
  EXPECT_EQ(bf16.optimizer, 8u * kTinyParams);
  EXPECT_EQ(pure.master, 2u * kTinyParams);
  EXPECT_EQ(pure.grads, 2u * kTinyParams);
  EXPECT_EQ(pure.optimizer, 4u * kTinyParams);
  // Narrow compute saves narrow activations (the f32 pieces: attention's unrounded output,
  // statistics, router): less than f32's, more than half of it.
  EXPECT_LT(bf16.activations, f32.activations);
  EXPECT_GT(bf16.activations, f32.activations / 2);
  EXPECT_EQ(f16.activations, bf16.activations);
}

TEST(MemoryPlanConfig, ActivationsScaleWithTheBatch) {
  const MemoryPlan b4 = plan_memory(tiny(), 1);
  const MemoryPlan b8 = plan_memory(tiny({"training.batch_size=8"}), 1);
  EXPECT_EQ(b8.activations, 2 * b4.activations);  // every term is per token
  EXPECT_EQ(b8.master, b4.master);
}

TEST(MemoryPlanConfig, ShardedTermsFollowTheLayout) {
  const config::TrainConfig c = tiny();
  // The weight terms do not depend on the batch (here one split over 3 ranks).
  const MemoryPlan w3 = plan_memory(tiny({"training.batch_size=6"}), 3);
  // Units padded to a multiple of 3: root 16448 -> 5483 per rank, blocks 115072 -> 38358.
  const int64_t shard = 5483 + 2 * 38358;
  EXPECT_EQ(w3.shard_numel, shard);
  EXPECT_EQ(w3.master, 4u * shard);
  EXPECT_EQ(w3.optimizer, 8u * shard);
  // Gradient shard + the root unit's and one block unit's full buffers, all f32.
  EXPECT_EQ(w3.grads, 4u * (shard + 3 * 5483 + 3 * 38358));
  // Gathered bf16 units: root + 2 blocks (here all blocks) with reshard-after-forward.
  EXPECT_EQ(w3.working, 2u * (3 * 5483 + 2 * 3 * 38358));
  // The largest cast shard (bf16) + the all-to-all's receive blocks of the largest unit (f32).
  EXPECT_EQ(w3.comm, 2u * 38358 + 4u * 3 * 38358);
  // A rank's batch is the global batch split: 4 sequences over 2 ranks.
  const MemoryPlan w2 = plan_memory(c, 2);
  const MemoryPlan half = plan_memory(tiny({"training.batch_size=2"}), 1);
  EXPECT_EQ(w2.activations, half.activations);
  EXPECT_LT(w2.peak, plan_memory(c, 1).peak);
  EXPECT_THROW(plan_memory(c, 0), Error);
  // A batch the trainer would refuse (4 over 3 ranks) is refused here too, naming the key.
  try {
    plan_memory(c, 3);
    ADD_FAILURE() << "a batch of 4 over 3 ranks was planned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("training.batch_size"), std::string::npos) << e.what();
  }
}

TEST(MemoryPlanConfig, AdamMiniKeepsOneValuePerBlock) {
  const MemoryPlan adamw = plan_memory(tiny(), 1);
  const MemoryPlan mini = plan_memory(tiny({"optimizer.name=adam-mini"}), 1);
  // exp_avg (4 bytes each) + vmean: embedding rows 256, per layer wq/wk one per head (2 x 4),
  // wv/wo rows (2 x 64), router rows 4, experts 4 x (128 + 128 + 64) rows, 2 norms 1 each;
  // final norm 1.
  const int64_t per_layer = 2 * 4 + 2 * 64 + 4 + 4 * (128 + 128 + 64) + 2;
  const int64_t values = 256 + 2 * per_layer + 1;
  EXPECT_EQ(mini.optimizer, 4u * (kTinyParams + values));
  EXPECT_LT(mini.optimizer, adamw.optimizer);
}

// The largest allocator peak over training steps 2..steps (optimizer state exists from the
// first step's end), as the trainer logs peak_bytes.
std::size_t measured_peak(const config::TrainConfig& base, const TempDir& dir, int64_t steps) {
  config::TrainConfig c = base;
  c.run_dir = (dir / "run").string();
  c.training.data = (dir / "corpus.txt").string();
  c.training.steps = steps;
  c.training.threads = 2;
  c.training.eval_every = 0;
  c.checkpoint.enable = false;
  c.checkpoint.export_bf16 = false;
  c.metrics.jsonl = false;
  c.metrics.plot = false;
  std::string text;
  for (int i = 0; text.size() < 80000; ++i)
    text += "line " + std::to_string(i * 7919 % 1000) + ": the quick brown fox jumps.\n";
  mixprec::testing::write_file(dir / "corpus.txt", text);
  train::Trainer trainer(c, {.progress = train::ProgressStyle::quiet});
  const train::TrainSummary s = trainer.run();
  std::size_t peak = 0;
  for (std::size_t i = 1; i < s.steps.size(); ++i) peak = std::max(peak, s.steps[i].peak_bytes);
  return peak;
}

void expect_within_10_percent(const std::string& config_name, const std::string& precision,
                              std::vector<std::string> overrides = {}) {
  if (!precision.empty())
    for (const std::string& o :
         {"training.precision=" + precision, std::string("training.mixed_precision_param="),
          std::string("training.mixed_precision_reduce=")})
      overrides.push_back(o);
  const config::TrainConfig c = config::load_config(config_path(config_name), overrides);
  const TempDir dir;
  const std::size_t measured = measured_peak(c, dir, 3);
  const std::size_t predicted = plan_memory(c, 1).peak;
  const double ratio = static_cast<double>(predicted) / static_cast<double>(measured);
  ::testing::Test::RecordProperty("predicted", std::to_string(predicted));
  ::testing::Test::RecordProperty("measured", std::to_string(measured));
  std::printf("%s %s: predicted %zu, measured %zu, ratio %.4f\n", config_name.c_str(),
              amp::display_name(c.training.policy).c_str(), predicted, measured, ratio);
  EXPECT_GT(ratio, 0.9) << config_name << " " << precision;
  EXPECT_LT(ratio, 1.1) << config_name << " " << precision;
}

TEST(MemoryPlanMeasured, TinyWithin10PercentOfThePeak) {
  expect_within_10_percent("tiny.toml", "");
}
TEST(MemoryPlanMeasured, TinyFp32Within10PercentOfThePeak) {
  expect_within_10_percent("tiny.toml", "fp32");
}
TEST(MemoryPlanMeasured, TinyBf16PureWithin10PercentOfThePeak) {
  expect_within_10_percent("tiny.toml", "bf16-pure");
}
TEST(MemoryPlanMeasured, DefaultConfigWithin10PercentOfThePeak) {
  expect_within_10_percent("moe_small.toml", "");
}
// Activation checkpointing: the checkpointed blocks keep their input (and the kept op
// outputs), a block's recompute holds all of its activations again during its backward.
TEST(MemoryPlanMeasured, TinyCheckpointedWithin10PercentOfThePeak) {
  for (const auto& [mode, option] : std::vector<std::pair<std::string, std::string>>{
           {"full", "2"}, {"selective", "op"}, {"selective", "2"}}) {
    SCOPED_TRACE(mode + " " + option);
    expect_within_10_percent(
        "tiny.toml", "",
        {"model.n_layers=4", "training.batch_size=16", "activation_checkpoint.mode=" + mode,
         "activation_checkpoint.selective_ac_option=" + option});
  }
}

TEST(MemoryPlanMeasured, GptSmallFullCheckpointWithin10PercentOfThePeak) {
  expect_within_10_percent("gpt_small.toml", "", {"activation_checkpoint.mode=full"});
}

// Checkpointing lowers the planned peak: full below selective every 2nd block below none.
TEST(MemoryPlanConfig, ActivationCheckpointingLowersThePeak) {
  config::TrainConfig c = config::load_config(config_path("gpt_small.toml"));
  const MemoryPlan none = plan_memory(c, 1);
  c.activation_checkpoint = {.mode = "selective", .selective_ac_option = "2"};
  const MemoryPlan every2 = plan_memory(c, 1);
  c.activation_checkpoint = {.mode = "selective", .selective_ac_option = "op"};
  const MemoryPlan op = plan_memory(c, 1);
  c.activation_checkpoint = {.mode = "full"};
  const MemoryPlan full = plan_memory(c, 1);
  EXPECT_LT(full.activations, every2.activations);
  EXPECT_LT(every2.activations, none.activations);
  EXPECT_LT(op.activations, none.activations);
  EXPECT_LT(full.peak, every2.peak);
  EXPECT_LT(every2.peak, none.peak);
  EXPECT_LT(op.peak, none.peak);
  EXPECT_EQ(full.master, none.master);  // only the activations change
  EXPECT_EQ(full.grads, none.grads);
  for (const MemoryPlan* p : {&none, &every2, &op, &full}) EXPECT_LE(p->peak, p->sum());
}

TEST(MemoryPlanMeasured, GptSmallWithin10PercentOfThePeak) {
  expect_within_10_percent("gpt_small.toml", "");
}
// Shared experts and a first dense block of another width; the expert bias.
TEST(MemoryPlanMeasured, DeepSeekMoeWithin10PercentOfThePeak) {
  expect_within_10_percent("deepseek_moe_debug.toml", "", {"training.seq_len=128"});
}
// Latent attention (heads padded to one width for SDPA), beside the same experts; and its
// low-rank queries.
TEST(MemoryPlanMeasured, DeepSeekV3Within10PercentOfThePeak) {
  expect_within_10_percent("deepseek_v3_debug.toml", "",
                           {"training.seq_len=64", "training.batch_size=8"});
  expect_within_10_percent(
      "deepseek_v3_debug.toml", "fp32",
      {"training.seq_len=64", "training.batch_size=8", "model.mla.q_lora_rank=96"});
}
// FP8 recipes: the casts' transients, and with save_fp8_activations the linears' inputs kept
// in FP8 (one cast per input tensor) instead of bf16: both within 10%, and the saving the plan
// predicts is the one measured, within 25%.
TEST(MemoryPlanMeasured, Fp8SavedActivationsWithin10PercentOfThePeak) {
  std::vector<std::pair<std::size_t, std::size_t>> peaks;  // predicted, measured
  for (const auto& [recipe, save] :
       {std::pair{"tensorwise", "false"}, std::pair{"tensorwise", "true"},
        std::pair{"deepseek_v3", "true"}}) {
    const std::vector<std::string> o = {
        "training.batch_size=4", "model.n_layers=4",
        std::string("quantize.linear.float8.recipe_name=") + recipe,
        std::string("quantize.linear.float8.save_fp8_activations=") + save};
    const config::TrainConfig c = config::load_config(config_path("llama3_debug.toml"), o);
    peaks.emplace_back(plan_memory(c, 1).peak, measured_peak(c, TempDir(), 3));
    const double ratio = static_cast<double>(peaks.back().first) / peaks.back().second;
    std::printf(
        "llama3_debug %s save_fp8_activations=%s: predicted %zu, measured %zu, ratio %.4f\n",
        recipe, save, peaks.back().first, peaks.back().second, ratio);
    EXPECT_GT(ratio, 0.9) << recipe << " " << save;
    EXPECT_LT(ratio, 1.1) << recipe << " " << save;
  }
  const double planned_saving = static_cast<double>(peaks[0].first) - peaks[1].first;
  const double measured_saving = static_cast<double>(peaks[0].second) - peaks[1].second;
  std::printf("save_fp8_activations saves %.0f bytes planned, %.0f measured\n", planned_saving,
              measured_saving);
  EXPECT_GT(planned_saving, 0);
  EXPECT_NEAR(measured_saving, planned_saving, 0.25 * planned_saving);
}

// The MoE experts' grouped GEMMs by torchao's rowwise grouped recipe, their inputs kept in FP8
// with save_fp8_activations ([quantize.grouped_mm.float8]): within 10%, and a measured saving
// that is real but at most the planned one (measured: 2.9-4.9 MB of the 5.1 MB planned; the
// plan's grouped saving is too high, see the README).
TEST(MemoryPlanMeasured, GroupedFp8SavedActivationsWithin10PercentOfThePeak) {
  std::vector<std::pair<std::size_t, std::size_t>> peaks;  // predicted, measured
  for (const char* save : {"false", "true"}) {
    // The measured saving moves from run to run (2.9-4.9 MB seen; which experts' products are
    // in flight together, their buffers, moves the peak): the bounds below leave room for it.
    const std::vector<std::string> o = {
        "quantize.grouped_mm.float8.fqns=[\"experts\"]",
        std::string("quantize.grouped_mm.float8.save_fp8_activations=") + save};
    const config::TrainConfig c = config::load_config(config_path("moe_small.toml"), o);
    peaks.emplace_back(plan_memory(c, 1).peak, measured_peak(c, TempDir(), 3));
    const double ratio = static_cast<double>(peaks.back().first) / peaks.back().second;
    std::printf(
        "moe_small grouped rowwise save_fp8_activations=%s: predicted %zu, measured %zu, "
        "ratio %.4f\n",
        save, peaks.back().first, peaks.back().second, ratio);
    EXPECT_GT(ratio, 0.9) << save;
    EXPECT_LT(ratio, 1.1) << save;
  }
  const double planned_saving = static_cast<double>(peaks[0].first) - peaks[1].first;
  const double measured_saving = static_cast<double>(peaks[0].second) - peaks[1].second;
  std::printf("grouped save_fp8_activations saves %.0f bytes planned, %.0f measured\n",
              planned_saving, measured_saving);
  EXPECT_GT(planned_saving, 0);
  EXPECT_GT(measured_saving, 0.1 * planned_saving);
  EXPECT_LT(measured_saving, 1.1 * planned_saving);
}

// Gradient accumulation: one micro-batch's activations at a time.
TEST(MemoryPlanMeasured, AccumulationWithin10PercentOfThePeak) {
  expect_within_10_percent("moe_small.toml", "", {"training.local_batch_size=4"});
}

// A vocabulary of 128256 (Llama 3's tokenizer) on a small model: the [vocab, d] weight
// gradients are the largest ones, made whole before they are added to the parameter's (the
// LM head's while micro-batches accumulate, a tied embedding's at the end of backward). The
// planner counts them: within 5%, tied and untied, with and without accumulation.
TEST(MemoryPlanMeasured, LargeVocabularyWeightGradientsWithin5PercentOfThePeak) {
  for (const char* tie : {"true", "false"})
    for (const char* local : {"2", "4"}) {
      const config::TrainConfig c = config::load_config(
          config_path("llama3_debug.toml"),
          {"model.tokenizer=" + std::string(MIXPREC_SOURCE_DIR) +
               "/tests/reference/fixtures/tokenizers/real/llama3",
           "model.vocab_size=128256", "model.d_model=64", "model.n_layers=2", "model.n_heads=4",
           "model.n_kv_heads=4", "model.max_seq_len=64", "training.seq_len=64",
           "training.batch_size=4", std::string("training.local_batch_size=") + local,
           std::string("model.tie_embeddings=") + tie});
      const TempDir dir;
      const double measured = static_cast<double>(measured_peak(c, dir, 3));
      const double predicted = static_cast<double>(plan_memory(c, 1).peak);
      EXPECT_NEAR(predicted / measured, 1.0, 0.05)
          << "tied " << tie << ", local batch " << local << ": predicted " << predicted
          << ", measured " << measured;
    }
}

}  // namespace
}  // namespace mixprec::dist
