// Fixture runs for the report tests: metrics.jsonl files written into a per-test folder.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

namespace mixprec::report::testing {

// A folder under the system temp dir, unique per process and test, removed at the end.
class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = std::filesystem::temp_directory_path() /
            ("mixprec_report_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" +
             info->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // root/<name>/metrics.jsonl holding `text`; returns root/<name>.
  std::filesystem::path run_dir(const std::string& name, const std::string& text) const {
    const std::filesystem::path dir = root_ / name;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "metrics.jsonl", std::ios::binary) << text;
    return dir;
  }

  std::filesystem::path root_;
};

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A train line with the given step, loss, grad_norm (JSON text, "null" allowed) and scale.
inline std::string train_line(int step, double loss, const std::string& grad_norm = "1.5",
                              double loss_scale = 65536) {
  return "{\"type\":\"train\",\"step\":" + std::to_string(step) +
         ",\"loss\":" + std::to_string(loss) + ",\"grad_norm\":" + grad_norm +
         ",\"loss_scale\":" + std::to_string(loss_scale) + ",\"tokens_per_s\":1000.0}\n";
}

}  // namespace mixprec::report::testing
