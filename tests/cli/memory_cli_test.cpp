// End-to-end tests of `mixprec memory`: the table's rows, the decimal arithmetic users quote
// (500e9 x 4 bytes = 2.00 TB; / 512 = 3.91 GB), and the exit status of bad input (2).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_running.h"
#include "mixprec/dist/memory_plan.h"
#include "mixprec/io/config_file.h"

namespace {

using mixprec::testing::describe;
using mixprec::testing::run_cli;
using mixprec::testing::RunResult;

std::string config(const std::string& name) {
  return std::string(MIXPREC_SOURCE_DIR) + "/configs/" + name;
}

using mixprec::testing::contains;

TEST(MemoryCli, FiveHundredBillionParametersOverFiveHundredTwelveRanks) {
  const std::vector<std::string> args = {"memory", "--params", "500e9", "--world-size", "512"};
  const RunResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << describe(args, r);
  EXPECT_TRUE(contains(r.out,
                       "500B parameters: FP32 weights 2.00 TB total, 3.91 GB per rank at "
                       "W=512"))
      << r.out;
  for (const char* term : {"master (f32)", "working (bf16)", "gradients (f32)", "optimizer (adamw)",
                           "activations", "communication", "total"})
    EXPECT_TRUE(contains(r.out, term)) << term << "\n" << r.out;
  EXPECT_TRUE(contains(r.out, "per rank (W=512)")) << r.out;
  EXPECT_TRUE(contains(r.out, "unsharded (W=1)")) << r.out;
  EXPECT_TRUE(contains(r.out, "n/a")) << r.out;  // no shapes: no activation estimate
  // Exact bytes: 500e9 / 512 x 4 per rank, 2e12 unsharded.
  EXPECT_TRUE(contains(r.out, "3,906,250,000 B")) << r.out;
  EXPECT_TRUE(contains(r.out, "2,000,000,000,000 B")) << r.out;
}

TEST(MemoryCli, SuffixedCountsAndPresets) {
  const std::vector<std::string> args = {"memory", "--params",    "7B", "--precision",
                                         "fp32",   "--optimizer", "sgd"};
  const RunResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << describe(args, r);
  // 7e9 x 4 = 28.0 GB of f32 weights; fp32 has no separate working copy.
  EXPECT_TRUE(contains(r.out, "7B parameters: FP32 weights 28.0 GB total, 28.0 GB per rank at W=1"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "optimizer (sgd)")) << r.out;
  const RunResult m = run_cli({"memory", "--params", "1.5M"});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_TRUE(contains(m.out, "1.5M parameters: FP32 weights 6.00 MB total")) << m.out;
}

TEST(MemoryCli, ConfigShowsActivationsAndThePeak) {
  const std::vector<std::string> args = {
      "memory", "--config", config("tiny.toml"),    "--world-size",
      "2",      "--set",    "training.batch_size=8"};
  const RunResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << describe(args, r);
  EXPECT_TRUE(contains(r.out, "4 x 64 tokens per rank (global batch 8)")) << r.out;
  EXPECT_TRUE(contains(r.out, "predicted peak")) << r.out;
  EXPECT_FALSE(contains(r.out, "n/a")) << r.out;
  // configs/tiny.toml has 246592 parameters: 986368 bytes of f32 masters, half per rank.
  EXPECT_TRUE(contains(r.out, "986,368 B")) << r.out;
  EXPECT_TRUE(contains(r.out, "493,184 B")) << r.out;
}

TEST(MemoryCli, BadInputExitsWithTwoAndNamesIt) {
  struct Case {
    std::vector<std::string> args;
    std::string names;
  };
  const std::vector<Case> cases = {
      {{"memory", "--params", "lots"}, "lots"},
      {{"memory", "--params", "1.5"}, "1.5"},
      {{"memory", "--params", "-3"}, "params"},
      {{"memory", "--params", "7B", "--world-size", "0"}, "world-size"},
      {{"memory", "--params", "7B", "--precision", "bf17-mixed"}, "bf17-mixed"},
      {{"memory", "--config", config("tiny.toml"), "--precision", "bf17-mixed"}, "bf17-mixed"},
      {{"memory", "--params", "7B", "--optimizer", "lion"}, "lion"},
      {{"memory"}, "--config"},
      {{"memory", "--params", "7B", "--config", config("tiny.toml")}, "exactly one"},
  };
  for (const Case& c : cases) {
    const RunResult r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << describe(c.args, r);
    EXPECT_TRUE(contains(r.err, c.names)) << describe(c.args, r);
  }
}

// --fit: the combinations of optimizer, activation checkpointing and rows per forward that
// fit a memory, the suggestion first; nothing fits a megabyte; a bad size names the flag.
TEST(MemoryCli, FitListsTheCombinationsThatFitAndSuggestsOne) {
  const std::vector<std::string> args = {"memory", "--config", config("llama3_1b.toml"), "--fit",
                                         "24GiB"};
  const RunResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << describe(args, r);
  EXPECT_TRUE(contains(r.out, "ways to run it in 25.8 GB per rank")) << r.out;
  EXPECT_TRUE(contains(r.out, "adamw       full")) << r.out;
  EXPECT_TRUE(contains(r.out, "no, over by")) << r.out;  // AdamW with accumulation
  EXPECT_TRUE(contains(r.out, "suggested: --set optimizer.name=adam-mini")) << r.out;

  const RunResult none = run_cli({"memory", "--config", config("llama3_1b.toml"), "--fit", "1MB"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_TRUE(contains(none.out, "none fits: the smallest needs")) << none.out;

  for (const char* bad : {"banana", "-3GB", "12XB", "GB", "1e30", "1e-30"}) {
    const RunResult b = run_cli({"memory", "--config", config("llama3_1b.toml"), "--fit", bad});
    EXPECT_EQ(b.exit_code, 2) << bad << "\n" << b.err;
    EXPECT_TRUE(contains(b.err, "--fit")) << b.err;
  }
  const RunResult params = run_cli({"memory", "--params", "7B", "--fit", "24GiB"});
  EXPECT_EQ(params.exit_code, 2);
  EXPECT_TRUE(contains(params.err, "--fit needs --config")) << params.err;
}

}  // namespace

// The planner's RSS against the kernel's: the main job's config, 12 steps, the resident set the
// trainer logs after each step (VmRSS) within 15% of predict_rss (the code and library terms
// were measured on Debian's builds; a different libc or BLAS moves them by megabytes).
TEST(MemoryCli, PredictedRssOfTheMainJobWithin15Percent) {
#ifdef MIXPREC_SANITIZED
  GTEST_SKIP() << "AddressSanitizer's shadow memory and quarantine are not the process's own";
#endif
  namespace fs = std::filesystem;
  const fs::path run = fs::temp_directory_path() / ("mixprec_rss_" + std::to_string(::getpid()));
  fs::remove_all(run);
  const std::vector<std::string> args = {"train", config("moe_small.toml"),
                                         "--set", "run_dir=" + run.string(),
                                         "--set", "training.steps=12",
                                         "--set", "training.eval_every=0",
                                         "--set", "checkpoint.enable=false",
                                         "--set", "metrics.plot=false",
                                         "--set", "checkpoint.export_bf16=false",
                                         "--set", "training.threads=2"};
  const RunResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << describe(args, r);
  std::ifstream log(run / "metrics.jsonl");
  std::string line;
  std::size_t rss = 0;
  while (std::getline(log, line))
    if (line.find("\"type\":\"train\"") != std::string::npos)
      rss = nlohmann::json::parse(line).at("rss_bytes").get<std::size_t>();
  std::size_t token_file = 0;
  for (const auto& e : fs::directory_iterator(run))
    if (e.path().filename().string().rfind("tokens-", 0) == 0) token_file += e.file_size();
  const mixprec::config::TrainConfig c =
      mixprec::config::load_config(config("moe_small.toml"), {"training.threads=2"});
  const std::size_t predicted =
      mixprec::dist::predict_rss(mixprec::dist::plan_memory(c, 1), 2, token_file);
  const double ratio = static_cast<double>(predicted) / static_cast<double>(rss);
  std::printf("moe_small RSS: predicted %zu, measured %zu, ratio %.3f\n", predicted, rss, ratio);
  EXPECT_GT(ratio, 0.85);
  EXPECT_LT(ratio, 1.15);
  fs::remove_all(run);
}
