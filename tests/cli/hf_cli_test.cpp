// `mixprec export --hf` and `mixprec train --init-from` as a user runs them: a run's export
// starts a new run from its trained weights; bad folders and mismatched configs exit
// non-zero naming the folder and the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_running.h"
#include "support/temp_files.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;
using testing::TempDir;

const std::string kTiny = std::string(MIXPREC_SOURCE_DIR) + "/configs/tiny.toml";

// tiny.toml as a Llama 3 with grouped-query attention, in fp32, on ~30 KB of text.
std::vector<std::string> llama_args(const TempDir& dir, const std::string& run,
                                    std::vector<std::string> extra = {}) {
  const fs::path corpus = dir / "corpus.txt";
  if (!fs::exists(corpus)) {
    std::string text;
    for (int i = 0; text.size() < 30000; ++i)
      text += "row " + std::to_string(i * 7919 % 1000) + " of the export corpus.\n";
    testing::write_file(corpus, text);
  }
  std::vector<std::string> args = {"train",       kTiny,
                                   "--data",      corpus.string(),
                                   "--run-dir",   (dir / run).string(),
                                   "--progress",  "lines",
                                   "--precision", "fp32",
                                   "--set",       "model.kind=\"llama3\"",
                                   "--set",       "model.n_kv_heads=2",
                                   "--set",       "model.tie_embeddings=false",
                                   "--set",       "checkpoint.enable=true",
                                   "--set",       "training.threads=2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::string describe(const testing::RunResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

std::map<int64_t, double> losses(const fs::path& jsonl) {
  std::map<int64_t, double> out;
  std::istringstream in(testing::read_file(jsonl));
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("type", "") == "train")
      out[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  return out;
}

TEST(HfCli, ExportThenInitFromStartsFromTheTrainedWeights) {
  TempDir dir;
  const auto a = run_cli(llama_args(dir, "a", {"--steps", "30"}));
  ASSERT_EQ(a.exit_code, 0) << describe(a);
  const fs::path hf = dir / "hf";
  const auto e = run_cli({"export", (dir / "a").string(), "--hf", hf.string()});
  ASSERT_EQ(e.exit_code, 0) << describe(e);
  EXPECT_NE(e.out.find("as Hugging Face llama (f32)"), std::string::npos) << e.out;
  EXPECT_TRUE(fs::exists(hf / "config.json"));

  const auto b = run_cli(llama_args(dir, "b", {"--steps", "2", "--init-from", hf.string()}));
  ASSERT_EQ(b.exit_code, 0) << describe(b);
  const std::string log = b.out + b.err;  // progress lines go to stderr
  EXPECT_NE(log.find("initial weights: " + hf.string() + " (Hugging Face llama)"),
            std::string::npos)
      << log;
  // Step 1 of both runs reads the same batch: from the init (~ln 256 = 5.5) in a, from a's
  // trained weights in b, which have learned the corpus's characters.
  const auto la = losses(dir / "a" / "metrics.jsonl"), lb = losses(dir / "b" / "metrics.jsonl");
  ASSERT_TRUE(la.contains(1) && la.contains(30) && lb.contains(1));
  EXPECT_LT(lb.at(1), la.at(1) - 1.0) << la.at(1) << " " << lb.at(1);
  EXPECT_LT(lb.at(1), la.at(30) + 0.5) << la.at(30) << " " << lb.at(1);
}

TEST(HfCli, BadFoldersAndMismatchedConfigsAreRefused) {
  TempDir dir;
  const auto a = run_cli(llama_args(dir, "a", {"--steps", "2"}));
  ASSERT_EQ(a.exit_code, 0) << describe(a);
  const fs::path hf = dir / "hf";
  ASSERT_EQ(run_cli({"export", (dir / "a").string(), "--hf", hf.string()}).exit_code, 0);

  // The folder again: taken, nothing overwritten.
  const auto again = run_cli({"export", (dir / "a").string(), "--hf", hf.string()});
  EXPECT_EQ(again.exit_code, 1) << describe(again);
  EXPECT_NE(again.err.find("not an empty folder"), std::string::npos) << again.err;
  const auto dtype = run_cli({"export", (dir / "a").string(), "--hf", "x", "--dtype", "f16"});
  EXPECT_EQ(dtype.exit_code, 2) << describe(dtype);
  EXPECT_NE(dtype.err.find("--dtype"), std::string::npos) << dtype.err;

  // Another width than the folder's config.json.
  const auto wide = run_cli(llama_args(
      dir, "wide", {"--steps", "1", "--init-from", hf.string(), "--set", "model.d_model=96"}));
  EXPECT_EQ(wide.exit_code, 1) << describe(wide);
  EXPECT_NE(wide.err.find("hidden_size = 64, but model.d_model = 96"), std::string::npos)
      << wide.err;
  // No such folder.
  const auto missing = run_cli(
      llama_args(dir, "missing", {"--steps", "1", "--init-from", (dir / "nowhere").string()}));
  EXPECT_EQ(missing.exit_code, 1) << describe(missing);
  EXPECT_NE(missing.err.find("nowhere"), std::string::npos) << missing.err;
  // A model with no Hugging Face layout (tiny.toml's MoE): refused before anything is written.
  const auto moe_run = run_cli({"train", kTiny, "--data", (dir / "corpus.txt").string(),
                                "--run-dir", (dir / "moe").string(), "--steps", "1", "--set",
                                "checkpoint.enable=true", "--progress", "quiet"});
  ASSERT_EQ(moe_run.exit_code, 0) << describe(moe_run);
  const auto moe = run_cli({"export", (dir / "moe").string(), "--hf", (dir / "m").string()});
  EXPECT_EQ(moe.exit_code, 1) << describe(moe);
  EXPECT_NE(moe.err.find("model.kind = \"moe\" has no Hugging Face layout"), std::string::npos)
      << moe.err;
  EXPECT_FALSE(fs::exists(dir / "m"));
}

}  // namespace
}  // namespace mixprec
