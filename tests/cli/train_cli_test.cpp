// `mixprec train` and `mixprec eval` as a user runs them: a run killed (SIGKILL) after a
// checkpoint and resumed with --resume logs the same per-step losses, bit for bit, as an
// uninterrupted run; bad input exits non-zero with a message naming the key or file.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli_running.h"
#include "support/scoped_env.h"
#include "support/temp_files.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;
using testing::describe;
using testing::run_cli;
using testing::TempDir;

const std::string kTiny = std::string(MIXPREC_SOURCE_DIR) + "/configs/tiny.toml";

// tiny.toml on ~50 KB of text, 40 steps, a checkpoint every 10.
std::vector<std::string> train_args(const TempDir& dir, std::vector<std::string> extra = {}) {
  const fs::path corpus = dir / "corpus.txt";
  if (!fs::exists(corpus)) {
    std::string text;
    for (int i = 0; text.size() < 50000; ++i)
      text += "line " + std::to_string(i * 7919 % 1000) + " of the test corpus.\n";
    testing::write_file(corpus, text);
  }
  std::vector<std::string> args = {"train",      kTiny,
                                   "--data",     corpus.string(),
                                   "--run-dir",  (dir / "run").string(),
                                   "--steps",    "40",
                                   "--progress", "lines",
                                   "--set",      "checkpoint.enable=true",
                                   "--set",      "checkpoint.interval=10",
                                   "--set",      "training.threads=2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// step -> loss from metrics.jsonl; a later line for the same step replaces an earlier one
// (a resumed run redoes the steps after its checkpoint); a torn last line is skipped.
std::map<int64_t, double> losses(const fs::path& jsonl) {
  std::map<int64_t, double> out;
  std::istringstream in(testing::read_file(jsonl));
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || j.value("type", "") != "train") continue;
    out[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  return out;
}

TEST(TrainCli, KilledAfterACheckpointAndResumedLogsTheSameLossesBitForBit) {
  TempDir whole, killed;
  const testing::RunResult full = run_cli(train_args(whole));
  ASSERT_EQ(full.exit_code, 0) << describe(train_args(whole), full);
  const std::map<int64_t, double> expected = losses(whole / "run/metrics.jsonl");
  ASSERT_EQ(expected.size(), 40u);

  // Start the same run, kill it once its step-20 checkpoint exists.
  FILE* out = std::tmpfile();
  FILE* err = std::tmpfile();
  const pid_t pid = testing::start_cli(train_args(killed), out, err);
  ASSERT_GT(pid, 0);
  const fs::path ckpt = killed / "run/checkpoint/step-00000020.safetensors";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!fs::exists(ckpt) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::kill(pid, SIGKILL);
  const int status = testing::wait_cli(pid);
  std::fclose(out);
  std::fclose(err);
  ASSERT_TRUE(fs::exists(ckpt));
  if (status == 0) GTEST_SKIP() << "the run finished before it could be killed";
  EXPECT_EQ(status, 128 + SIGKILL);

  const auto args = train_args(killed, {"--resume"});
  const testing::RunResult resumed = run_cli(args);
  ASSERT_EQ(resumed.exit_code, 0) << describe(args, resumed);
  EXPECT_NE(resumed.err.find("resumed from"), std::string::npos) << resumed.err;
  const std::map<int64_t, double> got = losses(killed / "run/metrics.jsonl");
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [step, loss] : expected) {
    ASSERT_TRUE(got.contains(step)) << "step " << step;
    EXPECT_EQ(std::memcmp(&got.at(step), &loss, sizeof loss), 0)
        << "step " << step << ": " << got.at(step) << " vs " << loss;
  }

  // eval reads the run directory's newest checkpoint.
  const testing::RunResult eval = run_cli({"eval", (killed / "run").string(), "--batches", "2"});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_NE(eval.out.find("(step 40)"), std::string::npos) << eval.out;
  EXPECT_NE(eval.out.find("validation loss"), std::string::npos) << eval.out;
}

TEST(TrainCli, BadInputExitsNonZeroNamingTheKeyOrFile) {
  TempDir dir;
  struct Case {
    std::vector<std::string> extra;
    std::string message;
  };
  for (const Case& c : {
           Case{{"--set", "model.d_modle=64"}, "unknown key 'model.d_modle'"},
           Case{{"--set", "model.d_modle=64"}, "did you mean 'model.d_model'"},
           Case{{"--set", "training.steps=-3"}, "training.steps"},
           Case{{"--set", "optimizer.lr=fast"}, "optimizer.lr"},
           // OpenMP crashed creating them: refused against the machine's cores.
           Case{{"--set", "training.threads=100000"}, "training.threads"},
           Case{{"--precision", "fp12"}, "fp12"},
           Case{{"--set", "training.data=/no/such/corpus"}, "/no/such/corpus"},
           // A run directory under a regular file: a message, not std::terminate.
           Case{{"--set", "run_dir=" + (dir / "corpus.txt/run").string()}, "run_dir"},
       }) {
    const auto args = train_args(dir, c.extra);
    const testing::RunResult r = run_cli(args);
    EXPECT_NE(r.exit_code, 0) << describe(args, r);
    EXPECT_LT(r.exit_code, 128) << "a crash, not an error: " << describe(args, r);
    EXPECT_NE(r.err.find(c.message), std::string::npos) << describe(args, r);
  }
  const testing::RunResult missing = run_cli({"train", "no-such.toml"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("no-such.toml"), std::string::npos) << missing.err;
  const testing::RunResult eval = run_cli({"eval", (dir / "nothing-here").string()});
  EXPECT_NE(eval.exit_code, 0);
  EXPECT_NE(eval.err.find("nothing-here"), std::string::npos) << eval.err;
}

}  // namespace
}  // namespace mixprec

namespace mixprec {
namespace {

using testing::ScopedEnv;

// MIXPREC_BACKEND=reference trains on the reference kernels: the same run to within the
// kernels' accumulation differences (f64 sums against f32 ones), and a backend that does
// not exist is refused by name.
TEST(TrainCli, ReferenceBackendTrainsTheSameRunAndAnUnknownOneIsRefused) {
  TempDir fast, slow;
  const auto three_steps = [](const TempDir& dir) {
    std::vector<std::string> args = train_args(dir, {"--set", "checkpoint.enable=false"});
    *(std::find(args.begin(), args.end(), "--steps") + 1) = "3";
    return args;
  };
  const auto cpu = run_cli(three_steps(fast));
  ASSERT_EQ(cpu.exit_code, 0) << describe(three_steps(fast), cpu);
  {
    const ScopedEnv env("MIXPREC_BACKEND", "reference");
    const auto ref = run_cli(three_steps(slow));
    ASSERT_EQ(ref.exit_code, 0) << describe(three_steps(slow), ref);
  }
  const auto a = losses(fast / "run" / "metrics.jsonl"), b = losses(slow / "run" / "metrics.jsonl");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (const auto& [step, loss] : a) EXPECT_NEAR(b.at(step), loss, 1e-3 * loss) << step;

  const ScopedEnv env("MIXPREC_BACKEND", "gpu");
  const auto bad = run_cli(three_steps(fast));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("MIXPREC_BACKEND"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("'gpu'"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace mixprec
