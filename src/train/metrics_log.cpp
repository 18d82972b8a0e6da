// The JSONL metrics file.
#include "mixprec/train/metrics_log.h"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "mixprec/core/error.h"

namespace mixprec::train {

namespace {

// A run killed mid-write leaves a partial last line; appending after it would glue the next
// run's first line onto it. Cut the file back to its last complete line.
void drop_torn_last_line(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return;
  std::uintmax_t keep = size;
  char c = 0;
  while (keep > 0 && std::fseek(f, static_cast<long>(keep - 1), SEEK_SET) == 0 &&
         std::fread(&c, 1, 1, f) == 1 && c != '\n')
    --keep;
  std::fclose(f);
  if (keep != size) std::filesystem::resize_file(path, keep, ec);
  MIXPREC_CHECK(!ec, "metrics",
                "cannot trim the torn last line of " + path.string() + ": " + ec.message());
}

}  // namespace

MetricsLog::MetricsLog(const std::filesystem::path& path, bool append) : path_(path) {
  if (append) drop_torn_last_line(path);
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
