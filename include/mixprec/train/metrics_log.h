// <run_dir>/metrics.jsonl: one JSON object per line, flushed line by line so a killed run
// leaves every finished step on disk (at most a torn last line, which readers skip).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "mixprec/io/regular_file.h"

namespace mixprec::train {

inline constexpr std::size_t kMetricsScanBlockBytes = 1 << 16;

// The length of the file's complete lines: the offset just past its last '\n' (0 when it has
// none), read backwards from its size at opening in blocks of block_bytes.
uint64_t end_of_last_complete_line(const io::RegularFile& file, std::size_t block_bytes);

class MetricsLog {
 public:
  // append: keep earlier complete lines (a resumed run; a torn last line left by a kill is
  // dropped); else start the file afresh. Errors name the path, which must be a regular file
  // or missing (a FIFO or a device is refused, never waited on).
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
