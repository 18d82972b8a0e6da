// The traps a new user fell into (issue 17): each bad value is refused before any work, by the
// flag or key the user typed, and nothing is silently ignored or overwritten.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli_running.h"
#include "mixprec/io/checkpoint_store.h"
#include "support/temp_files.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;
using testing::describe;
using testing::run_cli;
using testing::RunResult;
using testing::TempDir;

const std::string kTiny = std::string(MIXPREC_SOURCE_DIR) + "/configs/tiny.toml";

using testing::contains;

// tiny.toml for `steps` steps on a small corpus in `dir`, no checkpoints.
std::vector<std::string> short_run(const TempDir& dir, const std::string& steps,
                                   std::vector<std::string> extra = {}) {
  const fs::path corpus = dir / "corpus.txt";
  if (!fs::exists(corpus)) {
    std::string text;
    for (int i = 0; text.size() < 20000; ++i) text += "words " + std::to_string(i % 97) + ".\n";
    testing::write_file(corpus, text);
  }
  std::vector<std::string> args = {
      "train",   kTiny, "--data",     corpus.string(), "--run-dir", (dir / "run").string(),
      "--steps", steps, "--progress", "quiet",         "--set",     "training.threads=1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Refused (a usage or config error, not a crash), with `message` on stderr.
void expect_refused(const std::vector<std::string>& args, const std::string& message) {
  const RunResult r = run_cli(args);
  EXPECT_NE(r.exit_code, 0) << describe(args, r);
  EXPECT_LT(r.exit_code, 128) << "a crash, not an error: " << describe(args, r);
  EXPECT_TRUE(contains(r.err, message)) << "expected '" << message << "'\n" << describe(args, r);
}

TEST(CliTraps, StepsBelowOneAreRefusedNamingTheFlag) {
  TempDir dir;
  expect_refused(short_run(dir, "-1"), "--steps");  // was ignored: the config's 30 steps ran
  expect_refused(short_run(dir, "0"), "--steps");
  EXPECT_FALSE(fs::exists(dir / "run" / "metrics.jsonl"));
}

TEST(CliTraps, ARunDirectoryWithMetricsIsContinuedOrRefusedNeverOverwritten) {
  TempDir dir;
  const RunResult first = run_cli(short_run(dir, "2"));
  ASSERT_EQ(first.exit_code, 0) << describe(short_run(dir, "2"), first);
  const fs::path log = dir / "run" / "metrics.jsonl";
  const std::string before = testing::read_file(log);
  ASSERT_FALSE(before.empty());

  expect_refused(short_run(dir, "2"), log.string());  // was silently truncated
  EXPECT_EQ(testing::read_file(log), before);

  const auto resumed = short_run(dir, "2", {"--resume"});
  const RunResult again = run_cli(resumed);
  ASSERT_EQ(again.exit_code, 0) << describe(resumed, again);
  const std::string after = testing::read_file(log);
  EXPECT_TRUE(after.starts_with(before)) << "the earlier run's lines must be kept";
  EXPECT_GT(after.size(), before.size());
}

TEST(CliTraps, SampleFlagsAreCheckedByTheirOwnNames) {
  // Refused before the checkpoint is even looked for.
  expect_refused({"sample", "no-such-run", "--tokens", "-5"}, "--tokens");
  expect_refused({"sample", "no-such-run", "--top-k", "-1"}, "--top-k");
  expect_refused({"sample", "no-such-run", "--temperature", "-0.5"}, "--temperature");
}

TEST(CliTraps, PrecisionErrorsListOnlyWhatIsAcceptedAndSuggestTheSpellingMeant) {
  TempDir dir;
  expect_refused(short_run(dir, "1", {"--precision", "bf16_mixed"}), "did you mean 'bf16-mixed'");
  const auto args = short_run(dir, "1", {"--precision", "fp12"});
  const RunResult r = run_cli(args);
  EXPECT_NE(r.exit_code, 0) << describe(args, r);
  EXPECT_TRUE(contains(r.err, "a dtype (f64, f32, bf16, f16, full, half)")) << r.err;
  for (const char* refused_anyway : {"f8_e4m3fn", "f8_e5m2", "i32", "i64", "u8", "bool"})
    EXPECT_FALSE(contains(r.err, refused_anyway))
        << refused_anyway << " listed as valid: " << r.err;
}

TEST(CliTraps, AVocabularyLargerThanTheDataIsRefused) {
  TempDir dir;
  expect_refused(short_run(dir, "1", {"--set", "model.vocab_size=50257"}), "model.vocab_size");
}

TEST(CliTraps, MemoryRefusesAWorldSizeTheTrainerWouldRefuse) {
  const std::vector<std::string> args = {"memory", "--config", kTiny, "--world-size", "3"};
  expect_refused(args, "training.batch_size");  // tiny's batch of 4 over 3 ranks
}

TEST(CliTraps, HelpShowsTheConfigOnceAndTheEvalDefault) {
  const RunResult train = run_cli({"train", "--help"});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_FALSE(contains(train.out, "--config TEXT")) << train.out;
  const size_t first = train.out.find("TOML config file");
  ASSERT_NE(first, std::string::npos) << train.out;
  EXPECT_EQ(train.out.find("TOML config file", first + 1), std::string::npos) << train.out;
  const RunResult eval = run_cli({"eval", "--help"});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_TRUE(contains(eval.out, "the whole validation split")) << eval.out;
  // --config still works (torchtitan's spelling), and no config at all is a usage error.
  expect_refused({"train"}, "needs a config file");
  TempDir dir;
  std::vector<std::string> flag_form = short_run(dir, "0");
  flag_form[1] = "--config=" + kTiny;
  expect_refused(flag_form, "--steps");  // parsed as far as the bad step count
}

// Sizes no machine holds (hundreds of terabytes) are refused before anything is built, in well
// under a second, naming the keys: n_layers = 1e6 ran past a minute, a batch of 1e9 ended in
// bad_alloc.
TEST(CliTraps, ConfigsTooLargeForThisMachineAreRefusedAtOnce) {
  TempDir dir;
  for (const auto& [set, key] : {std::pair<std::string, std::string>{"model.n_layers=100000000",
                                                                     "model.n_layers = 100000000"},
                                 {"training.batch_size=16777216", "training.batch_size = 16777216"},
                                 {"model.d_model=1048576", "model.d_model = 1048576"}}) {
    const auto start = std::chrono::steady_clock::now();
    expect_refused(short_run(dir, "1", {"--set", set}), key);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << set;
  }
  // Past the bounds that keep the planner's counts inside int64: refused by the config.
  expect_refused(short_run(dir, "1", {"--set", "model.d_model=1099511627776"}), "model.d_model");
  expect_refused(
      short_run(dir, "1", {"--set", "model.d_model=16777216", "--set", "model.d_ff=16777216"}),
      "model.d_ff");
}

}  // namespace
}  // namespace mixprec

