// Issue 31: sizes and counts past what `memory`, `sample` and `train` can hold are refused in
// moments, naming the flag or key as typed, and `sample` streams its text.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli_running.h"
#include "mixprec/amp/compute_scope.h"
#include "mixprec/infer/sampler.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/train/run_checkpoint.h"
#include "mixprec/train/run_data.h"
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

void expect_refused(const std::vector<std::string>& args, const std::vector<std::string>& parts) {
  const RunResult r = run_cli(args);
  EXPECT_NE(r.exit_code, 0) << describe(args, r);
  EXPECT_LT(r.exit_code, 128) << "ended by a signal\n" << describe(args, r);
  for (const std::string& part : parts)
    EXPECT_TRUE(contains(r.err, part)) << part << "\n" << describe(args, r);
}

TEST(HostileSizesCli, MemoryRefusesAMillionLayersBeforeDescribingThem) {
  for (const char* layers : {"1000000", "1099511627776"})
    for (const char* mode : {"none", "full"})
      expect_refused({"memory", "--config", kTiny, "--set", std::string("model.n_layers=") + layers,
                      "--set", std::string("activation_checkpoint.mode=") + mode},
                     {"model.n_layers = " + std::string(layers)});
}

TEST(HostileSizesCli, MemoryRefusesAdamMinisRankByRankCountPastItsBound) {
  // 2^20 ranks x 1001 units took 159 s (every rank's pieces of every unit are counted).
  expect_refused(
      {"memory", "--config", kTiny, "--set", "optimizer.name=adam-mini", "--set",
       "model.n_layers=1000", "--set", "training.batch_size=1048576", "--world-size", "1048576"},
      {"1048576 ranks x 1001 units is more than 2^24"});
}

TEST(HostileSizesCli, MemoryReadsCountsExactlyAndRefusesWhatWouldWrap) {
  expect_refused({"memory", "--params", "2e18"}, {"--params '2e18' must be at most"});
  expect_refused({"memory", "--params", "1.5"}, {"--params '1.5' is not a whole number"});
  for (const char* w : {"4294967298", "2147483648", "1e12"})
    expect_refused({"memory", "--params", "7B", "--world-size", w},
                   {"--world-size '" + std::string(w) + "' must be at most 1048576"});
  expect_refused({"memory", "--params", "7B", "--world-size", "0"},
                 {"--world-size '0' must be at least 1"});
  // Still read: exponents, decimals and suffixes that give whole numbers.
  const RunResult r = run_cli({"memory", "--params", "1e15", "--world-size", "4e3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out,
                       "1000T parameters: FP32 weights 4.00 PB total, 1.00 TB per rank at "
                       "W=4000"))
      << r.out;
}

TEST(HostileSizesCli, TrainCountsTheGlobalBatchsTokenIds) {
  TempDir dir;
  testing::write_file(dir / "corpus.txt", std::string(60000, 'a'));
  // One row per micro-batch, but the global batch's ids are 2 x 2^24 x 2048 x 8 bytes = 550 GB.
  std::vector<std::string> args = {"train",     kTiny,
                                   "--data",    (dir / "corpus.txt").string(),
                                   "--run-dir", (dir / "run").string(),
                                   "--set",     "training.batch_size=16777216",
                                   "--set",     "training.local_batch_size=1",
                                   "--set",     "model.max_seq_len=2048",
                                   "--set",     "training.seq_len=2048"};
  expect_refused(args, {"the global batch's token ids 550 GB for training.batch_size = 16777216"});
}

// A tiny trained run with a checkpoint at step 2.
fs::path tiny_run(const TempDir& dir, const std::vector<std::string>& extra = {}) {
  std::string text;
  for (int i = 0; text.size() < 20000; ++i)
    text += "line " + std::to_string(i * 7919 % 1000) + " of the test corpus. \xC3\xA9t\xC3\xA9\n";
  testing::write_file(dir / "corpus.txt", text);
  std::vector<std::string> args = {"train",     kTiny,
                                   "--data",    (dir / "corpus.txt").string(),
                                   "--run-dir", (dir / "run").string(),
                                   "--steps",   "2",
                                   "--set",     "checkpoint.enable=true",
                                   "--set",     "checkpoint.interval=2",
                                   "--set",     "training.threads=1"};
  args.insert(args.end(), extra.begin(), extra.end());
  const RunResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << describe(args, r);
  return dir / "run";
}

