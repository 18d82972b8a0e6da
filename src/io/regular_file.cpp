#include "mixprec/io/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mixprec/core/error.h"

namespace mixprec::io {

std::string file_type_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

RegularFile::RegularFile(const std::filesystem::path& path, const std::string& where, Mode mode)
    : path_(path), where_(where) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
  const int access = mode == Mode::read ? O_RDONLY : O_RDWR | O_CREAT | O_APPEND;
  fd_ = ::open(path.c_str(), access | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    struct stat st {};  // a socket cannot be opened at all (ENXIO): say what it is
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw Error(where, "is " + file_type_name(st.st_mode) + ", not a regular file");
    throw Error(where, std::string("cannot open the file: ") + std::strerror(err) +
                           (err == ELOOP ? " (a symbolic link loop?)" : ""));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw Error(where, std::string("cannot stat the file: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw Error(where, "is " + file_type_name(st.st_mode) + ", not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  ::fcntl(fd_, F_SETFL, access & O_APPEND);  // a regular file: blocking I/O as usual
}

int RegularFile::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

void RegularFile::read_at(uint64_t offset, void* dst, std::size_t n) const {
  auto* out = static_cast<char*>(dst);
  uint64_t at = offset;
  while (n > 0) {
    const ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(at));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      throw Error(where_,
                  "cannot read at byte " + std::to_string(at) + ": " + std::strerror(errno));
    if (got == 0) {
      struct stat st {};
      const std::string now =
          ::fstat(fd_, &st) == 0 ? std::to_string(st.st_size) + " bytes" : "shorter";
      throw Error(where_, "ends at byte " + std::to_string(at) + ", before the " +
                              std::to_string(n) + " bytes wanted there: it is " + now + " now, " +
                              std::to_string(size_) + " when opened (truncated while being read?)");
    }
    out += got;
    at += static_cast<uint64_t>(got);
    n -= static_cast<std::size_t>(got);
  }
}

std::string RegularFile::read_all(uint64_t max_bytes) const {
  const auto too_large = [&](const std::string& size) {
    return Error(where_, "is " + size + " bytes, more than the " + std::to_string(max_bytes) +
                             " this file may hold");
  };
  if (size_ > max_bytes) throw too_large(std::to_string(size_));
  std::string text;
  char buffer[1 << 16];
  uint64_t at = 0;
  for (;;) {  // to the end, not to size_: the file may have grown since fstat
    const ssize_t got = ::pread(fd_, buffer, sizeof buffer, static_cast<off_t>(at));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(where_, std::string("cannot read the file: ") + std::strerror(errno));
    if (got == 0) break;
    at += static_cast<uint64_t>(got);
    if (at > max_bytes) throw too_large("more than " + std::to_string(max_bytes));
    text.append(buffer, static_cast<std::size_t>(got));
  }
  return text;
}

std::string read_regular_file(const std::filesystem::path& path, uint64_t max_bytes,
                              const std::string& where) {
  return RegularFile(path, where).read_all(max_bytes);
}

}  // namespace mixprec::io