namespace mixprec {
namespace {

// A learning rate that blows up fp16 training: every step after the first overflows, in the
// forward pass. By default the first non-finite loss ends it (training.max_nonfinite_steps):
// step 2, where backing off the scale could not help.
TEST(DivergedRuns, AnFp16RunWhoseForwardOverflowsStopsAtTheFirstNonFiniteLoss) {
  TempDir dir;
  const auto args = short_run(dir, "30",
                              {"--precision", "fp16-mixed", "--set", "optimizer.lr=1000", "--set",
                               "lr_scheduler.warmup_steps=0", "--detect-anomaly"});
  const RunResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 1) << describe(args, r);
  for (const char* part : {"diverged at step 2: the loss was", "training.max_nonfinite_steps = 1",
                           "1:65536 2:65536*", "forward pass of op Linear"})
    EXPECT_TRUE(contains(r.err, part)) << part << "\n" << describe(args, r);
}

// With that rule off, the loss-scale rules end it (it used to skip on with the scale falling
// to 2^-12 and exit 0), naming the step, the scale history and, with --detect-anomaly, the op
// and module of the first inf/NaN; the newest checkpoint is the last good one.
TEST(DivergedRuns, AnFp16RunThatBlowsUpStopsNamingTheStepOpAndModule) {
  TempDir dir;
  const auto args = short_run(
      dir, "30",
      {"--precision", "fp16-mixed", "--set", "optimizer.lr=1000", "--set",
       "lr_scheduler.warmup_steps=0", "--set", "checkpoint.enable=true", "--set",
       "checkpoint.interval=1", "--set", "training.max_nonfinite_steps=0", "--detect-anomaly"});
  const RunResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 1) << describe(args, r);
  for (const char* part :
       {"diverged at step 18", "training.min_loss_scale", "1:65536 2:65536* 3:32768*",
        "forward pass of op Linear", "in module blocks.0.attn", "nothing was saved after"})
    EXPECT_TRUE(contains(r.err, part)) << part << "\n" << describe(args, r);
  // Checkpoints due on skipped steps wait for a good step: step 1's is the only one, where
  // steps 2-17 would have rotated it out.
  std::vector<std::string> kept;
  for (const auto& entry : fs::directory_iterator(dir / "run/checkpoint"))
    kept.push_back(entry.path().filename().string());
  EXPECT_EQ(kept, std::vector<std::string>{"step-00000001.safetensors"});

