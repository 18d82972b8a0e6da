// Shared helpers for the data tests: a temporary directory tree and file writers.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mixprec/data/token_dataset.h"
#include "support/temp_files.h"

namespace mixprec::data::testing {

namespace fs = std::filesystem;

using mixprec::testing::read_file;
using mixprec::testing::TempDir;
using mixprec::testing::write_file;

// Moves a file's mtime by `seconds`: a rewrite within the file system's timestamp
// granularity would otherwise look unchanged.
inline void shift_mtime(const fs::path& path, int seconds) {
  fs::last_write_time(path, fs::last_write_time(path) + std::chrono::seconds(seconds));
}

// The split's ids as bytes (the byte tokenizer's ids are the text).
inline std::string as_string(const TokenSplit& split) {
  std::string s;
  for (int64_t i = 0; i < split.size(); ++i) s += static_cast<char>(split.tokens[i]);
  return s;
}

// The whole stream: train split, then validation split.
inline std::string as_string(const TokenDataset& ds) {
  return as_string(ds.train()) + as_string(ds.validation());
}

// Options that collect warnings into `warnings` instead of printing them.
inline DatasetOptions options_for(const fs::path& corpus, const fs::path& run_dir,
                                  std::vector<std::string>& warnings, double validation = 0.1) {
  DatasetOptions o;
  o.corpus.paths = {corpus};
  o.cache_dir = run_dir;
  o.validation_fraction = validation;
  o.warn = [&warnings](const std::string& m) { warnings.push_back(m); };
  return o;
}

}  // namespace mixprec::data::testing
