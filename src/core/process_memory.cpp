// VmRSS and VmHWM from /proc/self/status (see process_memory.h).
#include "mixprec/core/process_memory.h"

#include <fstream>
#include <string>

namespace mixprec {
namespace {

// The "<key>: <n> kB" line of /proc/self/status, in bytes.
std::size_t status_kib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() ||
        line[key.size()] != ':')
      continue;
    return static_cast<std::size_t>(std::stoull(line.substr(key.size() + 1))) * 1024;
  }
  return 0;
}

}  // namespace

std::size_t resident_bytes() {
  return status_kib("VmRSS");
}

std::size_t peak_resident_bytes() {
  return status_kib("VmHWM");
}

}  // namespace mixprec