  // Without the flag: the parameter the inf/NaN ended up in, and how to find its origin.
  TempDir again;
  auto plain =
      short_run(again, "30",
                {"--precision", "fp16-mixed", "--set", "optimizer.lr=1000", "--set",
                 "lr_scheduler.warmup_steps=0", "--set", "training.min_loss_scale=0", "--set",
                 "training.max_skipped_steps=5", "--set", "training.max_nonfinite_steps=0"});
  const RunResult p = run_cli(plain);
  EXPECT_EQ(p.exit_code, 1) << describe(plain, p);
  EXPECT_TRUE(contains(p.err, "5 steps in a row were skipped")) << p.err;
  EXPECT_TRUE(contains(p.err, "training.max_skipped_steps = 5")) << p.err;
  EXPECT_TRUE(contains(p.err, "--detect-anomaly")) << p.err;
}

// The default rule never stops a run that recovers: at lr 0.12 tiny overflows twice in fp16,
// the scale backs off, and training goes on to the end (at 0.1 it overflowed once with
// per-expert weights; stacked experts, idle ones stepping too, take another path).
// Clipping by value (training.grad_clip_value, Keras's clipvalue) clamps unscaled gradients
// only on finite steps: an overflow is still a skipped step, never a clamped update.
TEST(DivergedRuns, ClippingByValueStillSkipsNonFiniteSteps) {
  TempDir dir;
  const auto args =
      short_run(dir, "30",
                {"--precision", "fp16-mixed", "--set", "optimizer.lr=1000", "--set",
                 "lr_scheduler.warmup_steps=0", "--set", "training.grad_clip=0", "--set",
                 "training.grad_clip_value=0.5", "--set", "training.min_loss_scale=0", "--set",
                 "training.max_skipped_steps=5", "--set", "training.max_nonfinite_steps=0"});
  const RunResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 1) << describe(args, r);
  EXPECT_TRUE(contains(r.err, "5 steps in a row were skipped")) << describe(args, r);
  TempDir calm;
  const auto ok = short_run(calm, "4",
                            {"--precision", "bf16-mixed", "--set", "training.grad_clip=0", "--set",
                             "training.grad_clip_value=0.01"});
  const RunResult c = run_cli(ok);
  EXPECT_EQ(c.exit_code, 0) << describe(ok, c);
}

// fp16 at a learning rate near the edge: whether and when a step overflows depends on the
// kernels' rounding, which differs between CPUs and between optimised and sanitizer builds
// (one such run here skips a step and recovers, another diverges for real). So several rates
// are tried: the test needs one run that skipped a step, recovered and was not stopped.
TEST(DivergedRuns, ARunThatSkipsAStepAndRecoversIsNeverStopped) {
  std::string tried;
  for (const char* lr : {"0.12", "0.1", "0.15", "0.08", "0.05"}) {
    TempDir dir;
    const auto args =
        short_run(dir, "60",
                  {"--precision", "fp16-mixed", "--set", std::string("optimizer.lr=") + lr, "--set",
                   "lr_scheduler.warmup_steps=0"});
    const RunResult r = run_cli(args);
    const std::string log = testing::read_file(dir / "run" / "metrics.jsonl");
    const size_t last = log.rfind("\"skipped_total\":");
    ASSERT_NE(last, std::string::npos) << describe(args, r);
    const int skipped = std::stoi(log.substr(last + 16));
    if (r.exit_code == 0 && skipped >= 1) return;  // skipped, recovered, never stopped
    // A run that stops must say why: a non-finite loss, never the skipped steps alone.
    if (r.exit_code != 0) {
      EXPECT_TRUE(contains(r.err, "diverged")) << describe(args, r);
    }
    tried += std::string(" lr ") + lr + ": exit " + std::to_string(r.exit_code) + ", " +
             std::to_string(skipped) + " skipped;";
  }
  FAIL() << "no run skipped a step and recovered:" << tried;
}

}  // namespace
}  // namespace mixprec

