// The JSONL metrics file.
#include "mixprec/train/metrics_log.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/io/regular_file.h"

namespace mixprec::train {

uint64_t end_of_last_complete_line(const io::RegularFile& file, std::size_t block_bytes) {
  // Backwards a block at a time: a torn line of 50 MB is 800 reads of 64 KiB, not 50 M seeks.
  std::vector<char> block(std::max<std::size_t>(block_bytes, 1));
  uint64_t end = file.size();  // bytes [end, size) are known to hold no newline
  while (end > 0) {
    const uint64_t n = std::min<uint64_t>(end, block.size());
    const uint64_t begin = end - n;
    file.read_at(begin, block.data(), n);
    if (const void* nl = ::memrchr(block.data(), '\n', n))
      return begin + static_cast<uint64_t>(static_cast<const char*>(nl) - block.data()) + 1;
    end = begin;
  }
  return 0;
}

MetricsLog::MetricsLog(const std::filesystem::path& path, bool append) : path_(path) {
  // Created when missing, refused unless regular: a FIFO would block open() and every write,
  // a device would swallow the log.
  io::RegularFile file(path, "metrics " + path.string(), io::RegularFile::Mode::append);
  // A run killed mid-write leaves a partial last line; appending after it would glue the next
  // run's first line onto it. Cut the file back to its last complete line (or to nothing).
  const uint64_t keep =
      append ? end_of_last_complete_line(file, kMetricsScanBlockBytes) : uint64_t{0};
  if (keep != file.size() && ::ftruncate(file.fd(), static_cast<off_t>(keep)) != 0)
    throw Error(file.where(), std::string(append ? "cannot trim the torn last line: "
                                                 : "cannot empty the file: ") +
                                  std::strerror(errno));
  file_ = ::fdopen(file.fd(), "a");
  if (file_ == nullptr)
    throw Error(file.where(), std::string("cannot open the file: ") + std::strerror(errno));
  file.release();  // now file_'s
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
