#include "mixprec/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "mixprec/core/error.h"

namespace mixprec::io {

void write_all(int fd, const void* data, std::size_t n, const std::string& where) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Error(where, std::string("write failed: ") + std::strerror(errno));
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void write_file_atomically(const std::string& target_path, const std::function<void(int fd)>& write,
                           const std::string& where) {
  namespace fs = std::filesystem;
  const fs::path target(target_path);
  // A unique temporary (O_EXCL, random suffix), so concurrent writers never share one.
  std::string tmp_name = target.string() + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp_name.data());
  if (fd < 0) throw Error(where, "cannot create " + tmp_name + ": " + std::strerror(errno));
  ::fchmod(fd, 0644);  // mkstemp creates 0600; these are ordinary files
  const fs::path tmp(tmp_name);
  try {
    write(fd);
    if (::fsync(fd) != 0) throw Error(where, std::string("fsync failed: ") + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  ::close(fd);
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw Error(where, "cannot rename the temporary file into place: " + ec.message());
  }
  // Make the rename itself durable.
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::vector<std::string> remove_interrupted_temporaries(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // "<target>.tmp." and mkstemp's six characters, for the targets mixprec writes this way
    // (checkpoints, exported weights, the token cache): never a user's file of another name.
    const std::size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || name.size() != at + 11) continue;
    const std::string target = name.substr(0, at);
    if (!target.ends_with(".safetensors") &&
        !(target.starts_with("tokens-") && target.ends_with(".bin")))
      continue;
    std::error_code type_ec, remove_ec;
    if (it->is_regular_file(type_ec) && fs::remove(it->path(), remove_ec))
      removed.push_back(it->path().string());
  }
  return removed;
}

}  // namespace mixprec::io
