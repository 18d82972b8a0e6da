// Writing a file so that readers see the old contents or the complete new ones, never a
// mixture: write a unique temporary next to the target (mkstemp), fsync it, rename it over the
// target, fsync the directory. Any failure removes the temporary and leaves the target as it
// was. Shared by safetensors files (checkpoints) and the token cache.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace mixprec::io {

// Calls write(fd) on the open temporary, then publishes it as `target` (mode 0644). Errors,
// and whatever `write` throws, propagate as mixprec::Error("<where>", ...).
void write_file_atomically(const std::string& target, const std::function<void(int fd)>& write,
                           const std::string& where);

// Removes the temporaries an interrupted write_file_atomically left in `dir` (a process killed
// between mkstemp and rename): files named "<target>.tmp.XXXXXX" whose target is a
// *.safetensors file or a tokens-*.bin cache. Only for a directory no other process writes to
// (the trainer holds the run directory's lock). Returns what it removed; never throws.
std::vector<std::string> remove_interrupted_temporaries(const std::string& dir);

// All n bytes to fd (retrying short writes and EINTR); Error(where, ...) on failure.
void write_all(int fd, const void* data, std::size_t n, const std::string& where);

}  // namespace mixprec::io
