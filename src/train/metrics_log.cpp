// The JSONL metrics file.
#include "mixprec/train/metrics_log.h"

#include <cerrno>
#include <cstring>

#include "mixprec/error.h"

namespace mixprec::train {

MetricsLog::MetricsLog(const std::filesystem::path& path, bool append) : path_(path) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  MIXPREC_CHECK(file_ != nullptr, "metrics",
                "cannot open " + path.string() + ": " + std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const std::string& json_line) {
  const bool ok = std::fputs(json_line.c_str(), file_) >= 0 && std::fputc('\n', file_) != EOF &&
                  std::fflush(file_) == 0;
  MIXPREC_CHECK(ok, "metrics", "cannot write " + path_.string() + ": " + std::strerror(errno));
}

}  // namespace mixprec::train
