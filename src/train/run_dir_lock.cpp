#include "mixprec/train/run_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace mixprec::train {

std::optional<RunDirLock> RunDirLock::try_lock(const std::filesystem::path& run_dir,
                                               std::string* why) {
  const std::filesystem::path path = run_dir / ".mixprec.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    *why = "cannot open " + path.string() + ": " + std::strerror(errno);
    return std::nullopt;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    const ssize_t n = ::pread(fd, pid, sizeof pid - 1, 0);
    *why = run_dir.string() + " is in use by another mixprec run" +
           (n > 0 ? " (pid " + std::string(pid, static_cast<std::size_t>(n)) + ")" : "") +
           ": wait for it to end, or choose another run_dir";
    ::close(fd);
    return std::nullopt;
  }
  const std::string mine = std::to_string(::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, mine.data(), mine.size(), 0) < 0) {
    // The pid is only for the other run's message; the lock holds without it.
  }
  return RunDirLock(fd);
}

RunDirLock::RunDirLock(RunDirLock&& other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}

RunDirLock& RunDirLock::operator=(RunDirLock&& other) noexcept {
  std::swap(fd_, other.fd_);  // other's destructor releases what this held
  return *this;
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace mixprec::train
