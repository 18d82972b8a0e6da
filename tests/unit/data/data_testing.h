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

namespace mixprec::data::testing {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "mixprec-data-XXXXXX").string();
    const char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& rel) const { return path_ / rel; }

 private:
  fs::path path_;
};

inline void write_file(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Moves a file's mtime by `seconds`: a rewrite within the file system's timestamp
// granularity would otherwise look unchanged.
inline void shift_mtime(const fs::path& path, int seconds) {
  fs::last_write_time(path, fs::last_write_time(path) + std::chrono::seconds(seconds));
}

inline std::string as_string(const TokenSplit& split) {
  return {reinterpret_cast<const char*>(split.tokens.data()), split.tokens.size()};
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
