// The JSONL metrics file.
#include "mixprec/train/metrics_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/io/regular_file.h"

namespace mixprec::train {

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw Error("metrics " + path.string(), what);
}

// The file, created when missing, refused unless regular: a FIFO would block open() and every
// write, a device would swallow the log. O_RDWR and O_NONBLOCK so that opening a FIFO returns.
int open_regular_for_append(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    fail(path, std::string("cannot open the file: ") + std::strerror(err) +
                   (err == ELOOP ? " (a symbolic link loop?)" : ""));
  }
  struct stat st {};
  const int err = ::fstat(fd, &st) != 0 ? errno : 0;
  if (err != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    if (err != 0) fail(path, std::string("cannot stat the file: ") + std::strerror(err));
    fail(path, "is " + io::file_type_name(st.st_mode) + ", not a regular file");
  }
  ::fcntl(fd, F_SETFL, O_APPEND);  // a regular file: blocking writes as usual
  return fd;
}

}  // namespace

uint64_t end_of_last_complete_line(int fd, uint64_t size, std::size_t block_bytes,
                                   const std::filesystem::path& path) {
  // Backwards a block at a time: a torn line of 50 MB is 800 reads of 64 KiB, not 50 M seeks.
  std::vector<char> block(std::max<std::size_t>(block_bytes, 1));
  uint64_t end = size;  // bytes [end, size) are known to hold no newline
  while (end > 0) {
    const uint64_t n = std::min<uint64_t>(end, block.size());
    const uint64_t begin = end - n;
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd, block.data() + got, n - got, static_cast<off_t>(begin + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        fail(path, "cannot read the file to find its last complete line: " +
                       std::string(r < 0 ? std::strerror(errno) : "it became shorter"));
      got += static_cast<std::size_t>(r);
    }
    if (const void* nl = ::memrchr(block.data(), '\n', n))
      return begin + static_cast<uint64_t>(static_cast<const char*>(nl) - block.data()) + 1;
    end = begin;
  }
  return 0;
}

MetricsLog::MetricsLog(const std::filesystem::path& path, bool append) : path_(path) {
  const int fd = open_regular_for_append(path);
  std::optional<uint64_t> cut_to;  // the length to cut the file back to, if any
  try {
    if (!append) {
      cut_to = 0;
    } else {
      // A run killed mid-write leaves a partial last line; appending after it would glue the
      // next run's first line onto it. Cut the file back to its last complete line.
      struct stat st {};
      if (::fstat(fd, &st) != 0)
        fail(path, std::string("cannot stat the file: ") + std::strerror(errno));
      const auto size = static_cast<uint64_t>(st.st_size);
      const uint64_t keep = end_of_last_complete_line(fd, size, kMetricsScanBlockBytes, path);
      if (keep != size) cut_to = keep;
    }
    if (cut_to && ::ftruncate(fd, static_cast<off_t>(*cut_to)) != 0)
      fail(path,
           std::string(append ? "cannot trim the torn last line: " : "cannot empty the file: ") +
               std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  file_ = ::fdopen(fd, "a");
  if (file_ == nullptr) {
    const int err = errno;
    ::close(fd);
    fail(path, std::string("cannot open the file: ") + std::strerror(err));
  }
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
