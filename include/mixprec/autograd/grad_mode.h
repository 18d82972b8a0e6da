// Whether ops record autograd history on this thread. Off inside NoGradGuard and while
// backward() runs (mixprec computes first-order gradients only).
#pragma once

namespace mixprec {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Scoped: no op inside records history; restores the previous mode on exit (nestable).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace mixprec
