// <run_dir>/metrics.jsonl: one JSON object per line, flushed line by line so a killed run
// leaves every finished step on disk (at most a torn last line, which readers skip).
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>

namespace mixprec::train {

class MetricsLog {
 public:
  // append: keep earlier complete lines (a resumed run; a torn last line left by a kill is
  // dropped); else start the file afresh.
  MetricsLog(const std::filesystem::path& path, bool append);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const std::string& json_line);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mixprec::train
