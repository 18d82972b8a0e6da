// One trainer per run directory: a second one would tear metrics.jsonl lines and replace the
// first one's checkpoints. The lock is flock() on <run_dir>/.mixprec.lock, holding the owner's
// pid for the message; the kernel releases it when the process ends, however it ends (a
// SIGKILLed run leaves no stale lock).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace mixprec::train {

class RunDirLock {
 public:
  // Takes the lock, or returns nullopt with *why saying who holds it (or why it cannot be
  // taken: the directory is not writable).
  static std::optional<RunDirLock> try_lock(const std::filesystem::path& run_dir, std::string* why);
  RunDirLock(RunDirLock&& other) noexcept;
  RunDirLock& operator=(RunDirLock&& other) noexcept;
  RunDirLock(const RunDirLock&) = delete;
  ~RunDirLock();

 private:
  explicit RunDirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace mixprec::train
