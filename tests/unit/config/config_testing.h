// Helpers for the config tests: the repo's configs/ folder, and TOML text written to a real
// file so that error messages carry a real path.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mixprec/config/train_config.h"
#include "mixprec/io/config_file.h"
#include "support/op_testing.h"

namespace mixprec::config::testing {

inline std::string repo_config(const std::string& name) {
  // This file sits in tests/unit/config/; the configs live in configs/ at the top.
  const auto root =
      std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().parent_path();
  return (root / "configs" / name).string();
}

// Writes `text` to a file named after the running test and returns its path.
inline std::string write_toml(const std::string& text) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto path =
      std::filesystem::temp_directory_path() /
      (std::string("mixprec_cfg_") + info->test_suite_name() + "_" + info->name() + ".toml");
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

inline TrainConfig load_text(const std::string& text, const std::vector<std::string>& o = {}) {
  return load_config(write_toml(text), o);
}

// The error message of loading `text` (with overrides), "" when it loads.
inline std::string load_error(const std::string& text, const std::vector<std::string>& o = {}) {
  return mixprec::testing::error_of([&] { load_text(text, o); });
}

}  // namespace mixprec::config::testing
