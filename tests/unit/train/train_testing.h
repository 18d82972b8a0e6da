// A small corpus and config for trainer tests: the tiny MoE of configs/tiny.toml, shrunk
// further, on ~60 KB of generated text, so a run of a dozen steps takes well under a second.
#pragma once

#include <string>
#include <vector>

#include "mixprec/config/train_config.h"
#include "mixprec/io/config_file.h"
#include "mixprec/train/trainer.h"
#include "support/temp_files.h"

namespace mixprec::train::testing {

using mixprec::testing::TempDir;

// Deterministic pseudo-English: words from a fixed list, picked by an LCG.
inline std::string make_text(std::size_t bytes, uint32_t seed = 1) {
  static const char* words[] = {"the",  "cat", "sat", "on",    "a",   "mat",  "and",
                                "then", "ran", "to",  "every", "dog", "with", "joy"};
  std::string text;
  uint32_t x = seed;
  while (text.size() < bytes) {
    x = x * 1664525u + 1013904223u;
    text += words[(x >> 16) % 14];
    text += (x >> 8) % 9 == 0 ? ".\n" : " ";
  }
  return text;
}

// The overrides that shrink configs/tiny.toml for tests: the run in `run_dir`, on `corpus`.
inline std::vector<std::string> tiny_overrides(const std::filesystem::path& run_dir,
                                               const std::filesystem::path& corpus) {
  return {
      "run_dir=" + run_dir.string(),
      "training.data=" + corpus.string(),
      "model.d_model=32",
      "model.n_layers=2",
      "model.n_heads=2",
      "model.d_ff=48",
      "model.max_seq_len=32",
      "training.seq_len=32",
      "training.batch_size=4",
      "training.steps=12",
      "training.eval_every=4",
      "training.eval_batches=2",
      "training.threads=2",
      "checkpoint.enable=true",
      "checkpoint.interval=4",
      "checkpoint.keep_last=0",
      "metrics.log_every=4",
  };
}

// configs/tiny.toml with `overrides` applied.
inline config::TrainConfig tiny_toml(const std::vector<std::string>& overrides) {
  return config::load_config(std::string(MIXPREC_SOURCE_DIR) + "/configs/tiny.toml", overrides);
}

// The tiny model on a generated corpus in `dir`; extra overrides last.
inline config::TrainConfig tiny_config(const TempDir& dir,
                                       std::vector<std::string> overrides = {}) {
  const auto corpus = dir / "corpus.txt";
  if (!std::filesystem::exists(corpus)) mixprec::testing::write_file(corpus, make_text(60000));
  std::vector<std::string> all = tiny_overrides(dir / "run", corpus);
  all.insert(all.end(), overrides.begin(), overrides.end());
  return tiny_toml(all);
}

// No progress output; `resume` as --resume.
inline TrainerOptions quiet(bool resume = false) {
  TrainerOptions o;
  o.progress = ProgressStyle::quiet;
  o.resume = resume;
  return o;
}

}  // namespace mixprec::train::testing