namespace mixprec {
namespace {

// Waits up to `limit` for `pid`; kills it (and fails) when it does not end in time.
int wait_or_kill(pid_t pid, std::chrono::seconds limit, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      testing::wait_cli(pid);
      ADD_FAILURE() << what << " did not end within " << limit.count() << " s";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Two trainers in one run directory both ran to exit 0, tearing metrics.jsonl and replacing
// each other's checkpoints: the second is refused, naming the first one's pid.
TEST(SharedRunDirs, ASecondTrainerInTheSameRunDirectoryIsRefused) {
  TempDir dir;
  FILE* out = std::tmpfile();
  FILE* err = std::tmpfile();
  const pid_t first = testing::start_cli(short_run(dir, "100000"), out, err);
  ASSERT_GT(first, 0);
  const fs::path log = dir / "run" / "metrics.jsonl";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(log) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(fs::exists(log)) << "the first run did not start within a minute";
  expect_refused(short_run(dir, "2", {"--resume"}),
                 "is in use by another mixprec run (pid " + std::to_string(first) + ")");
  ::kill(first, SIGKILL);
  testing::wait_cli(first);
  std::fclose(out);
  std::fclose(err);
  // The kernel dropped the killed run's lock: the directory can be continued.
  const auto resumed = short_run(dir, "2", {"--resume"});
  const RunResult r = run_cli(resumed);
  EXPECT_EQ(r.exit_code, 0) << describe(resumed, r);
}

// eval on a FIFO waited for a writer for ever.
TEST(SharedRunDirs, EvalOnAFifoFailsInsteadOfWaiting) {
  TempDir dir;
  const fs::path fifo = dir / "step-00000001.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  FILE* out = std::tmpfile();
  FILE* err = std::tmpfile();
  const pid_t pid = testing::start_cli({"eval", fifo.string()}, out, err);
  ASSERT_GT(pid, 0);
  const int code = wait_or_kill(pid, std::chrono::seconds(20), "eval on a FIFO");
  EXPECT_NE(code, 0);
  EXPECT_LT(code, 128);
  EXPECT_TRUE(contains(testing::slurp(err), "not a regular file")) << testing::slurp(err);
  std::fclose(out);
  std::fclose(err);
}

// An interrupted save's temporary is removed when the run continues, and the warnings (that,
// and a torn newest checkpoint skipped) reach stderr even with --progress quiet.
TEST(SharedRunDirs, InterruptedSavesAreCleanedUpAndWarningsAlwaysReachStderr) {
  TempDir dir;
  const std::vector<std::string> ckpt = {"--set", "checkpoint.enable=true", "--set",
                                         "checkpoint.interval=2"};
  const auto first = short_run(dir, "4", ckpt);
  ASSERT_EQ(run_cli(first).exit_code, 0);
  const fs::path folder = dir / "run" / "checkpoint";
  const fs::path temporary = folder / "step-00000006.safetensors.tmp.Ab3xYz";
  testing::write_file(temporary, "half a checkpoint");
  fs::resize_file(folder / "step-00000004.safetensors", 100);  // torn
  auto more = short_run(dir, "6", ckpt);
  more.push_back("--resume");
  const RunResult r = run_cli(more);
  ASSERT_EQ(r.exit_code, 0) << describe(more, r);
  EXPECT_FALSE(fs::exists(temporary));
  EXPECT_TRUE(contains(r.err, "warning: removed " + temporary.string())) << r.err;
  EXPECT_TRUE(contains(r.err, "warning: skipped checkpoints that fail validation")) << r.err;
  EXPECT_TRUE(contains(r.err, "step-00000004.safetensors")) << r.err;
}

}  // namespace
}  // namespace mixprec

namespace mixprec {
namespace {

// eval printed "validation loss -nan" and exited 0. Weights that are finite but overflow f16
// (1e30, past 65504) make an fp16-mixed forward pass non-finite: eval names the file, exit 1.
TEST(DivergedRuns, EvalOfANonFiniteLossExitsNonZero) {
  TempDir dir;
  const auto args =
      short_run(dir, "2", {"--precision", "fp16-mixed", "--set", "checkpoint.enable=true"});
  ASSERT_EQ(run_cli(args).exit_code, 0);
  const fs::path ckpt = dir / "run/checkpoint/step-00000002.safetensors";
  io::Checkpoint c = io::load_checkpoint(ckpt.string());
  // 6e4 fits f16 (a larger value is refused on load), but every product overflows it.
  for (auto& [key, t] : c.tensors)
    if (key.starts_with("model.") && key.ends_with(".weight") && t.ndim() == 2)
      t = Tensor::full(t.shape(), 6e4, t.dtype());
  io::CheckpointStore(ckpt.parent_path().string(), 0).save(2, c.tensors, c.metadata);
  const std::vector<std::string> eval = {"eval", (dir / "run").string(), "--batches", "1"};
  expect_refused(eval, "the validation loss is not finite");
  expect_refused(eval, ckpt.string());
}

}  // namespace
}  // namespace mixprec
