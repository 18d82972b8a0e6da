// Test switch: mixprec's own GEMM block product on or off (off: the OpenBLAS path) for a
// scope, restored as it was on exit (an environment's MIXPREC_OWN_GEMM=0 stays in force).
#pragma once

#include "cpu/gemm_own.h"

namespace mixprec::testing {

class OwnGemmPath {
 public:
  explicit OwnGemmPath(bool on) { cpu::own_gemm::set_enabled(on); }
  ~OwnGemmPath() { cpu::own_gemm::set_enabled(saved_); }
  OwnGemmPath(const OwnGemmPath&) = delete;
  OwnGemmPath& operator=(const OwnGemmPath&) = delete;

 private:
  // enabled() also needs a build; the switch itself is what is restored.
  bool saved_ = cpu::own_gemm::switched_on();
};

}  // namespace mixprec::testing
