// The on/off switch of an optional kernel path (AMX tiles, the own GEMM): on unless
// its environment variable is "0" (comparisons with the portable path, machines where the
// path misbehaves); tests flip it with set(). Read on first use, so no static-initialisation
// order can see it unset.
#pragma once

#include <atomic>
#include <cstdlib>
#include <string_view>

namespace mixprec::cpu {

class PathSwitch {
 public:
  explicit PathSwitch(const char* variable) : on_(from_environment(variable)) {}
  bool on() const { return on_.load(std::memory_order_relaxed); }
  void set(bool on) { on_.store(on, std::memory_order_relaxed); }

 private:
  static bool from_environment(const char* variable) {
    const char* v = std::getenv(variable);
    return v == nullptr || std::string_view(v) != "0";
  }
  std::atomic<bool> on_;
};

}  // namespace mixprec::cpu
