// Reading a file that a user named, safely: opened without blocking (a FIFO with no writer
// would block open() for ever), checked to be a regular file (not a FIFO, directory, device or
// socket: /dev/zero never ends, a directory reads as empty), bounded in size before anything
// is read, and read by offset (pread) so a file truncated while it is read is an error naming
// it, not a SIGBUS as a memory map gives.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace mixprec::io {

// "a FIFO", "a directory", "a character device", ... for an st_mode.
std::string file_type_name(mode_t mode);

class RegularFile {
 public:
  // read: read-only, the file must exist. append: read and append, created when missing (a
  // log; writes then block as usual).
  enum class Mode { read, append };
  // Opens `path`. Throws Error(where, ...) (`where` names the path) when it cannot be opened
  // (missing, a symlink loop, no permission) or is not a regular file.
  RegularFile(const std::filesystem::path& path, const std::string& where, Mode mode = Mode::read);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::string& where() const { return where_; }
  uint64_t size() const { return size_; }  // when opened
  int fd() const { return fd_; }
  // The descriptor, now the caller's to close (e.g. through fdopen).
  int release();

  // Exactly n bytes from `offset` into dst. Throws Error naming the file when they are not
  // there any more (the file was truncated since it was opened) or the read fails.
  void read_at(uint64_t offset, void* dst, std::size_t n) const;

  // The whole file; Error naming it when it is (or grows) larger than max_bytes.
  std::string read_all(uint64_t max_bytes) const;

 private:
  std::filesystem::path path_;
  std::string where_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// RegularFile(path, where).read_all(max_bytes).
std::string read_regular_file(const std::filesystem::path& path, uint64_t max_bytes,
                              const std::string& where);

}  // namespace mixprec::io