TEST(HostileSizesCli, SampleStreamsTheTextAsWholeDecodingGaveIt) {
  TempDir dir;
  const fs::path run = tiny_run(dir);
  const std::vector<std::string> args = {"sample", run.string(), "--tokens", "300",
                                         "--seed", "3",          "--prompt", "line \xC3"};
  const RunResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << describe(args, r);
  // What the whole-text decode of prompt + tokens gives.
  train::LoadedModel loaded = train::load_model(run.string());
  const auto tokenizer = train::open_run_tokenizer(loaded.config);
  std::vector<int64_t> prompt;
  if (const auto bos = tokenizer->bos()) prompt.push_back(*bos);
  for (const int64_t id : tokenizer->encode("line \xC3")) prompt.push_back(id);
  infer::SampleOptions options;
  options.max_new_tokens = 300;
  options.seed = 3;
  std::vector<int64_t> tokens;
  {
    amp::ComputeScope compute(loaded.config.training.policy);
    tokens = infer::generate(*loaded.model, prompt, options);
  }
  std::vector<int64_t> all(prompt.begin() + (tokenizer->bos() ? 1 : 0), prompt.end());
  all.insert(all.end(), tokens.begin(), tokens.end());
  if (const auto eos = tokenizer->eos()) std::erase(all, *eos);
  EXPECT_EQ(r.out, tokenizer->decode(all) + "\n");

  expect_refused({"sample", run.string(), "--tokens", "1000000000000"},
                 {"--tokens '1000000000000' must be at most 1000000000"});
  expect_refused({"sample", run.string(), "--tokens", "18446744073709551616"},
                 {"--tokens '18446744073709551616' must be at most"});
}

TEST(HostileSizesCli, SampleOfABillionTokensPrintsAsItGoes) {
  TempDir dir;
  const fs::path run = tiny_run(dir);
  FILE* out = std::tmpfile();
  FILE* err = std::tmpfile();
  ASSERT_TRUE(out && err);
  const pid_t pid =
      testing::start_cli({"sample", run.string(), "--tokens", "1000000000"}, out, err);
  ASSERT_GT(pid, 0);
  // Text appears while the run goes on (it used to come only at the end, after an 8 GB
  // reservation); a generous wait, not a speed target.
  bool printed = false;
  for (int i = 0; i < 1200 && !printed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    struct stat st {};
    printed = ::fstat(fileno(out), &st) == 0 && st.st_size > 20;
  }
  ::kill(pid, SIGKILL);
  testing::wait_cli(pid);
  EXPECT_TRUE(printed) << "no text after 120 s; stderr:\n" << testing::slurp(err);
  std::fclose(out);
  std::fclose(err);
}

TEST(HostileSizesCli, ADivergedCheckpointIsNamedWhenSamplingFails) {
  TempDir dir;
  const fs::path run = tiny_run(dir, {"--set", "model.tie_embeddings=false"});
  fs::path checkpoint;
  for (const auto& e : fs::recursive_directory_iterator(run))
    if (e.path().extension() == ".safetensors") checkpoint = e.path();
  ASSERT_FALSE(checkpoint.empty());
  // Finite but absurd weights, 1.8e19 in the final norm's gain and the output head (just under
  // the 1.845e19 the loader refuses: sqrt of f32's largest): every product is 3.2e38, so each
  // logit's sum leaves f32's range and sampling meets inf or NaN.
  io::SafetensorsFile file = io::load_safetensors(checkpoint.string());
  io::TensorList tensors;
  bool absurd = false;
  for (auto& [name, t] : file.tensors) {
    const bool head = name.find("lm_head.weight") != std::string::npos;
    if ((head || name.find("final_norm.weight") != std::string::npos) && t.dtype() == DType::f32) {
      t = Tensor::full(t.shape(), 1.8e19, DType::f32);
      absurd = absurd || head;
    }
    tensors.emplace_back(name, t);
  }
  ASSERT_TRUE(absurd) << "no lm_head.weight in " << checkpoint;
  file.metadata.erase("tensor_checksums");
  io::save_safetensors(checkpoint.string(), tensors, file.metadata);
  expect_refused({"sample", checkpoint.string(), "--tokens", "5"},
                 {checkpoint.filename().string(), "step 2"});
}

}  // namespace
}  // namespace mixprec
